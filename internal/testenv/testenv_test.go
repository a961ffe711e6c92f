package testenv

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "internal", "testenv", "testenv.go")); err != nil {
		t.Fatalf("RepoRoot = %s, which does not hold this package: %v", root, err)
	}
}

// TestConformanceBaseline runs the conformance suite directly against the
// everything-server: the baseline the gateway must match, and proof that the
// harness works.
func TestConformanceBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite (about 15 s)")
	}
	url := StartEverythingServerHTTP(t)
	passed, failed, out := RunConformance(t, url)
	if passed != 40 || failed != 0 {
		t.Fatalf("conformance against the everything-server: %d passed, %d failed; want 40 passed, 0 failed\n%s", passed, failed, out)
	}
}

// outcomeTB records Skip and Fatal instead of stopping the test.
type outcomeTB struct {
	testing.TB
	skipped, fatal string
}

func (o *outcomeTB) Skip(args ...any)  { o.skipped = fmt.Sprint(args...) }
func (o *outcomeTB) Fatal(args ...any) { o.fatal = fmt.Sprint(args...) }

func TestMissingToolSkipsButFailsUnderCI(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			o := &outcomeTB{TB: t}
			if p := tool(o, "no-such-tool"); p != "" {
				t.Fatalf("tool returned %q for a missing tool", p)
			}
			got, other := o.skipped, o.fatal
			if ci != "" {
				got, other = o.fatal, o.skipped
			}
			if !strings.Contains(got, "go tool task tools") || other != "" {
				t.Errorf("CI=%q: skipped %q, fatal %q; want only the %s with the install command", ci, o.skipped, o.fatal, map[bool]string{true: "fatal", false: "skip"}[ci != ""])
			}
		})
	}
}

func TestNodeToolsPresent(t *testing.T) {
	for _, p := range []string{Node(t), Conformance(t), ServerEverything(t)} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			t.Errorf("%s: not a file (%v)", p, err)
		}
	}
}

func TestFreePortAndWaitHTTP(t *testing.T) {
	port := FreePort(t)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("FreePort returned %d, which cannot be listened on: %v", port, err)
	}
	srv := httptest.NewUnstartedServer(http.NotFoundHandler()) // any status counts as an answer
	srv.Listener.Close()
	srv.Listener = l
	go func() {
		time.Sleep(100 * time.Millisecond) // WaitHTTP must poll until the server is up
		srv.Start()
	}()
	t.Cleanup(srv.Close)
	WaitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/x", port))
}

func TestEverythingServerStopsAtCleanup(t *testing.T) {
	var url string
	t.Run("start", func(t *testing.T) {
		url = StartEverythingServerHTTP(t)
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("the started server does not answer: %v", err)
		}
		resp.Body.Close()
	})
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("the everything-server still answers at %s after its test ended", url)
	}
}

func TestParseClientSummary(t *testing.T) {
	const out = `Running requirements 2026-07-28 (4 scenarios) in parallel...
✓ tools_call: 5 passed, 0 failed
✗ initialize: 1 passed, 2 failed
✗ auth/dpop: 0 passed, 3 failed
✓ json-schema-2020-12-preservation: 9 passed, 0 failed

Total: 15 passed, 5 failed, 0 warnings

Not scored for 2026-07-28: 2 scenario(s) run, 1 failing. These do not affect conformance.
  ✗ auth/dpop (extension)
  ✓ json-schema-2020-12-preservation (added-after-release)
`
	s, ok := ParseClientSummary(out)
	if !ok {
		t.Fatal("no totals found")
	}
	want := "15 passed, 5 failed; required scenarios 1 of 2 passed (failing: initialize)"
	if s.String() != want {
		t.Errorf("summary = %q, want %q", s, want)
	}
	if _, ok := ParseClientSummary("no totals"); ok {
		t.Error("ok for output without totals")
	}
}

func TestConformanceNextPresent(t *testing.T) {
	if p := ConformanceNext(t); !fileExists(p) {
		t.Errorf("%s: missing", p)
	}
}

// buildBinary starts from a copy of the installed binary, so that go build
// can keep an up-to-date one; a binary that is not what the package builds
// (here a script in its place) is built again, never reused.
func TestBuildBinaryReplacesStale(t *testing.T) {
	const name, pkg = "testenv-hello", "./internal/testenv/testdata/hello"
	run := func() string {
		buildMu.Lock()
		delete(built, filepath.Join(RepoRoot(t), ".tools", "bin", name))
		buildMu.Unlock()
		out, err := exec.Command(buildBinary(t, name, pkg, true)).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run(); got != "hello" {
		t.Fatalf("first build prints %q, want hello", got)
	}
	bin := filepath.Join(RepoRoot(t), ".tools", "bin", name)
	if err := os.WriteFile(bin+".stale", []byte("#!/bin/sh\necho stale\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".stale", bin); err != nil {
		t.Fatal(err)
	}
	if got := run(); got != "hello" {
		t.Fatalf("build over a stale binary prints %q, want hello", got)
	}
	if got := run(); got != "hello" {
		t.Fatalf("build over an up-to-date binary prints %q, want hello", got)
	}
}
