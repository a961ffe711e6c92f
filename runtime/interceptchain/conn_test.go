package interceptchain

import (
	"context"
	"fmt"
	"iter"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/interceptors"
)

// countedServer is a real interceptor server (go-sdk, streamable HTTP on
// 127.0.0.1) that counts the MCP sessions opened on it and reports those
// still open.
type countedServer struct {
	url    string
	opened atomic.Int32
	srv    *mcp.Server
}

func (c *countedServer) open() int {
	n := 0
	var sessions iter.Seq[*mcp.ServerSession] = c.srv.Sessions()
	for range sessions {
		n++
	}
	return n
}

func serveCounted(t *testing.T, ics ...intercept.Interceptor) *countedServer {
	t.Helper()
	reg, err := intercept.NewRegistry(0, ics...)
	if err != nil {
		t.Fatal(err)
	}
	c := &countedServer{srv: mcp.NewServer(&mcp.Implementation{Name: "ics", Version: "1"}, nil)}
	c.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" {
				c.opened.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	if err := interceptors.Register(c.srv, reg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return c.srv }, nil)}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	c.url = "http://" + ln.Addr().String() + "/mcp"
	return c
}

// TestSetKeepsUnchangedServers: a Set built with the previous one as
// Options.Previous (a reload) keeps the connection of a server whose
// config did not change (no new session on it, still one open, its
// interceptors run after the previous Set is closed) and dials again a
// server whose config changed (the old session is closed); the last Set
// to let go of a connection closes it.
func TestSetKeepsUnchangedServers(t *testing.T) {
	a := serveCounted(t, denyIf("a/secret", "SECRET"))
	b := serveCounted(t, denyIf("b/token", "TOKEN"))
	doc := func(bTimeout int) string {
		return fmt.Sprintf(`{"interceptorServers": {"a": {"url": %q}, "b": {"url": %q, "timeout": %d}},
		  "interceptors": [{"server": "a"}, {"server": "b"}]}`, a.url, b.url, bTimeout)
	}
	first := start(t, parse(t, doc(30)), Options{})
	if a.opened.Load() != 1 || b.opened.Load() != 1 {
		t.Fatalf("sessions opened a=%d b=%d, want 1 each", a.opened.Load(), b.opened.Load())
	}
	second := start(t, parse(t, doc(31)), Options{Previous: first})
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if a.opened.Load() != 1 {
		t.Errorf("server a (unchanged) opened %d sessions, want 1: it was dialed again", a.opened.Load())
	}
	if b.opened.Load() != 2 {
		t.Errorf("server b (changed) opened %d sessions, want 2", b.opened.Load())
	}
	waitFor(t, "b's first session closed", func() bool { return b.open() == 1 })
	if n := a.open(); n != 1 {
		t.Errorf("server a has %d sessions open, want 1 (kept)", n)
	}
	for _, c := range []struct{ payload, refuser string }{{`{"x":"SECRET"}`, "a/secret"}, {`{"x":"TOKEN"}`, "b/token"}} {
		_, err := call(second, "up", "t", c.payload)
		if err == nil || !strings.Contains(err.Error(), c.refuser) {
			t.Errorf("%s after the reload: %v, want a refusal by %s", c.payload, err, c.refuser)
		}
	}
	if st := second.Servers(); !st[0].Reached || len(st[0].Interceptors) != 1 {
		t.Errorf("status of the kept server %+v", st[0])
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's session closed by the last Set", func() bool { return a.open() == 0 })
}

// TestSetKeepsConnectionsWarm: four validators of one server invoked
// concurrently, sixty times, mostly reuse TCP connections: net/http's
// default client keeps two idle connections per host, so two would be
// dialed and closed on every run (121 for 60 runs; 18-31 with go-sdk's
// streamable client on a client keeping more, as it drops a connection
// when it closes a response stream before its end; 5 with edge-mcp's,
// which holds no standalone GET stream for an interceptor server).
func TestSetKeepsConnectionsWarm(t *testing.T) {
	slow := func(name string) intercept.Interceptor {
		return &intercept.Func{Desc: intercept.Descriptor{Name: name, Type: intercept.Validation,
			Hooks: []intercept.Hook{{Events: []string{"tools/call"}, Phase: intercept.Request}}},
			Fn: func(ctx context.Context, _ *intercept.Invocation) (*intercept.Result, error) {
				select {
				case <-time.After(5 * time.Millisecond): // long enough for the four to overlap
					return intercept.Pass(), nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}}
	}
	reg, err := intercept.NewRegistry(0, slow("s/a"), slow("s/b"), slow("s/c"), slow("s/d"))
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "ics", Version: "1"}, nil)
	if err := interceptors.Register(srv, reg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var dialed, gets atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		h.ServeHTTP(w, r)
	}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				dialed.Add(1)
			}
		}}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	s := start(t, parse(t, fmt.Sprintf(`{"interceptorServers": {"s": {"url": "http://%s/mcp"}}, "interceptors": [{"server": "s"}]}`, ln.Addr())), Options{})
	const runs = 60
	for range runs {
		if out, err := call(s, "x", "t", `{}`); err != nil || len(out.Results) != 4 {
			t.Fatalf("%+v, %v", out, err)
		}
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("%d GET requests: an interceptor server sends nothing unasked, so no standalone stream is held open", n)
	}
	if n := dialed.Load(); n > 12 {
		t.Fatalf("%d TCP connections for %d runs of four concurrent invocations, want the few of the first runs kept", n, runs)
	}
}
