package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkPeakRSS measures the peak resident memory (VmHWM) of the release
// binary under load, in a fresh process per workload: load=echo8 is 8
// sessions calling a small echo tool continuously for the op's duration;
// load=result1MiB is one session fetching 1 MiB results one after another.
// Each op is one second of load; peak-MiB is the process's high-water mark
// at the end, calls/s the load it carried.
func BenchmarkPeakRSS(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc (Linux)")
	}
	up := mcp.NewServer(&mcp.Implementation{Name: "peak-upstream", Version: "1"}, nil)
	type echoArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	big := strings.Repeat("log line with \"quotes\" and a newline\n", 1<<20/37)
	mcp.AddTool(up, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	b.Cleanup(srv.Close)
	config := filepath.Join(b.TempDir(), "edge-mcp.json")
	os.WriteFile(config, []byte(fmt.Sprintf(`{"log_level": "warn", "mcpServers": {"up": {"url": %q}}}`, srv.URL)), 0o600)
	bin := releaseBinary(b)

	for _, load := range []struct {
		name     string
		sessions int
		tool     string
		args     map[string]any
	}{
		{"echo8", 8, "echo", map[string]any{"text": "hello"}},
		{"result1MiB", 1, "big", nil},
	} {
		b.Run("load="+load.name, func(b *testing.B) {
			args := []string{"serve", "--config", config, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", b.TempDir()}
			pid := startIdle(b, bin, args, 1)
			base := gatewayBase(b, pid)
			calls := 0
			start := time.Now()
			for b.Loop() {
				calls += callFor(b, base, load.sessions, load.tool, load.args, time.Second)
			}
			peak, err := peakMiB(pid)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(peak, "peak-MiB")
			b.ReportMetric(float64(calls)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// gatewayBase returns the base URL of the edge-mcp process pid, as
// startIdle recorded it.
func gatewayBase(b *testing.B, pid int) string {
	b.Helper()
	base, ok := idleBases.Load(pid)
	if !ok {
		b.Fatalf("no listen address recorded for process %d", pid)
	}
	return base.(string)
}

// idleBases maps the pid of a process startIdle started to its base URL.
var idleBases sync.Map

// callFor runs sessions sessions calling tool continuously for d and
// returns the number of calls completed.
func callFor(b *testing.B, base string, sessions int, tool string, args map[string]any, d time.Duration) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for range sessions {
		wg.Go(func() {
			c := mcp.NewClient(&mcp.Implementation{Name: "peak", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
			if err != nil {
				b.Errorf("connect: %v", err)
				return
			}
			defer cs.Close()
			n := 0
			for ctx.Err() == nil {
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil && ctx.Err() == nil {
					b.Errorf("call %s: %v", tool, err)
					return
				}
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	return total
}

// peakMiB reads the high-water mark of process pid's resident set.
func peakMiB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("process %d: no VmHWM", pid)
}
