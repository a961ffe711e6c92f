package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// TestUploadGivesMemoryBack: the release binary verifies an upload of the
// 2.2 MB redact-secrets module that no policy attaches (compiling it takes
// tens of MiB), and within a few seconds its RSS is back within 8 MiB of
// what it was before, for each of three uploads.
func TestUploadGivesMemoryBack(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc (Linux)")
	}
	bin := buildEdgeMCP(t, []string{"-trimpath", "-ldflags=-s -w"}, []string{"CGO_ENABLED=0"})
	dir := t.TempDir()
	config := filepath.Join(dir, "edge-mcp.json")
	if err := os.WriteFile(config, []byte(`{"log_level": "warn", "mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cmd := exec.Command(bin, "serve", "--config", config, "--listen", "127.0.0.1:0", "--admin", admin, "--state-dir", filepath.Join(dir, "state"))
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := listenURL(stdout); err != nil {
		t.Fatalf("edge-mcp: %v\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	time.Sleep(2 * time.Second) // settled: start-up pages dropped
	wasm := wasmtest.Example(t, "redact-secrets")
	rss := func() float64 {
		m, err := residentMiB(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return m["VmRSS"]
	}
	for i := 1; i <= 3; i++ {
		before := rss()
		req, _ := http.NewRequest(http.MethodPut, "http://"+admin+"/admin/modules/spare", bytes.NewReader(wasm))
		req.Header.Set("Content-Type", "application/wasm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("upload %d: %s %s", i, resp.Status, body)
		}
		peak, now := rss(), rss()
		deadline := time.Now().Add(10 * time.Second)
		for now > before+8 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			now = rss()
		}
		t.Logf("upload %d: RSS %.1f MiB before, %.1f just after, %.1f settled", i, before, peak, now)
		if now > before+8 {
			t.Errorf("upload %d: RSS %.1f MiB 10 s after the upload, %.1f before; want within 8 MiB", i, now, before)
		}
	}
}
