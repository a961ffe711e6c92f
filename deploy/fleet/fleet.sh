#!/usr/bin/env bash
# A local fleet for trying edge-mcp's cluster mode (go tool task fleet):
# one NATS server with JetStream, three edge-mcp replicas of one fleet, and
# a strict round-robin proxy in front, so that consecutive requests land on
# different replicas. Ctrl-C (or SIGTERM) stops everything and removes the
# temporary folder.
#
# The replicas front one more edge-mcp serving the built-in demo servers
# (the demo's servers are in-process, so the replicas reach them over HTTP).
# Ports, all on 127.0.0.1: NATS 4222, front 8080, replicas 8081-8083
# (admin 9091-9093), demo upstream 8090. FLEET_BASE_PORT=18080 moves the
# HTTP ports (front, replicas, demo, admin) by the same offset.
set -euo pipefail

base=${FLEET_BASE_PORT:-8080}
nats_port=${FLEET_NATS_PORT:-4222}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/edge-mcp-fleet.XXXXXX")
pids=()

stop() {
	trap - EXIT INT TERM
	echo
	echo "fleet: stopping"
	# The front first, so that no request is routed to a replica going away.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$tmp"
	echo "fleet: stopped"
}
trap stop EXIT
trap 'exit 0' INT TERM # Ctrl-C is how a fleet stops: not a failure

# Built once: the nats-server at the version go.mod pins (the module's own
# test dependency), edge-mcp and the round-robin proxy.
echo "fleet: building into $tmp"
go build -o "$tmp/nats-server" github.com/nats-io/nats-server/v2
go build -o "$tmp/edge-mcp" ./cmd/edge-mcp
go build -o "$tmp/rrproxy" ./internal/cmd/rrproxy
go build -o "$tmp/nk" github.com/nats-io/nkeys/nk

# Every replica of a fleet has the same secret; this one lives as long
# as the fleet.
secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

# NATS lets in only the fleet's user, an nkey made now, and only on the
# fleet's subjects ("edge.>"), its buckets' and object store's subjects,
# the JetStream API and replies (what a replica uses; see the README's
# "Who may reach the fleet's NATS"). Its seed is cluster.nats_nkey.
"$tmp/nk" -gen user -pubout >"$tmp/fleet.nk.pair"
head -n 1 "$tmp/fleet.nk.pair" >"$tmp/fleet.nk"
nkey_pub=$(sed -n 2p "$tmp/fleet.nk.pair")
rm "$tmp/fleet.nk.pair"
chmod 600 "$tmp/fleet.nk"
allow='["edge.>", "_INBOX.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$O.edge_modules.>",
         "$KV.edge_control.>", "$KV.edge_sessions.>", "$KV.edge_members.>", "$KV.edge_rates.>", "$KV.edge_oauth.>"]'
cat >"$tmp/nats.conf" <<CONF
listen: "127.0.0.1:$nats_port"
jetstream { store_dir: "$tmp/nats" }
authorization {
  users = [
    { nkey: "$nkey_pub", permissions: { publish: { allow: $allow }, subscribe: { allow: $allow } } }
  ]
}
CONF
"$tmp/nats-server" -c "$tmp/nats.conf" >"$tmp/nats.log" 2>&1 &
pids+=($!)

"$tmp/edge-mcp" serve --listen "127.0.0.1:$((base + 10))" --admin off --state-dir "$tmp/demo" >"$tmp/demo.log" 2>&1 &
pids+=($!)

# One config for the three: what differs per replica (its id, listen,
# admin.listen, state_dir) comes from the environment and the flags.
cat >"$tmp/fleet.json" <<JSON
{
  "mcpServers": {"demo": {"url": "http://127.0.0.1:$((base + 10))/mcp"}},
  "limits": {"client_rate": {"rps": 20, "burst": 40}},
  "cluster": {"nats_url": "nats://127.0.0.1:$nats_port", "nats_nkey": "$tmp/fleet.nk", "name": "edge",
              "secret": "\${EDGE_FLEET_SECRET}", "replica": "\${EDGE_REPLICA}"}
}
JSON

backends=()
for i in 1 2 3; do
	EDGE_FLEET_SECRET=$secret EDGE_REPLICA="replica-$i" "$tmp/edge-mcp" serve --config "$tmp/fleet.json" \
		--listen "127.0.0.1:$((base + i))" --admin "127.0.0.1:$((base + 1010 + i))" --state-dir "$tmp/r$i" \
		>"$tmp/replica-$i.log" 2>&1 &
	pids+=($!)
	backends+=("http://127.0.0.1:$((base + i))")
done

"$tmp/rrproxy" -skip-down -listen "127.0.0.1:$base" "${backends[@]}" >"$tmp/rrproxy.log" 2>&1 &
pids+=($!)

# Wait until every replica answers /readyz and the front forwards.
for url in "${backends[@]}" "http://127.0.0.1:$base"; do
	for _ in $(seq 100); do
		curl -fsS "$url/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fsS "$url/readyz" >/dev/null || { echo "fleet: $url does not answer; logs in $tmp"; tail -n 20 "$tmp"/*.log; exit 1; }
done

cat <<TXT

fleet: running (NATS nats://127.0.0.1:$nats_port, nkey user $nkey_pub, fleet "edge", client_rate 20 rps shared)
  connect here (round robin over the replicas): http://127.0.0.1:$base/mcp
      e.g. claude mcp add --transport http edge-fleet http://127.0.0.1:$base/mcp
  replicas:  ${backends[*]}  (admin 127.0.0.1:$((base + 1011))-$((base + 1013)))
  status:    curl http://127.0.0.1:$((base + 1))/status
  logs:      $tmp/*.log
  Ctrl-C stops everything.
TXT
wait
