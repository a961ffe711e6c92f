package testenv

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
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
