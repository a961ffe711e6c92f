package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// barrier returns a function that waits until it has been called n times
// (or 5 s have passed).
func barrier(n int) func() {
	all := make(chan struct{})
	var arrived atomic.Int32
	return func() {
		if arrived.Add(1) == int32(n) {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(5 * time.Second):
		}
	}
}

// samplingUpstream serves a go-sdk server with one tool, "ask": it asks
// its client for a sampling and returns the answer, or the error. The gate
// calls are kept in flight together: each asks once all have arrived, and
// answers once all have been answered. It is reached over a transport that
// cannot relate a server→client request to the call it belongs to: legacy
// SSE (go-sdk's handler), or WebSocket (a first edge-mcp in front of it).
// It returns the type and url of the server's config entry.
func samplingUpstream(t *testing.T, transport string, gate int) string {
	t.Helper()
	arrived, answered := barrier(gate), barrier(gate)
	srv := mcp.NewServer(&mcp.Implementation{Name: "sampler", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		arrived()
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "who are you?"}}}})
		answered()
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
	})
	get := func(*http.Request) *mcp.Server { return srv }
	if transport == "sse" {
		return fmt.Sprintf(`"type": "sse", "url": %q`, serveHandler(t, mcp.NewSSEHandler(get, nil)))
	}
	front, _ := startGateway(t, serversJSON(fmt.Sprintf(`"s": {"url": %q}`, serveHandler(t, mcp.NewStreamableHTTPHandler(get, nil)))), Options{})
	return fmt.Sprintf(`"type": "websocket", "url": %q`, "ws"+strings.TrimPrefix(strings.TrimSuffix(front, "/mcp"), "http")+"/ws")
}

// samplingClient connects a downstream session that answers sampling
// requests with its own name.
func samplingClient(t *testing.T, url, name string) *mcp.ClientSession {
	return connect(t, url, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			time.Sleep(10 * time.Millisecond) // keep the calls in flight together
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "answer from " + name}}, nil
		},
	})
}

// refusals counts the WARN records of refused server→client requests.
type refusals struct{ n *atomic.Int32 }

func (h refusals) Enabled(context.Context, slog.Level) bool { return true }
func (h refusals) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h refusals) WithGroup(string) slog.Handler            { return h }
func (h refusals) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.HasPrefix(r.Message, "refusing a server→client request") {
		h.n.Add(1)
	}
	return nil
}

// TestServerRequestsOverSharedAndPerClientSessions runs concurrent
// downstream sessions whose calls make an SSE or WebSocket upstream ask for
// a sampling:
// with per_client each call gets its own client's answer; with a shared
// upstream session, a request that cannot be attributed is refused (with a
// WARN line), never handed to a guessed client; one client alone is
// unambiguous.
func TestServerRequestsOverSharedAndPerClientSessions(t *testing.T) {
	t.Parallel()
	const refusal = `cannot tell which client this sampling request belongs to`
	type testCase struct {
		name           string
		session        string // "" leaves the default (auto)
		clients, calls int    // calls per client, all in flight together
		refused        bool
	}
	var cases []testCase
	for _, transport := range []string{"sse", "websocket"} {
		cases = append(cases,
			testCase{transport + ": per_client, 4 clients × 5 calls", "per_client", 4, 5, false},
			testCase{transport + ": shared, 2 clients with calls in flight", "shared", 2, 1, true},
			testCase{transport + ": auto, 3 clients with calls in flight", "", 3, 2, true},
			testCase{transport + ": shared, 1 client with 3 calls in flight", "shared", 1, 3, false})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			entry := `"s": {` + samplingUpstream(t, strings.SplitN(tc.name, ":", 2)[0], tc.clients*tc.calls)
			if tc.session != "" {
				entry += fmt.Sprintf(`, "session": %q`, tc.session)
			}
			warned := refusals{new(atomic.Int32)}
			url, g := startGateway(t, serversJSON(entry+"}"), Options{Logger: slog.New(warned)})
			var wg sync.WaitGroup
			for i := range tc.clients {
				name := "client-" + strconv.Itoa(i)
				cs := samplingClient(t, url, name)
				for range tc.calls {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask"})
						got := textOrNil(res)
						switch {
						case err != nil:
							t.Errorf("%s: %v", name, err)
						case tc.refused && (!res.IsError || !strings.Contains(got, refusal) || !strings.Contains(got, `"per_client" for server "s"`)):
							t.Errorf("%s got %q, want the refusal", name, got)
						case !tc.refused && got != "answer from "+name:
							t.Errorf("%s got %q, want its own answer", name, got)
						}
					}()
				}
			}
			wg.Wait()
			if n := int(warned.n.Load()); (n > 0) != tc.refused {
				t.Errorf("%d refusals logged at WARN, want some: %v", n, tc.refused)
			}
			if u := g.route.upstreams().byName["s"]; tc.session == "per_client" && u.clients.Count() != tc.clients {
				t.Errorf("%d per-client upstream sessions, want %d", u.clients.Count(), tc.clients)
			}
		})
	}
}

// TestPerClientSessionsBounded: a client beyond max_client_sessions gets an
// error naming the setting; when a session ends its slot is free again.
func TestPerClientSessionsBounded(t *testing.T) {
	t.Parallel()
	up := samplingUpstream(t, "sse", 1)
	url, g := startGateway(t, serversJSON(`"s": {`+up+`, "session": "per_client", "max_client_sessions": 1}`), Options{})
	first := samplingClient(t, url, "first")
	if res, err := first.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask"}); err != nil || textOrNil(res) != "answer from first" {
		t.Fatalf("first: %v %q", err, textOrNil(res))
	}
	second := samplingClient(t, url, "second")
	res, err := second.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask"})
	if msg := fmt.Sprint(err) + textOrNil(res); !strings.Contains(msg, "max_client_sessions") {
		t.Fatalf("second client beyond the bound: %q, want an error naming max_client_sessions", msg)
	}
	first.Close()
	u := g.route.upstreams().byName["s"]
	waitFor(t, "the first client's upstream session to close", func() bool { return u.clients.Count() == 0 })
	if res, err := second.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask"}); err != nil || textOrNil(res) != "answer from second" {
		t.Fatalf("second, after the first left: %v %q", err, textOrNil(res))
	}
}

// TestPerClientStdioChildrenReaped: over stdio, per_client starts one child
// per calling session besides the shared one; each is stopped and reaped
// when its session ends (or idles out), and none is left as a zombie.
func TestPerClientStdioChildrenReaped(t *testing.T) {
	bin := testenv.EverythingServer(t)
	for _, tc := range []struct {
		name string
		end  func(cs *mcp.ClientSession)
	}{
		{"session ends", func(cs *mcp.ClientSession) { cs.Close() }},
		{"idle", func(*mcp.ClientSession) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "idle" {
				oldIdle, oldCheck := clientIdle, clientIdleCheck
				// Long enough for three sessions to connect and call under
				// load (-race, CI) before the first one idles out.
				clientIdle, clientIdleCheck = 3*time.Second, 20*time.Millisecond
				t.Cleanup(func() { clientIdle, clientIdleCheck = oldIdle, oldCheck })
			}
			url, g := startGateway(t, serversJSON(fmt.Sprintf(`"e": {"command": %q, "session": "per_client"}`, bin)), Options{})
			u := g.route.upstreams().byName["e"]
			var sessions []*mcp.ClientSession
			for range 3 {
				cs := connect(t, url, nil)
				if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_simple_text"}); err != nil {
					t.Fatal(err)
				}
				sessions = append(sessions, cs)
			}
			pids := clientPids(u)
			if len(pids) != 3 || pids[0] == pids[1] || pids[1] == pids[2] || pids[0] == pids[2] {
				t.Fatalf("per-client children %v, want 3 distinct", pids)
			}
			for _, cs := range sessions {
				tc.end(cs)
			}
			waitFor(t, "the per-client links to close", func() bool { return u.clients.Count() == 0 })
			for _, pid := range pids {
				waitFor(t, "child "+strconv.Itoa(pid)+" to be reaped", func() bool {
					_, err := os.Stat("/proc/" + strconv.Itoa(pid))
					return os.IsNotExist(err)
				})
			}
			if z := zombies(t); len(z) != 0 {
				t.Fatalf("zombies: %v", z)
			}
			if u.current() == nil {
				t.Fatal("the shared link went down with the per-client ones")
			}
		})
	}
}

// clientPids returns the process ids of u's per-client stdio links.
func clientPids(u *upstream) []int {
	var pids []int
	for _, l := range u.clients.OpenLinks() {
		if p, ok := l.conn.(interface{ Pid() int }); ok {
			pids = append(pids, p.Pid())
		}
	}
	return pids
}

// textOrNil is textOf for a result that may be missing.
func textOrNil(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	return textOf(r)
}

// fixes records the "fix" of every refusal WARN.
type fixes struct {
	mu   *sync.Mutex
	seen *[]string
}

func (h fixes) Enabled(context.Context, slog.Level) bool { return true }
func (h fixes) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h fixes) WithGroup(string) slog.Handler            { return h }
func (h fixes) Handle(_ context.Context, r slog.Record) error {
	if r.Level != slog.LevelWarn || !strings.HasPrefix(r.Message, "refusing a server→client request") {
		return nil
	}
	fix := "(none)"
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "fix" {
			fix = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	*h.seen = append(*h.seen, fix)
	h.mu.Unlock()
	return nil
}

// Issue #27 item 6: a server that asks for roots on the gateway's own
// session (which lists the catalogue) is refused; with "session":
// "per_client" already set, the WARN does not tell the operator to set it.
func TestRefusalOnOwnSessionOfPerClientServer(t *testing.T) {
	t.Parallel()
	for _, session := range []string{"shared", "per_client"} {
		t.Run(session, func(t *testing.T) {
			asked := make(chan error, 4)
			srv := mcp.NewServer(&mcp.Implementation{Name: "rooter", Version: "1"}, nil)
			// It asks while it lists its tools: on the link the gateway
			// lists the catalogue with, outside any client's call.
			srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method == "tools/list" {
						_, err := ss.ListRoots(ctx, nil)
						select {
						case asked <- err:
						default:
						}
					}
					return next(ctx, method, req)
				}
			})
			mcp.AddTool(srv, &mcp.Tool{Name: "noop"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
			var mu sync.Mutex
			var seen []string
			var lastErr error
			startGateway(t, serversJSON(fmt.Sprintf(`"s": {"url": %q, "session": %q}`, serveMCP(t, srv), session)), Options{Logger: slog.New(fixes{&mu, &seen})})
			select {
			case err := <-asked:
				lastErr = err
				if err == nil {
					t.Fatal("roots/list on the gateway's own session was answered")
				}
				if session == "per_client" && strings.Contains(err.Error(), `set "session"`) {
					t.Errorf("the refusal tells a per_client server to set per_client: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the server never got an answer to roots/list")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				t.Fatalf("no refusal logged (the server's error: %v)", lastErr)
			}
			for _, fix := range seen {
				if session == "per_client" && strings.Contains(fix, "per_client") {
					t.Errorf("WARN fix %q for a server with session per_client", fix)
				}
				if session == "shared" && !strings.Contains(fix, "per_client") {
					t.Errorf("WARN fix %q for a shared server, want the per_client advice", fix)
				}
			}
		})
	}
}
