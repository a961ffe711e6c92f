package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

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
	bin := buildEdgeMCP(b, []string{"-trimpath", "-ldflags=-s -w"}, []string{"CGO_ENABLED=0"})
	for _, lang := range append([]string{"none", "go"}, wasmtest.KitLangs...) {
		b.Run("policy="+lang, func(b *testing.B) {
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
			doc := fmt.Sprintf(`{"log_level": "warn", "mcpServers": {"up": {"url": %q}}%s}`, srv.URL, policies)
			if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
				b.Fatal(err)
			}
			pid := startIdle(b, bin, []string{"serve", "--config", config, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, 1)
			var mem map[string]float64
			for b.Loop() {
				var err error
				if mem, err = residentMiB(pid); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(mem["VmRSS"], "rss-MiB")
			b.ReportMetric(mem["RssAnon"], "anon-MiB")
		})
	}
}
