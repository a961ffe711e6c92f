//go:build linux

package main

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDropStartupPages checks that the clean pages of the running binary
// leave its RSS (and that it keeps running: the code comes back).
func TestDropStartupPages(t *testing.T) {
	before := rssFileKiB(t)
	released := dropStartupPages(slog.New(slog.DiscardHandler))
	after := rssFileKiB(t)
	t.Logf("RssFile %d -> %d KiB; released %d KiB", before, after, released)
	if released <= 0 || after >= before {
		t.Fatalf("RssFile %d -> %d KiB (released %d): nothing dropped", before, after, released)
	}
}

func TestCleanMappings(t *testing.T) {
	t.Parallel()
	got := cleanMappings(strings.NewReader(testSmaps), "/bin/gw")
	if len(got) != 1 || got[0].start != 0x400000 || got[0].end != 0xb08000 || got[0].rssKiB != 6240 {
		t.Fatalf("got %+v; want only the clean code mapping", got)
	}
}

// FuzzCleanMappings: any text parses without panicking, and only into
// non-empty mappings of the path.
func FuzzCleanMappings(f *testing.F) {
	f.Add(testSmaps)
	f.Add("00400000-00b08000 r-xp 00000000 08:01 123 /bin/gw\nRss: 4 kB\n")
	f.Add("zz-00b08000 r-xp 0 0 0 /bin/gw\n\t\n  Rss:\n")
	f.Fuzz(func(t *testing.T, smaps string) {
		for _, m := range cleanMappings(strings.NewReader(smaps), "/bin/gw") {
			if m.end <= m.start {
				t.Fatalf("mapping %+v from %q", m, smaps)
			}
		}
	})
}

// testSmaps is /proc/self/smaps of a process running /bin/gw: one clean
// code mapping, read-only ones with pages of their own, a writable one and
// another file's.
const testSmaps = `00400000-00b08000 r-xp 00000000 08:01 123 /bin/gw
Rss:                6240 kB
Private_Dirty:      6240 kB
Anonymous:             0 kB
00b08000-0128e000 r--p 00708000 08:01 123 /bin/gw
Rss:                  12 kB
Private_Dirty:         4 kB
Anonymous:             4 kB
00b08000-0128e000 r--p 00708000 08:01 123 /bin/gw
Rss:                  12 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
Swap:                  4 kB
0128e000-012fe000 rw-p 00e8e000 08:01 123 /bin/gw
Rss:                 320 kB
Private_Dirty:         0 kB
012fe000-03349000 rw-p 00000000 00:00 0
Rss:                 112 kB
7f00000000-7f00001000 r--p 00000000 08:01 9 /bin/other
Rss:                   4 kB
Private_Dirty:         0 kB
`

func rssFileKiB(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile")
	return 0
}

// TestIdleGatewayDropsBinaryPages checks releaseMemory's idle drop on the
// release binary: a request after start-up faults pages of the binary back
// (fault-around maps 64 KiB per fault), and once a whole release interval
// passes without a request the gateway drops them again.
func TestIdleGatewayDropsBinaryPages(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "edge-mcp.json")
	if err := os.WriteFile(config, []byte(`{"log_level": "debug"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, "serve", "--config", config, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", dir)
	base, logs := p.base, p.stderr

	const idle = `msg="binary pages released while idle"`
	waitLog := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(4*releaseInterval + 5*time.Second)
		for strings.Count(logs.String(), what) < n {
			if time.Now().After(deadline) {
				t.Fatalf("no %d× %s in the log:\n%s", n, what, logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitLog(`msg="start-up pages of the binary dropped"`, 1)
	waitLog(idle, 1) // what start-up ran after its drop
	for range 2 {    // a request brings pages back; a quiet interval drops them
		before := strings.Count(logs.String(), idle)
		resp, err := http.Get(base + "/status")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		waitLog(idle, before+1)
	}
	t.Logf("%s", logs)
}

// BenchmarkDropStartupPages: one drop of the test binary's clean pages
// (reading /proc/self/smaps included); B/op is the garbage an idle drop
// leaves in the heap.
func BenchmarkDropStartupPages(b *testing.B) {
	b.ReportAllocs()
	log := slog.New(slog.DiscardHandler)
	for b.Loop() {
		dropStartupPages(log)
	}
}
