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

names=() # what each of pids is, for the stop messages

stop() {
	trap - EXIT INT TERM
	echo
	echo "fleet: stopping ${#pids[@]} processes: the front first, then the replicas (each lets its calls in flight finish, up to limits.shutdown_grace, 10 s), the demo and NATS"
	local start=$SECONDS
	# The front first, so that no request is routed to a replica going away.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		wait "${pids[i]}" 2>/dev/null || true
		echo "fleet: ${names[i]} stopped ($((SECONDS - start)) s)"
	done
	rm -rf "$tmp"
	echo "fleet: stopped"
}
trap stop EXIT
trap 'exit 0' INT TERM # Ctrl-C is how a fleet stops: not a failure

# Built once: the nats-server at the version go.mod pins (the module's own
# test dependency), edge-mcp and the round-robin proxy.
echo "fleet: building into $tmp (the first time a minute or so)"
for target in "nats-server github.com/nats-io/nats-server/v2" "edge-mcp ./cmd/edge-mcp" "rrproxy ./internal/cmd/rrproxy" "nk github.com/nats-io/nkeys/nk"; do
	set -- $target
	echo "fleet: building $1"
	go build -o "$tmp/$1" "$2"
done

# Every replica of a fleet has the same secret; this one lives as long
# as the fleet.
secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

# NATS lets in only the fleet's user, an nkey made now, and only on the
# fleet's subjects ("edge.>"), its buckets' and object store's subjects,
# the JetStream API and replies (what a replica uses; see docs/fleet.md,
# "Who may reach the fleet's NATS"). Its seed is cluster.nats_nkey.
"$tmp/nk" -gen user -pubout >"$tmp/fleet.nk.pair"
head -n 1 "$tmp/fleet.nk.pair" >"$tmp/fleet.nk"
nkey_pub=$(sed -n 2p "$tmp/fleet.nk.pair")
rm "$tmp/fleet.nk.pair"
chmod 600 "$tmp/fleet.nk"
allow='["edge.>", "_INBOX.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$O.edge_modules.>",
         "$KV.edge_control.>", "$KV.edge_sessions.>", "$KV.edge_members.>", "$KV.edge_rates.>", "$KV.edge_oauth.>", "$KV.edge_icstate.>"]'
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
pids+=($!) names+=("NATS")

"$tmp/edge-mcp" serve --listen "127.0.0.1:$((base + 10))" --admin off --state-dir "$tmp/demo" >"$tmp/demo.log" 2>&1 &
pids+=($!) names+=("the demo upstream")

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

backends=() admins=()
echo "fleet: starting NATS, the demo upstream, three replicas and the front; waiting until each answers /readyz"
for i in 1 2 3; do
	EDGE_FLEET_SECRET=$secret EDGE_REPLICA="replica-$i" "$tmp/edge-mcp" serve --config "$tmp/fleet.json" \
		--listen "127.0.0.1:$((base + i))" --admin "127.0.0.1:$((base + 1010 + i))" --state-dir "$tmp/r$i" \
		>"$tmp/replica-$i.log" 2>&1 &
	pids+=($!) names+=("replica-$i")
	backends+=("http://127.0.0.1:$((base + i))")
	admins+=("http://127.0.0.1:$((base + 1010 + i))")
done

"$tmp/rrproxy" -skip-down -listen "127.0.0.1:$base" "${backends[@]}" >"$tmp/rrproxy.log" 2>&1 &
pids+=($!) names+=("the front (rrproxy)")

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
  replica-1: ${backends[0]}/mcp   admin API ${admins[0]}
  replica-2: ${backends[1]}/mcp   admin API ${admins[1]}
  replica-3: ${backends[2]}/mcp   admin API ${admins[2]}
  status:    edge-mcp status --url ${backends[0]}   (or curl ${backends[0]}/status)
  modules:   edge-mcp module ls --admin ${admins[0]}   (the fleet shares them: any replica's admin API)
  logs:      $tmp/*.log
  Ctrl-C stops everything.
TXT
wait
