package main

import (
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

func TestPrintFleet(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	for _, tc := range []struct {
		name  string
		fleet *fleet.Status
		want  []string
	}{
		{"no fleet", nil, nil},
		{"healthy", &fleet.Status{Name: "edge", Replica: "a", NATS: "connected", Members: []cluster.Member{
			{Replica: "a", Listen: ":8080", NATS: "connected", LastSeen: now, Generation: 7, PolicyDigest: "sha256:0123456789abcdef0123"},
			{Replica: "b", Listen: ":8081", NATS: "connected", LastSeen: now.Add(-2 * time.Second), Generation: 6,
				Failed: &cluster.Failure{Generation: 7, Error: "module too large"}},
		}}, []string{"FLEET edge", "REPLICA", "a  ", "sha256:0123456789ab ", "generation 7: module too large", "2s ago"}},
		{"degraded", &fleet.Status{Name: "edge", Replica: "a", NATS: "disconnected", Degraded: "the fleet's NATS is unreachable",
			MembersAsOf: now, Members: []cluster.Member{{Replica: "a", NATS: "disconnected", LastSeen: now}}},
			[]string{"DEGRADED: the fleet's NATS is unreachable", "members as of"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			if err := printFleet(&out, tc.fleet); err != nil {
				t.Fatal(err)
			}
			if tc.want == nil && out.Len() != 0 {
				t.Errorf("printed %q outside a fleet", out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestPrintReplicaDrift(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printReplicaDrift(&out, "guard", "sha256:aa", []admin.ModuleReplica{
		{Replica: "a", Digest: "sha256:aa", Generation: 3},
		{Replica: "c", Generation: 2, Error: "module too large"},
	})
	if got := out.String(); strings.Contains(got, "replica a") || !strings.Contains(got, "guard on replica c: runs no version; did not activate generation after 2: module too large") {
		t.Errorf("drift:\n%s", got)
	}
}
