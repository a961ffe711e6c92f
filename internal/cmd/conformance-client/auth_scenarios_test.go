package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestAuthScenariosThroughEdgeMCP runs a handful of the suite's auth/*
// client scenarios through edge-mcp with this driver as the operator:
// discovery with dynamic registration, a pre-registered client, a
// step-up during the client's call, a wrong iss that must be refused,
// and client credentials with a private_key_jwt assertion. Each must
// pass the suite's checks (go tool task conformance-client runs them
// all).
func TestAuthScenariosThroughEdgeMCP(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds three binaries and runs the suite")
	}
	node, suite := testenv.Node(t), testenv.ConformanceNext(t)
	client := testenv.EverythingClient(t)
	edge := testenv.EdgeMCPBinary(t)
	drv := testenv.ConformanceClientDriver(t)
	for _, scenario := range []string{
		"auth/metadata-default",
		"auth/pre-registration",
		"auth/scope-step-up",
		"auth/iss-wrong-issuer",
		"auth/client-credentials-jwt",
	} {
		t.Run(strings.TrimPrefix(scenario, "auth/"), func(t *testing.T) {
			t.Parallel() // each run of the suite has its own servers (port 0)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, suite, "client", "--command", drv, "--scenario", scenario,
				"--spec-version", testenv.ClientRequirements, "--force")
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"),
				"NO_COLOR=1", "EDGE_MCP="+edge, "EVERYTHING_CLIENT="+client)
			out, _ := cmd.CombinedOutput()
			if !strings.Contains(string(out), "OVERALL: PASSED") {
				t.Errorf("scenario %s through edge-mcp did not pass:\n%s", scenario, out)
			}
		})
	}
}
