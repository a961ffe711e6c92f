package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestCompareClientScenarios runs the client scenarios of spec 2026-07-28
// twice, with the go-sdk everything-client directly (the baseline) and
// through edge-mcp with this driver, and prints both summaries. It only
// reports: through edge-mcp most scenarios fail until the gateway speaks
// 2026-07-28 upstream. It runs only with EDGE_MCP_CONFORMANCE_CLIENT=1 (go
// tool task conformance-client), not in go test ./...; with
// EDGE_MCP_CONFORMANCE_OUT=DIR the suite's outputs are kept there.
func TestCompareClientScenarios(t *testing.T) {
	if os.Getenv("EDGE_MCP_CONFORMANCE_CLIENT") == "" {
		t.Skip("set EDGE_MCP_CONFORMANCE_CLIENT=1 (go tool task conformance-client)")
	}
	client := testenv.EverythingClient(t)
	edge := testenv.EdgeMCPBinary(t)
	drv := testenv.ConformanceClientDriver(t)

	direct, directOut := testenv.RunConformanceClient(t, client)
	through, throughOut := testenv.RunConformanceClient(t, drv, "EDGE_MCP="+edge, "EVERYTHING_CLIENT="+client)
	if dir := os.Getenv("EDGE_MCP_CONFORMANCE_OUT"); dir != "" {
		keep(t, dir, "direct.txt", directOut)
		keep(t, dir, "through-edge-mcp.txt", throughOut)
	}
	fmt.Printf("\nClient scenarios, requirements %s (conformance 0.2.0-alpha.12):\n", testenv.ClientRequirements)
	fmt.Printf("%-18s %8s %8s %10s\n", "", "passed", "failed", "required")
	for _, r := range []struct {
		name string
		s    testenv.ClientSummary
	}{{"direct", direct}, {"through edge-mcp", through}} {
		fmt.Printf("%-18s %8d %8d %5d of %d\n", r.name, r.s.Passed, r.s.Failed, r.s.RequiredPassed, r.s.Required)
	}
	fmt.Printf("\ndirect:           %s\nthrough edge-mcp: %s\n", direct, through)
}

// keep writes a suite output to dir/name.
func keep(t *testing.T, dir, name, out string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}
