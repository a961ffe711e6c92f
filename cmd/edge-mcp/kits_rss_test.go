package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// BenchmarkIdleRSSPolicy is BenchmarkIdleRSS's "config" case (release
// build) with one redaction policy attached to the upstream's tools, as
// the Go module and as each port (BENCHMARKS.md, "Modules in other
// languages"); policy=none has no policy.
func BenchmarkIdleRSSPolicy(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc (Linux)")
	}
	up := mcp.NewServer(&mcp.Implementation{Name: "rss-upstream", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	b.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	bin := releaseBinary(b)
	for _, lang := range append([]string{"none", "go"}, wasmtest.PortLangs...) {
		for _, cache := range []string{"cold", "warm"} {
			if lang == "none" && cache == "warm" {
				continue
			}
			b.Run("policy="+lang+"/cache="+cache, func(b *testing.B) { idleWithPolicy(b, bin, redactConfig(b, lang, srv.URL), cache) })
		}
	}
}

// idleWithPolicy starts the gateway with config (cache=warm: once before,
// stopped, so that the state folder's compilation cache holds the module)
// and reports its idle memory.
func idleWithPolicy(b *testing.B, bin, config, cache string) {
	args := []string{"serve", "--config", config, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}
	if cache == "warm" {
		first := startIdle(b, bin, args, 1)
		if p, err := os.FindProcess(first); err == nil {
			p.Kill()
		}
		time.Sleep(300 * time.Millisecond)
	}
	pid := startIdle(b, bin, args, 1)
	var mem map[string]float64
	for b.Loop() {
		var err error
		if mem, err = residentMiB(pid); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(mem["VmRSS"], "rss-MiB")
	b.ReportMetric(mem["RssAnon"], "anon-MiB")
}

// redactConfig writes a config fronting url with redact-secrets in lang
// attached to every tool ("none": no policy) and returns its path.
func redactConfig(b *testing.B, lang, url string) string {
	b.Helper()
	dir := b.TempDir()
	policies := ""
	if lang != "none" {
		wasm := wasmtest.Example(b, "redact-secrets")
		if lang != "go" {
			wasm = wasmtest.Port(b, lang)
		}
		if err := os.WriteFile(filepath.Join(dir, "redact.wasm"), wasm, 0o600); err != nil {
			b.Fatal(err)
		}
		policies = `, "policies": [{"name": "redact", "module": "redact.wasm", "tools": ["*"]}]`
	}
	config := filepath.Join(dir, "edge-mcp.json")
	doc := fmt.Sprintf(`{"log_level": "warn", "mcpServers": {"up": {"url": %q}}%s}`, url, policies)
	if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
		b.Fatal(err)
	}
	return config
}

// BenchmarkStartToFirstCallPolicy: one op starts the release binary with
// redact-secrets attached (as each language's module, or none) and makes
// the first tools/call through it, whose result the policy redacts; the
// time is from exec to that answer. cache=warm keeps the state folder
// (XDG_STATE_HOME, where the compiled-module cache lives) and
// XDG_CACHE_HOME of a previous start, cache=cold starts with empty ones.
func BenchmarkStartToFirstCallPolicy(b *testing.B) {
	up := mcp.NewServer(&mcp.Implementation{Name: "start-upstream", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	b.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	bin := releaseBinary(b)
	for _, lang := range append([]string{"none", "go"}, wasmtest.PortLangs...) {
		config := redactConfig(b, lang, srv.URL)
		for _, cache := range []string{"cold", "warm"} {
			b.Run(fmt.Sprintf("policy=%s/cache=%s", lang, cache), func(b *testing.B) {
				warmDir := b.TempDir()
				if cache == "warm" {
					startFirstCall(b, bin, config, warmDir, lang != "none")
				}
				b.ResetTimer()
				for range b.N {
					dir := warmDir
					if cache == "cold" {
						b.StopTimer()
						dir = b.TempDir()
						b.StartTimer()
					}
					startFirstCall(b, bin, config, dir, lang != "none")
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/start")
			})
		}
	}
}

// startFirstCall starts bin with config and cacheHome as XDG_CACHE_HOME
// and XDG_STATE_HOME (the state folder holds the compilation cache),
// calls echo until it answers (checking the redaction when redacted) and
// stops the process.
func startFirstCall(b *testing.B, bin, config, cacheHome string, redacted bool) {
	b.Helper()
	cmd := exec.Command(bin, "serve", "--config", config, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cacheHome, "XDG_STATE_HOME="+cacheHome)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	base, err := listenURL(stdout)
	if err != nil {
		b.Fatalf("%v\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "first-call", Version: "1"}, nil)
	for {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
		if err == nil {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "mail a@example.com"}})
			cs.Close()
			if err == nil && !res.IsError {
				text := res.Content[0].(*mcp.TextContent).Text
				if redacted == strings.Contains(text, "a@example.com") {
					b.Fatalf("redacted %v, answer %q", redacted, text)
				}
				return
			}
		}
		if ctx.Err() != nil {
			b.Fatalf("no answer: %v\n%s", err, stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}
