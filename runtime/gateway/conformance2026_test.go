package gateway

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestConformance2026ThroughGateway runs the server scenarios of the
// conformance suite 0.2.0-alpha.12 that a spec revision requires, once
// directly against go-sdk v1.8.0's everything-server in its default
// (stateless, 2026-07-28) mode and once through edge-mcp in front of
// another instance of it, and compares them check by check.
//
// With --requirements 2026-07-28 every scenario must come out the same
// both ways, but for the unscored tasks extension, where every check that
// passes directly must pass through (the gateway routes tasks itself and
// passes more of them). With
// --requirements 2025-11-25 every check that passes directly must pass
// through edge-mcp (the gateway passes more: it has sessions, the
// stateless server does not). Each run of the suite takes a few seconds
// (2026-07-28: about 3 s directly, 7 s through edge-mcp).
func TestConformance2026ThroughGateway(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("conformance suite: skipped in -short mode")
	}
	for _, tc := range []struct {
		requirements string // "all": every scenario of the suite (--suite all)
		same         bool   // every check's status equal; else: what passes directly passes through
	}{
		{"2026-07-28", true},
		{"2025-11-25", false},
		{"all", false},
	} {
		t.Run(tc.requirements, func(t *testing.T) {
			t.Parallel() // each selection has its servers and gateway
			run := func(url string) testenv.ServerChecks {
				if tc.requirements == "all" {
					return testenv.RunConformanceNextServerAll(t, url)
				}
				return testenv.RunConformanceNextServer(t, url, tc.requirements)
			}
			direct := run(testenv.StartEverythingServerStateless(t))
			up := testenv.StartEverythingServerStateless(t)
			url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"everything": {"url": %q}`, up)), Options{})
			through := run(url)
			dp, df := direct.Counts()
			tp, tf := through.Counts()
			t.Logf("%s: directly %d passed, %d failed; through edge-mcp %d passed, %d failed", tc.requirements, dp, df, tp, tf)
			for _, name := range slices.Sorted(maps.Keys(direct)) {
				got, ok := through[name]
				// The tasks extension is unscored and the gateway routes
				// tasks itself (tasks.go): there it may pass more.
				same := tc.same && !strings.HasPrefix(name, "tasks-")
				switch {
				case !ok:
					t.Errorf("scenario %s: not run through edge-mcp", name)
				case same && !slices.Equal(got, direct[name]):
					t.Errorf("scenario %s differs:\n directly:        %s\n through edge-mcp: %s", name, strings.Join(direct[name], ", "), strings.Join(got, ", "))
				case !same:
					if lost := lostChecks(direct[name], got); len(lost) > 0 {
						t.Errorf("scenario %s: passes directly, not through edge-mcp: %s (through: %s)", name, strings.Join(lost, ", "), strings.Join(got, ", "))
					}
				}
			}
		})
	}
}

// lostChecks returns the checks that passed directly but not through the
// gateway (counting each check id's successes).
func lostChecks(direct, through []string) []string {
	passed := map[string]int{}
	for _, c := range through {
		if id, ok := strings.CutSuffix(c, " SUCCESS"); ok {
			passed[id]++
		}
	}
	var lost []string
	for _, c := range direct {
		if id, ok := strings.CutSuffix(c, " SUCCESS"); ok {
			if passed[id] == 0 {
				lost = append(lost, id)
				continue
			}
			passed[id]--
		}
	}
	return lost
}
