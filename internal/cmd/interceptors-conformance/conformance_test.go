package main

import (
	"context"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// TestConformance replays every fixture in process and through an
// interceptor server, and wants all of them to pass.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	for _, remote := range []bool{false, true} {
		name := map[bool]string{false: "in-process", true: "remote"}[remote]
		t.Run(name, func(t *testing.T) {
			r, err := replayFixtures(context.Background(), "", remote, "go", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + strings.Join(r.Lines, "\n"))
			if r.Failed != 0 || r.Passed != 24 {
				t.Fatalf("%d passed, %d failed; want 24 passed, 0 failed", r.Passed, r.Failed)
			}
		})
	}
}

// TestConformanceC replays every fixture with the C builds of the
// security modules (wasm-examples/*/c on the C kit's ABI 1.1 glue), and
// with the AssemblyScript build of secretless-redactor (as/, on the
// AssemblyScript kit's) beside the C guard. Without clang or asc it skips,
// and fails under CI.
func TestConformanceC(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	for _, tc := range []struct {
		build  string
		remote bool
	}{{"c", false}, {"c", true}, {"as", false}} {
		name := tc.build + "/" + map[bool]string{false: "in-process", true: "remote"}[tc.remote]
		t.Run(name, func(t *testing.T) {
			r, err := replayFixtures(context.Background(), "", tc.remote, tc.build, nil)
			wasmtest.SkipOrFail(t, err)
			t.Log("\n" + strings.Join(r.Lines, "\n"))
			if r.Failed != 0 || r.Passed != 24 {
				t.Fatalf("%d passed, %d failed; want 24 passed, 0 failed", r.Passed, r.Failed)
			}
		})
	}
}
