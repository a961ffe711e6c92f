package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestNonAuthClientScenarios runs the client scenarios that spec
// 2026-07-28 requires (suite 0.2.0-alpha.12) with go-sdk's
// everything-client directly and through edge-mcp with this driver: every
// scenario other than auth/* (upstream authorization, another issue) that
// passes directly must pass through edge-mcp. Both runs take about 15 s
// (the auth/* scenarios fail fast through edge-mcp).
func TestNonAuthClientScenarios(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("conformance suite: skipped in -short mode")
	}
	client := testenv.EverythingClient(t)
	edge := testenv.EdgeMCPBinary(t)
	drv := testenv.ConformanceClientDriver(t)
	_, directOut := testenv.RunConformanceClient(t, client)
	_, throughOut := testenv.RunConformanceClient(t, drv, "EDGE_MCP="+edge, "EVERYTHING_CLIENT="+client)
	direct, through := testenv.ClientScenarios(directOut), testenv.ClientScenarios(throughOut)
	checked := 0
	for _, name := range slices.Sorted(maps.Keys(direct)) {
		if strings.HasPrefix(name, "auth/") || !direct[name] {
			continue
		}
		checked++
		if !through[name] {
			t.Errorf("client scenario %s passes directly, not through edge-mcp", name)
		}
	}
	if checked == 0 {
		t.Fatalf("no non-auth scenario passed directly:\n%s", directOut)
	}
	if t.Failed() {
		t.Logf("through edge-mcp:\n%s", throughOut)
	}
}
