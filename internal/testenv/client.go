package testenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ClientRequirements is the spec revision whose required client scenarios
// RunConformanceClient runs.
const ClientRequirements = "2026-07-28"

// ClientSummary is what one run of the suite's client scenarios reports.
type ClientSummary struct {
	Passed, Failed int // checks, from the "Total:" line
	// Required and RequiredPassed count the scored scenarios (those not
	// listed as "Not scored") and the ones among them without a failure.
	Required, RequiredPassed int
	// FailedRequired names the scored scenarios that failed.
	FailedRequired []string
}

var (
	// scenarioRE matches a scenario's result line: "✓ name: 5 passed, 0 failed".
	scenarioRE = regexp.MustCompile(`(?m)^([✓✗]) (\S+): \d+ passed, \d+ failed`)
	// notScoredRE matches an entry of the "Not scored" list: "  ✗ name (extension)".
	notScoredRE = regexp.MustCompile(`(?m)^\s+[✓✗] (\S+) \(`)
)

// ParseClientSummary reads the totals and the required scenarios from the
// output of `conformance client --requirements …`. ok is false when the
// output has no "Total:" line.
func ParseClientSummary(output string) (s ClientSummary, ok bool) {
	m := totalRE.FindStringSubmatch(output)
	if m == nil {
		return s, false
	}
	s.Passed, _ = strconv.Atoi(m[1])
	s.Failed, _ = strconv.Atoi(m[2])
	notScored := map[string]bool{}
	for _, m := range notScoredRE.FindAllStringSubmatch(output, -1) {
		notScored[m[1]] = true
	}
	for _, m := range scenarioRE.FindAllStringSubmatch(output, -1) {
		if notScored[m[2]] {
			continue
		}
		s.Required++
		if m[1] == "✓" {
			s.RequiredPassed++
		} else {
			s.FailedRequired = append(s.FailedRequired, m[2])
		}
	}
	return s, true
}

// RunConformanceClient runs the client scenarios that spec 2026-07-28
// requires (suite 0.2.0-alpha.12) with command as the client, env added to
// the environment, and returns the summary and the full output. It fails the
// test when the suite does not finish within ten minutes or prints no
// totals.
func RunConformanceClient(t testing.TB, command string, env ...string) (ClientSummary, string) {
	t.Helper()
	node, suite := Node(t), ConformanceNext(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "client", "--command", command, "--requirements", ClientRequirements)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	output := string(out)
	if ctx.Err() != nil {
		t.Fatalf("testenv: the conformance client scenarios did not finish within 10 minutes:\n%s", output)
	}
	s, ok := ParseClientSummary(output)
	if !ok {
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("testenv: running the conformance suite: %v", err)
		}
		t.Fatalf("testenv: no totals in the conformance output (%v):\n%s", err, output)
	}
	return s, output
}

// String renders the summary on one line.
func (s ClientSummary) String() string {
	return strconv.Itoa(s.Passed) + " passed, " + strconv.Itoa(s.Failed) + " failed; required scenarios " +
		strconv.Itoa(s.RequiredPassed) + " of " + strconv.Itoa(s.Required) + " passed" + failedList(s.FailedRequired)
}

func failedList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (failing: " + strings.Join(names, ", ") + ")"
}

// ClientScenarios reads every scenario's result line of a client run:
// scenario name → whether it passed (no failed check).
func ClientScenarios(output string) map[string]bool {
	out := map[string]bool{}
	for _, m := range scenarioRE.FindAllStringSubmatch(output, -1) {
		out[m[2]] = m[1] == "✓"
	}
	return out
}
