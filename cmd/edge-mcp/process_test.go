package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testTempDir is the run's temporary folder (TestMain).
var testTempDir string

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// releaseBinary builds the command once per test run as the release task
// does (static, -trimpath) and returns its path.
func releaseBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		// Not testTempDir/edge-mcp: that is the default state folder of
		// the in-process tests (XDG_STATE_HOME).
		binPath = filepath.Join(testTempDir, "bin", "edge-mcp")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatalf("building edge-mcp: %v", binErr)
	}
	return binPath
}

// process is a running edge-mcp binary.
type process struct {
	cmd    *exec.Cmd
	stderr *lockedWriter // its log, readable while it runs
	base   string        // http://host:port of its main listener
	admin  string        // http://host:port of its admin API, "" when off
	banner string        // what it printed on stdout up to its status line
	exited chan error    // Wait's result, once the process ended
}

// startBinary starts the release binary with args (serve …) and waits
// until it says where it listens; it is killed when the test ends.
func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	return startBinaryIn(t, "", nil, args...)
}

// startBinaryIn is startBinary in the folder dir ("": the test's) with the
// environment env (nil: the test's).
func startBinaryIn(t *testing.T, dir string, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(releaseBinary(t), args...), stderr: &lockedWriter{w: &strings.Builder{}}, exited: make(chan error, 1)}
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		p.exited <- nil // for a later reader
	})
	buf := make([]byte, 0, 4096)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(string(buf), "status: curl") || strings.Contains(strings.Join(args, " "), "--admin 127") && !strings.Contains(string(buf), "admin API:") {
		if time.Now().After(deadline) {
			t.Fatalf("edge-mcp did not say where it listens:\n%s\n%s", buf, p.stderr)
		}
		chunk := make([]byte, 1024)
		n, err := stdout.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			t.Fatalf("edge-mcp ended: %v\n%s\n%s", err, buf, p.stderr)
		}
	}
	go io.Copy(io.Discard, stdout)
	p.banner = string(buf)
	for _, line := range strings.Split(string(buf), "\n") {
		if _, rest, ok := strings.Cut(line, " listening on "); ok {
			p.base = strings.TrimSuffix(strings.TrimSpace(rest), "/mcp")
		}
		if _, rest, ok := strings.Cut(line, "admin API: "); ok {
			p.admin = strings.TrimSuffix(strings.TrimSpace(rest), "/admin/modules")
		}
	}
	return p
}

// peakRSS returns the process's peak resident set (VmHWM) in bytes.
func (p *process) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// sigterm stops the process with SIGTERM and fails the test unless it
// exits with status 0 within d; it returns how long the stop took.
func (p *process) sigterm(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.stderr)
		}
	case <-time.After(d):
		t.Fatalf("still running %v after SIGTERM\n%s", d, p.stderr)
	}
	return time.Since(start)
}
