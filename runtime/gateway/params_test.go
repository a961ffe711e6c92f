package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// paramServer is a go-sdk server with a tool whose "region" argument is
// mapped to the Mcp-Param-Region header (x-mcp-header): at 2026-07-28 the
// server refuses a call of it whose header is missing or differs.
func paramServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "params", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "where", InputSchema: json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	return s
}

// addHeader is a RoundTripper that adds one header to every request.
type addHeader struct {
	name, value string
}

func (a addHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(a.name, a.value)
	return http.DefaultClient.Transport.RoundTrip(r)
}

// TestParamHeaders2026: the Mcp-Param-* headers of a 2026-07-28 client's
// tools/call reach a 2026-07-28 upstream unchanged: the ones go-sdk derives
// from x-mcp-header arguments (the upstream validates them) and one nobody
// knows. A 2025 upstream gets none.
func TestParamHeaders2026(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  *mcp.StreamableHTTPOptions
		extra string
		want  bool
	}{
		{"2026-07-28 upstream", &mcp.StreamableHTTPOptions{Stateless: true}, "", true},
		{"2025-11-25 upstream", &mcp.StreamableHTTPOptions{Stateless: true}, `, "protocol_version": "2025-11-25"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := paramServer()
			rec := &probeRecorder{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, tc.opts)}
			url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"s": {"url": %q%s}`, serveHandler(t, rec), tc.extra)), Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := mcp.NewClient(&mcp.Implementation{Name: "params", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
				HTTPClient: &http.Client{Transport: addHeader{"Mcp-Param-Unknown-Thing", "kept as is"}}},
				&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if _, err := cs.ListTools(ctx, nil); err != nil { // go-sdk derives the headers from the listed schema
				t.Fatal(err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "where", Arguments: map[string]any{"region": "eu-west"}})
			if err != nil || res.IsError {
				t.Fatalf("tools/call: %v %+v", err, res)
			}
			r, _ := rec.find(t, "tools/call")
			region, unknown := r.header.Values("Mcp-Param-Region"), r.header.Values("Mcp-Param-Unknown-Thing")
			if tc.want && (len(region) != 1 || region[0] != "eu-west" || len(unknown) != 1 || unknown[0] != "kept as is") {
				t.Errorf("upstream headers: Mcp-Param-Region %q, Mcp-Param-Unknown-Thing %q", region, unknown)
			}
			if !tc.want && (len(region) != 0 || len(unknown) != 0) {
				t.Errorf("a 2025 upstream received Mcp-Param-* headers: %v", r.header)
			}
		})
	}
}

// TestParamHeadersDerived: a 2025 client's call of a tool whose argument
// is mapped to a header reaches a 2026-07-28 upstream with that header,
// derived from the arguments by edge-mcp (the upstream refuses it without).
func TestParamHeadersDerived(t *testing.T) {
	t.Parallel()
	s := paramServer()
	rec := &probeRecorder{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})}
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"s": {"url": %q}`, serveHandler(t, rec))), Options{})
	cs := connect(t, url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "where", Arguments: map[string]any{"region": "eu-west"}})
	if err != nil || res.IsError {
		t.Fatalf("tools/call: %v %+v", err, res)
	}
	r, _ := rec.find(t, "tools/call")
	if got := r.header.Values("Mcp-Param-Region"); len(got) != 1 || got[0] != "eu-west" {
		t.Errorf("Mcp-Param-Region %q, want eu-west", got)
	}
}

// TestParamHeadersOmitted2026: a 2026-07-28 client that leaves out a
// header its arguments call for is refused by the upstream (HeaderMismatch):
// edge-mcp does not fill it in for it. (go-sdk sends the headers only for
// tools it has listed; this client has not.)
func TestParamHeadersOmitted2026(t *testing.T) {
	t.Parallel()
	s := paramServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"s": {"url": %q}`, serveHandler(t, h))), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := connectModern(ctx, t, url, nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "where", Arguments: map[string]any{"region": "eu-west"}})
	if err == nil && !res.IsError {
		t.Fatalf("a call without its Mcp-Param-Region header succeeded: %+v", res)
	}
}
