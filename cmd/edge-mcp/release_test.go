package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
	dir := t.TempDir()
	config := filepath.Join(dir, "edge-mcp.json")
	if err := os.WriteFile(config, []byte(`{"log_level": "warn", "mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	p := startBinaryIn(t, "", append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(dir, "cache")),
		"serve", "--config", config, "--listen", "127.0.0.1:0", "--admin", admin, "--state-dir", filepath.Join(dir, "state"))
	time.Sleep(2 * time.Second) // settled: start-up pages dropped
	wasm := wasmtest.Example(t, "redact-secrets")
	rss := func() float64 {
		m, err := residentMiB(p.cmd.Process.Pid)
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

// TestIdleTrim plays sequences of looks at releaseMemory's idle decision:
// a quiet interval drops what a request brought back, a busy one never
// drops, and pages that come back within a quiet interval of a drop (a
// fleet replica's background work) are kept rather than dropped at every
// interval.
func TestIdleTrim(t *testing.T) {
	const mib = 1 << 20
	type look struct {
		quiet bool
		file  uint64 // file-backed bytes at the look
		drop  bool   // want a drop
		after uint64 // file-backed bytes right after the drop
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"request then quiet", []look{
			{quiet: false, file: 10 * mib},
			{quiet: true, file: 10 * mib, drop: true, after: 2 * mib},
			{quiet: true, file: 2*mib + 300<<10}, // the idle loop's own pages
			{quiet: true, file: 2*mib + 300<<10},
			{quiet: false, file: 7 * mib}, // a /status request
			{quiet: true, file: 7 * mib, drop: true, after: 2 * mib},
			{quiet: true, file: 2 * mib},
		}},
		{"busy never drops", []look{
			{quiet: false, file: 10 * mib},
			{quiet: false, file: 12 * mib},
			{quiet: false, file: 12 * mib},
		}},
		{"background work brings pages back", []look{
			{quiet: true, file: 10 * mib, drop: true, after: 2 * mib},
			{quiet: true, file: 7 * mib}, // back within one interval, no request
			{quiet: true, file: 8 * mib},
			{quiet: true, file: 9 * mib},
			{quiet: true, file: 10*mib + 600<<10, drop: true, after: 2 * mib}, // beyond that working set
		}},
		{"a request right after a drop", []look{
			{quiet: true, file: 10 * mib, drop: true, after: 2 * mib},
			{quiet: false, file: 7 * mib},
			{quiet: true, file: 7 * mib, drop: true, after: 2 * mib},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var trim idleTrim
			for i, l := range tc.looks {
				if got := trim.look(l.quiet, l.file); got != l.drop {
					t.Fatalf("look %d (quiet %v, file %d MiB): drop %v, want %v", i, l.quiet, l.file/mib, got, l.drop)
				}
				if l.drop {
					trim.dropped(l.file, l.after)
				}
			}
		})
	}
}
