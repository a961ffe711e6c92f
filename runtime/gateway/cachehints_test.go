package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hintedUpstream is a stateless (2026-07-28) go-sdk server with one tool,
// one prompt and one resource named after name, whose list results carry
// the hints of hints (method → ttlMs, cacheScope); lists counts the
// prompts/list results it gave.
func hintedUpstream(t *testing.T, name string, hints map[string]mcp.Cacheable, lists *atomic.Int32) string {
	t.Helper()
	opts := &mcp.ServerOptions{SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
		var method string
		switch req.(type) {
		case *mcp.ListToolsRequest:
			method = "tools/list"
		case *mcp.ListPromptsRequest:
			method = "prompts/list"
			if lists != nil {
				lists.Add(1)
			}
		case *mcp.ListResourcesRequest:
			method = "resources/list"
		}
		if h, ok := hints[method]; ok {
			*c = h
		}
	}}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, opts)
	s.AddTool(&mcp.Tool{Name: name + "_tool", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: name + "_prompt"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	s.AddResource(&mcp.Resource{URI: "res://" + name, Name: name}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: name}}}, nil
	})
	return serveHandler(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
}

// TestUpstreamListHints: the caching hints of 2026-07-28 upstreams' list
// results bound the gateway's own for the aggregated list: the smallest
// TTL left, the most restrictive scope; an expired positive TTL makes the
// gateway re-list that upstream; a 2025 link's hints count for nothing.
func TestUpstreamListHints(t *testing.T) {
	t.Parallel()
	var aPrompts atomic.Int32
	a := hintedUpstream(t, "a", map[string]mcp.Cacheable{
		"tools/list":     {TTLMs: 30000, CacheScope: "public"},
		"prompts/list":   {TTLMs: 300, CacheScope: "public"},
		"resources/list": {TTLMs: 0, CacheScope: "public"},
	}, &aPrompts)
	b := hintedUpstream(t, "b", map[string]mcp.Cacheable{
		"tools/list":     {TTLMs: 10000, CacheScope: "private"},
		"prompts/list":   {TTLMs: 50000, CacheScope: "public"},
		"resources/list": {TTLMs: 50000, CacheScope: "public"},
	}, nil)
	old := hintedUpstream(t, "old", map[string]mcp.Cacheable{
		"tools/list": {TTLMs: 1, CacheScope: "private"},
	}, nil)
	url, _ := startGateway(t, serversJSON(
		fmt.Sprintf(`"a": {"url": %q}`, a), fmt.Sprintf(`"b": {"url": %q}`, b),
		fmt.Sprintf(`"old": {"url": %q, "protocol_version": "2025-11-25"}`, old),
	), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := connectModern(ctx, t, url, nil)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// b's 10 s less the time since it was listed; old's 1 ms (2025) ignored.
	if tools.TTLMs <= 1 || tools.TTLMs > 10000 || tools.CacheScope != "private" {
		t.Errorf("tools/list: ttlMs %d cacheScope %q, want (1, 10000] private", tools.TTLMs, tools.CacheScope)
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.TTLMs != 0 || res.CacheScope != "public" {
		t.Errorf("resources/list: ttlMs %d cacheScope %q, want 0 (a's) public", res.TTLMs, res.CacheScope)
	}

	// a's prompts expire after 300 ms: the gateway says 0 and re-lists a.
	listed := aPrompts.Load()
	time.Sleep(350 * time.Millisecond)
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if prompts.TTLMs != 0 {
		t.Errorf("prompts/list after a's TTL ran out: ttlMs %d, want 0", prompts.TTLMs)
	}
	waitFor(t, "the gateway re-listing a's prompts", func() bool { return aPrompts.Load() > listed })
	waitFor(t, "a fresh prompts TTL", func() bool {
		p, err := cs.ListPrompts(ctx, nil)
		return err == nil && p.TTLMs > 0 && p.TTLMs <= 300
	})
}
