#!/bin/sh
# build.sh SRC OUT [ASC-ARGS...]: builds an AssemblyScript policy into OUT
# with asc ($ASC, else asc on PATH; npm install assemblyscript). Exits 127
# when there is none. --use abort= drops the env.abort import the sandbox
# refuses; further arguments go to asc (an Extism plugin: --path to the
# node_modules holding @extism/as-pdk).
set -eu
src=$1 out=$2
shift 2
asc=${ASC:-asc}
if ! command -v "$asc" >/dev/null 2>&1; then
	echo "build.sh: $asc not found: npm install assemblyscript and set ASC to its node_modules/.bin/asc (in the edge-mcp repository: go tool task tools)" >&2
	exit 127
fi
exec "$asc" "$src" --runtime incremental --use abort= -O3 --noAssert --uncheckedBehavior always -o "$out" "$@"
