#!/bin/sh
# build.sh OUT: builds the redact-secrets Extism plugin into OUT with the
# AssemblyScript kit's build.sh and the Extism AssemblyScript PDK from
# $EXTISM_PDK (a node_modules directory holding @extism/as-pdk; default
# .tools/node_modules, installed by go tool task tools). Run from the
# repository root. Exits 127 when the PDK or asc is missing.
set -eu
out=$1
pdk=${EXTISM_PDK:-.tools/node_modules}
if [ ! -f "$pdk/@extism/as-pdk/index.ts" ]; then
	echo "build.sh: @extism/as-pdk not found in $pdk: npm install @extism/as-pdk there and set EXTISM_PDK to it (in the edge-mcp repository: go tool task tools)" >&2
	exit 127
fi
exec sh guest/kits/as/build.sh wasm-examples/redact-secrets/extism/plugin.ts "$out" --path "$pdk"
