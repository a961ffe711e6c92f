package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioHelperEnv makes the test binary a tiny stdio MCP server (see
// TestMain) instead of running the tests.
const stdioHelperEnv = "EDGE_MCP_TEST_STDIO_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(stdioHelperEnv); mode != "" {
		os.Exit(serveOldStdio(os.Stdin, os.Stdout, mode == "ignore-unknown"))
	}
	// The tests run in parallel, and httptest.Server.Close closes the idle
	// connections of http.DefaultTransport: a test's POST that took one of
	// them as another test closed its server failed ("CloseIdleConnections
	// called"). The default client (go-sdk's too, when given none) gets a
	// transport of its own.
	http.DefaultClient.Transport = http.DefaultTransport.(*http.Transport).Clone()
	waitBoundParallel()
	code := m.Run()
	stopChromium()
	os.Exit(code)
}

// waitBoundParallel runs twice GOMAXPROCS tests at once unless -parallel
// is given: most of this package's tests wait far more than they compute
// (subprocess servers exiting, NATS record expiries, token lifetimes, a
// browser), 349 s of 610 s of test time when each ran alone, so at the
// default (GOMAXPROCS) the package held the suite's last minutes with
// idle cores.
func waitBoundParallel() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0)))
	}
}

// serveOldStdio is a 2025-11-25 stdio server with one tool, "hello", that
// exits (status 3) on a method it does not know, as some stdio servers do
// (go-sdk issue 1177), or with ignore ignores it.
func serveOldStdio(in io.Reader, out io.Writer, ignore bool) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil {
			return 2
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"exit-on-unknown","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"hello","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			result = `{"content":[{"type":"text","text":"hello from stdio"}]}`
		case "ping":
			result = `{}`
		case "notifications/initialized", "notifications/cancelled":
			continue
		default:
			if ignore {
				continue
			}
			return 3
		}
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result)
	}
	return 0
}

// recorded is one HTTP request an upstream received.
type recorded struct {
	method string // HTTP method
	header http.Header
	body   []byte
}

// probeRecorder is an http.Handler in front of an MCP server that records every
// request.
type probeRecorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []recorded
}

func (rec *probeRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, recorded{method: r.Method, header: r.Header.Clone(), body: body})
	rec.mu.Unlock()
	rec.next.ServeHTTP(w, r)
}

// has reports whether a POST of the JSON-RPC method was recorded.
func (rec *probeRecorder) has(method string) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.reqs {
		if r.method == http.MethodPost && bytes.Contains(r.body, []byte(`"method":"`+method+`"`)) {
			return true
		}
	}
	return false
}

// find returns the recorded POST of the JSON-RPC method.
func (rec *probeRecorder) find(t *testing.T, method string) (recorded, map[string]json.RawMessage) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.reqs {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if r.method == http.MethodPost && json.Unmarshal(r.body, &msg) == nil && msg.Method == method {
			return r, msg.Params.Meta
		}
	}
	t.Fatalf("upstream received no %s", method)
	return recorded{}, nil
}

// refuseDiscover answers server/discover as a 2025 server does: with
// -32601 (status 0) or with an HTTP error status; everything else goes to
// next.
func refuseDiscover(status int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		switch {
		case json.Unmarshal(body, &msg) != nil || msg.Method != "server/discover":
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
		case status != 0:
			http.Error(w, "unsupported protocol version", status)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, msg.ID)
		}
	})
}

// unsupportedOnce answers the first server/discover with HTTP 400 and
// UnsupportedProtocolVersion (-32022) naming supported (a JSON array);
// everything else goes to next.
func unsupportedOnce(supported string, next http.Handler) http.Handler {
	var refused atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "server/discover" && refused.CompareAndSwap(false, true) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":%s,"requested":"2026-07-28"}}}`, msg.ID, supported)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// fixtureServer is a go-sdk server with a tool, a prompt and a resource.
func fixtureServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://doc", Name: "doc"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://doc", Text: "the doc"}}}, nil
	})
	return s
}

// TestUpstreamProtocolProbe: edge-mcp probes server/discover and speaks
// 2026-07-28 to a server that offers it, 2025-11-25 (initialize) to one
// that refuses the probe or offers only older revisions; a 2025 client
// reaches the tools, prompts and resources of each.
func TestUpstreamProtocolProbe(t *testing.T) {
	t.Parallel()
	stateless := func(s *mcp.Server) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	}
	stateful := func(s *mcp.Server) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	}
	for _, tc := range []struct {
		name    string
		handler func(*mcp.Server) http.Handler
		extra   string // more keys of the server entry
		want    string
	}{
		{"go-sdk stateless", stateless, "", "2026-07-28"},
		{"go-sdk stateless, configured 2026-07-28", stateless, `, "protocol_version": "2026-07-28"`, "2026-07-28"},
		{"go-sdk stateless, pinned to 2025-11-25", stateless, `, "protocol_version": "2025-11-25"`, "2025-11-25"},
		{"go-sdk stateful (offers 2025 only)", stateful, "", "2025-11-25"},
		{"server/discover is -32601", func(s *mcp.Server) http.Handler { return refuseDiscover(0, stateful(s)) }, "", "2025-11-25"},
		{"server/discover is HTTP 400", func(s *mcp.Server) http.Handler { return refuseDiscover(http.StatusBadRequest, stateful(s)) }, "", "2025-11-25"},
		// The request-metadata client scenario: the first request is
		// refused with UnsupportedProtocolVersion listing 2026-07-28; the
		// client retries with it instead of falling back to initialize.
		{"first server/discover is -32022 listing 2026-07-28", func(s *mcp.Server) http.Handler {
			return unsupportedOnce(`["2026-07-28"]`, stateless(s))
		}, "", "2026-07-28"},
		{"server/discover is -32022 listing 2025-11-25 only", func(s *mcp.Server) http.Handler {
			return unsupportedOnce(`["2025-11-25"]`, stateful(s))
		}, "", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &probeRecorder{next: tc.handler(fixtureServer())}
			url, g := startGateway(t, serversJSON(fmt.Sprintf(`"s": {"url": %q%s}`, serveHandler(t, rec), tc.extra)), Options{})
			if st := g.Status()[0]; st.State != StateConnected || st.ProtocolVersion != tc.want {
				t.Fatalf("status: %+v, want connected with protocol_version %s", st, tc.want)
			}
			checkFixture(t, connect(t, url, nil))
			if tc.want == "2026-07-28" {
				check2026Requests(t, rec)
			}
		})
	}
}

// checkFixture lists and uses the fixture's tool, prompt and resource, the
// tool call with a per-connection _meta key of the client's own.
func checkFixture(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if names := toolNames(t, cs); strings.Join(names, ",") != "echo" {
		t.Fatalf("tools: %v, want [echo]", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"},
		Meta: mcp.Meta{metaClientInfo: map[string]any{"name": "downstream", "version": "1"}}})
	if err != nil || res.IsError || textOf(res) != "echo: x" {
		t.Fatalf("tools/call: %v %+v", err, res)
	}
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
	if err != nil || len(pr.Messages) != 1 {
		t.Fatalf("prompts/get: %v %+v", err, pr)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://doc"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "the doc" {
		t.Fatalf("resources/read: %v %+v", err, rr)
	}
}

// check2026Requests checks what a 2026-07-28 upstream received: the
// headers of each POST, the gateway's own _meta keys, no session and no
// GET stream.
func check2026Requests(t *testing.T, rec *probeRecorder) {
	t.Helper()
	for _, tc := range []struct{ method, name string }{
		{"server/discover", ""}, {"tools/list", ""}, {"tools/call", "echo"}, {"prompts/get", "greet"}, {"resources/read", "test://doc"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			r, meta := rec.find(t, tc.method)
			if got := r.header.Get("Mcp-Protocol-Version"); got != "2026-07-28" {
				t.Errorf("MCP-Protocol-Version: %q", got)
			}
			if got := r.header.Get("Mcp-Method"); got != tc.method {
				t.Errorf("Mcp-Method: %q, want %q", got, tc.method)
			}
			if got := r.header.Get("Mcp-Name"); got != tc.name {
				t.Errorf("Mcp-Name: %q, want %q", got, tc.name)
			}
			if sid := r.header.Get("Mcp-Session-Id"); sid != "" {
				t.Errorf("Mcp-Session-Id sent: %q", sid)
			}
			if v := string(meta[metaProtocolVersion]); v != `"2026-07-28"` {
				t.Errorf("_meta protocolVersion: %s", v)
			}
			if len(meta[metaClientCapabilities]) == 0 {
				t.Errorf("_meta without clientCapabilities: %v", meta)
			}
			var info struct{ Name string }
			if json.Unmarshal(meta[metaClientInfo], &info); info.Name != "edge-mcp" {
				t.Errorf("_meta clientInfo: %s, want edge-mcp's", meta[metaClientInfo])
			}
		})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.reqs {
		if r.method != http.MethodPost {
			t.Errorf("upstream received %s: 2026-07-28 is POST only", r.method)
		}
	}
}

// TestStdioServerFailingTheProbe: a stdio server that exits on
// server/discover, or ignores it, is restarted, pinned to 2025-11-25, with
// a warning saying why; its tool works through the gateway.
func TestStdioServerFailingTheProbe(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"exit-on-unknown", "ignore-unknown"} {
		t.Run(mode, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "log")
			logs, err := os.Create(logPath)
			if err != nil {
				t.Fatal(err)
			}
			defer logs.Close()
			log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, tWriter{t}), &slog.HandlerOptions{Level: slog.LevelWarn}))
			url, g := startGateway(t, serversJSON(fmt.Sprintf(`"s": {"command": %q, "env": {%q: %q}, "timeout": 2}`,
				os.Args[0], stdioHelperEnv, mode)), Options{Logger: log})
			if st := g.Status()[0]; st.State != StateConnected || st.ProtocolVersion != "2025-11-25" {
				t.Fatalf("status: %+v, want connected with protocol_version 2025-11-25", st)
			}
			out, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if out := string(out); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "server/discover probe") || !strings.Contains(out, "pinned to protocol 2025-11-25") {
				t.Fatalf("no warning naming the probe and the pin:\n%s", out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := connect(t, url, nil).CallTool(ctx, &mcp.CallToolParams{Name: "hello"})
			if err != nil || textOf(res) != "hello from stdio" {
				t.Fatalf("tools/call: %v %+v", err, res)
			}
		})
	}
}

// TestListChanged2026: a 2026-07-28 upstream's list_changed notifications
// arrive on the subscriptions/listen request edge-mcp keeps open, and the
// catalogue follows them.
func TestListChanged2026(t *testing.T) {
	t.Parallel()
	s := fixtureServer()
	rec := &probeRecorder{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})}
	url, g := startGateway(t, serversJSON(fmt.Sprintf(`"s": {"url": %q}`, serveHandler(t, rec))), Options{})
	if st := g.Status()[0]; st.ProtocolVersion != "2026-07-28" {
		t.Fatalf("status: %+v", st)
	}
	cs := connect(t, url, nil)
	waitFor(t, "subscriptions/listen upstream", func() bool { return rec.has("subscriptions/listen") })
	time.Sleep(50 * time.Millisecond) // from its POST to the server's handler
	s.AddTool(&mcp.Tool{Name: "added", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	waitFor(t, "the added tool in the catalogue", func() bool { return strings.Contains(strings.Join(toolNames(t, cs), ","), "added") })
}

// TestCancel2026: a client's cancellation reaches the handler of a
// 2026-07-28 (stateless) upstream: edge-mcp ends the call's POST.
func TestCancel2026(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	started, cancelled := make(chan struct{}), make(chan struct{})
	s.AddTool(&mcp.Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(started)
		select {
		case <-ctx.Done():
			close(cancelled)
		case <-time.After(20 * time.Second):
		}
		return &mcp.CallToolResult{}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	url, g := startGateway(t, serversJSON(fmt.Sprintf(`"s": {"url": %q}`, serveHandler(t, h))), Options{})
	if st := g.Status()[0]; st.ProtocolVersion != "2026-07-28" {
		t.Fatalf("status: %+v", st)
	}
	cs := connect(t, url, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-started
		cancel()
	}()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait"}); err == nil {
		t.Fatal("cancelled call returned no error")
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream handler was not cancelled")
	}
}
