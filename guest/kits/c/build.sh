#!/bin/sh
# build.sh OUT SRC...: builds a C policy (with the kit's edge.c, found beside
# this script) into OUT with clang for wasm32-wasi as a reactor (Debian:
# apt-get install clang lld wasi-libc libclang-rt-dev-wasm32). $CC picks the
# compiler (default clang). Exits 127 when there is none.
set -eu
out=$1
shift
kit=$(dirname "$0")
cc=${CC:-clang}
case "$cc" in cc | gcc) cc=clang ;; esac
if ! command -v "$cc" >/dev/null 2>&1; then
	echo "build.sh: $cc not found: apt-get install clang lld wasi-libc libclang-rt-dev-wasm32" >&2
	exit 127
fi
exec "$cc" --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -I "$kit" \
	-Wl,--strip-all -o "$out" "$@" "$kit/edge.c"
