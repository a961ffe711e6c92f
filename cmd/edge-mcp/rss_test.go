package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/runtime/gateway"
)

// BenchmarkIdleRSS measures the resident memory of the real edge-mcp binary
// once it is up and idle. build=release is the binary `go tool task build`
// ships (static, stripped); build=plain is a plain `go build`. "config"
// fronts one small go-sdk server reached over HTTP, "demo" serves the
// built-in demo, "cluster" is "config" with a cluster section (a replica of
// a fleet, connected to an in-process NATS server). Each op reads VmRSS once; rss-MiB is the last reading.
func BenchmarkIdleRSS(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc (Linux)")
	}

	up := mcp.NewServer(&mcp.Implementation{Name: "rss-upstream", Version: "1"}, nil)
	type echoArgs struct {
		Text string `json:"text" jsonschema:"the text to send back"`
	}
	mcp.AddTool(up, &mcp.Tool{Name: "echo", Description: "Returns its text argument unchanged."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	b.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	config := filepath.Join(b.TempDir(), "edge-mcp.json")
	doc := fmt.Sprintf(`{"log_level": "warn", "mcpServers": {"up": {"url": %q}}}`, srv.URL)
	if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
		b.Fatalf("writing the config: %v", err)
	}

	// "cluster" is "config" joined to a fleet: a cluster section on an
	// in-process NATS server (with JetStream), connected while idle.
	nats := natstest.Start(b)
	clusterConfig := filepath.Join(b.TempDir(), "edge-mcp-cluster.json")
	doc = fmt.Sprintf(`{"log_level": "warn", "mcpServers": {"up": {"url": %q}}, "cluster": {"allow_anonymous_nats": true, "nats_url": %q, "secret": "rss-benchmark-secret-0123456789abcdef"}}`,
		srv.URL, nats.ClientURL())
	if err := os.WriteFile(clusterConfig, []byte(doc), 0o600); err != nil {
		b.Fatalf("writing the config: %v", err)
	}

	for _, build := range []struct {
		name  string
		flags []string
		env   []string
	}{
		{"release", []string{"-trimpath", "-ldflags=-s -w"}, []string{"CGO_ENABLED=0"}},
		{"plain", nil, nil},
	} {
		b.Run("build="+build.name, func(b *testing.B) {
			bin := buildEdgeMCP(b, build.flags, build.env)
			for _, c := range []struct {
				name    string
				args    []string
				servers int
			}{
				{"config", []string{"serve", "--config", config, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, 1},
				{"demo", []string{"serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, 2},
				{"cluster", []string{"serve", "--config", clusterConfig, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, 1},
			} {
				b.Run(c.name, func(b *testing.B) {
					pid := startIdle(b, bin, c.args, c.servers)
					var mem map[string]float64
					for b.Loop() {
						var err error
						if mem, err = residentMiB(pid); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(mem["VmRSS"], "rss-MiB")
					// RSS splits into private memory (heap, stacks) and
					// clean pages of the binary mapped from the page cache,
					// which grow with the binary and the kernel can drop.
					b.ReportMetric(mem["RssAnon"], "anon-MiB")
					b.ReportMetric(mem["RssFile"], "file-MiB")
				})
			}
		})
	}
}

// buildEdgeMCP builds the command with the given go build flags and extra
// environment into a temporary directory and returns the binary's path.
func buildEdgeMCP(b testing.TB, flags, env []string) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "edge-mcp")
	args := append(append([]string{"build"}, flags...), "-o", bin, ".")
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building edge-mcp: %v\n%s", err, out)
	}
	return bin
}

// idleSettle is how long startIdle lets the gateway settle after its last
// /status poll: long enough for releaseMemory to see a whole interval
// without a request and drop the binary's pages that start-up and the
// polls ran (release.go), as an idle gateway does.
const idleSettle = 2*releaseInterval + 500*time.Millisecond

// startIdle starts bin with args, waits until its /status lists `servers`
// upstreams, all connected, then lets it settle for idleSettle. The
// process is killed when the benchmark ends.
func startIdle(b *testing.B, bin string, args []string, servers int) int {
	b.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatalf("piping edge-mcp's stdout: %v", err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting edge-mcp: %v", err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})

	base, err := listenURL(stdout)
	if err != nil {
		b.Fatalf("edge-mcp did not say where it listens: %v\nstderr:\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout) // keep the pipe drained

	ctx, cancel := context.WithTimeout(b.Context(), 20*time.Second)
	defer cancel()
	if err := waitConnected(ctx, base, servers); err != nil {
		b.Fatalf("edge-mcp: %v\nstderr:\n%s", err, stderr.String())
	}
	time.Sleep(idleSettle)
	idleBases.Store(cmd.Process.Pid, base)
	return cmd.Process.Pid
}

// listenURL reads the command's banner up to the "listening on URL/mcp" line
// and returns the base URL.
func listenURL(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		_, rest, ok := strings.Cut(sc.Text(), " listening on ")
		if ok {
			return strings.TrimSuffix(strings.TrimSpace(rest), "/mcp"), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading stdout: %w", err)
	}
	return "", errors.New("stdout ended before the listening line")
}

// waitConnected polls base/status until it lists n upstreams, all connected.
func waitConnected(ctx context.Context, base string, n int) error {
	return waitConnectedAs(ctx, base, "", n)
}

// waitConnectedAs is waitConnected for a gateway that authenticates its
// clients: /status is asked with the client key key.
func waitConnectedAs(ctx context.Context, base, key string, n int) error {
	var last string
	for {
		st, err := fetchStatus(ctx, base, key)
		if err != nil {
			last = err.Error()
		} else {
			connected := 0
			for _, s := range st {
				if s.State == gateway.StateConnected {
					connected++
				}
			}
			if len(st) == n && connected == n {
				return nil
			}
			last = fmt.Sprintf("%d of %d upstreams connected", connected, len(st))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the upstreams to connect (%s): %w", last, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func fetchStatus(ctx context.Context, base, key string) ([]gateway.ServerStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		return nil, fmt.Errorf("building the status request: %w", err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getting /status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("getting /status: %s", resp.Status)
	}
	var doc struct {
		Servers []gateway.ServerStatus `json:"servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("decoding /status: %w", err)
	}
	return doc.Servers, nil
}

// residentMiB reads the resident set size of process pid from /proc, with
// its anonymous and file-backed parts: VmRSS, RssAnon and RssFile.
func residentMiB(pid int) (map[string]float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("reading the status of process %d: %w", pid, err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(data)) {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "RssAnon" && key != "RssFile") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err != nil {
			return nil, fmt.Errorf("parsing %s %q: %w", key, strings.TrimSpace(rest), err)
		}
		out[key] = kb / 1024
	}
	if _, ok := out["VmRSS"]; !ok {
		return nil, fmt.Errorf("process %d: no VmRSS in /proc status", pid)
	}
	return out, nil
}
