package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// ServerChecks are the outcomes of one run of the conformance suite's
// server scenarios: scenario name → the statuses of its checks, one
// "check-id STATUS" per check (SUCCESS, FAILURE, WARNING, SKIPPED, INFO),
// sorted (a check id may occur more than once).
type ServerChecks map[string][]string

// Counts returns how many checks passed (SUCCESS) and failed (FAILURE).
func (c ServerChecks) Counts() (passed, failed int) {
	for _, checks := range c {
		for _, ch := range checks {
			switch {
			case strings.HasSuffix(ch, " SUCCESS"):
				passed++
			case strings.HasSuffix(ch, " FAILURE"):
				failed++
			}
		}
	}
	return passed, failed
}

// RunConformanceNextServer runs the server scenarios of the conformance
// suite 0.2.0-alpha.12 that spec revision requirements requires
// (`server --url URL --requirements REV -o DIR`) against url and returns
// every check's status, read from the per-scenario checks.json files the
// suite writes. It fails the test when the suite does not finish within
// five minutes or writes no results.
func RunConformanceNextServer(t testing.TB, url, requirements string) ServerChecks {
	t.Helper()
	return runConformanceNextServer(t, url, "--requirements", requirements)
}

// RunConformanceNextServerAll is RunConformanceNextServer for every server
// scenario of the suite (`--suite all`: pending and draft ones too, of
// every spec revision).
func RunConformanceNextServerAll(t testing.TB, url string) ServerChecks {
	t.Helper()
	return runConformanceNextServer(t, url, "--suite", "all")
}

func runConformanceNextServer(t testing.TB, url string, selection ...string) ServerChecks {
	t.Helper()
	node, suite := Node(t), ConformanceNext(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	args := append([]string{suite, "server", "--url", url}, selection...)
	cmd := exec.CommandContext(ctx, node, append(args, "-o", filepath.Join(dir, "out"))...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	out, _ := cmd.CombinedOutput() // exit status 1 when a scenario fails: the checks say which
	if ctx.Err() != nil {
		t.Fatalf("testenv: the conformance suite did not finish within 5 minutes:\n%s", out)
	}
	checks, err := readServerChecks(filepath.Join(dir, "out"))
	if err != nil || len(checks) == 0 {
		t.Fatalf("testenv: reading the conformance results (%v):\n%s", err, out)
	}
	return checks
}

// readServerChecks reads dir/server-<scenario>-<timestamp>/checks.json.
func readServerChecks(dir string) (ServerChecks, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	out := ServerChecks{}
	for _, e := range entries {
		name, ok := scenarioOfDir(e.Name())
		if !e.IsDir() || !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", name, err)
		}
		var checks []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			return nil, fmt.Errorf("scenario %s: decoding checks.json: %w", name, err)
		}
		list := []string{}
		for _, c := range checks {
			list = append(list, c.ID+" "+c.Status)
		}
		slices.Sort(list)
		out[name] = list
	}
	return out, nil
}

// resultsDirRE matches a results directory's name:
// server-<scenario>-<YYYY>-<MM>-<DD>T<HH>-<MM>-<SS>-<mmm>Z.
var resultsDirRE = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// scenarioOfDir returns the scenario of a results directory.
func scenarioOfDir(dir string) (string, bool) {
	m := resultsDirRE.FindStringSubmatch(dir)
	if m == nil {
		return "", false
	}
	return m[1], true
}
