#!/bin/sh
# build.sh SRC OUT: builds the Rust policy crate rooted at SRC into OUT with a
# rustc that has the wasm32-unknown-unknown target (Debian: apt-get install
# rustc libstd-rust-dev-wasm32; rustup: rustup target add
# wasm32-unknown-unknown). $RUSTC picks one. Exits 127 when there is none.
set -eu
src=$1 out=$2
for c in "${RUSTC:-}" rustc /usr/bin/rustc; do
	[ -n "$c" ] || continue
	sysroot=$("$c" --print sysroot 2>/dev/null) || continue
	if [ -d "$sysroot/lib/rustlib/wasm32-unknown-unknown" ]; then
		exec "$c" --edition 2021 --target wasm32-unknown-unknown --crate-type cdylib \
			-C opt-level=s -C panic=abort -C lto -C strip=symbols -C link-arg=-zstack-size=65536 -o "$out" "$src"
	fi
done
echo "build.sh: no rustc with the wasm32-unknown-unknown target: apt-get install rustc libstd-rust-dev-wasm32" >&2
exit 127
