package interceptchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/interceptors"
)

var onCall = []intercept.Hook{{Events: []string{"tools/call"}, Phase: intercept.Request}}

// denyIf is a validator refusing payloads that contain word.
func denyIf(name, word string) intercept.Interceptor {
	return &intercept.Func{Desc: intercept.Descriptor{Name: name, Type: intercept.Validation, Hooks: onCall},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			if strings.Contains(string(inv.Payload), word) {
				return intercept.Deny(name + " found " + word), nil
			}
			return intercept.Pass(), nil
		}}
}

// serve runs an interceptor server for ics on addr ("127.0.0.1:0" for
// any port) until the returned stop is called or the test ends.
func serve(t *testing.T, addr string, ics ...intercept.Interceptor) (url string, stop func()) {
	t.Helper()
	reg, err := intercept.NewRegistry(0, ics...)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "ics", Version: "1"}, nil)
	if err := interceptors.Register(srv, reg); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for i := 0; ; i++ { // a port just closed may take a moment to bind again
		if ln, err = net.Listen("tcp", addr); err == nil || i == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	go func() { _ = hs.Serve(ln) }()
	stop = func() { _ = hs.Close() }
	t.Cleanup(stop)
	return "http://" + ln.Addr().String() + "/mcp", stop
}

// freeAddr is a 127.0.0.1 address nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func parse(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("gw.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func start(t *testing.T, cfg *config.Config, opts Options) *Set {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	s, err := NewSet(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// call runs a tools/call request of tool on server with payload through
// the set's current chain.
func call(s *Set, srv, tool, payload string) (*intercept.Outcome, error) {
	return s.Chain().Run(context.Background(), intercept.Event{Event: "tools/call", Phase: intercept.Request,
		Payload: json.RawMessage(payload), Context: &intercept.Context{Server: srv, Subject: tool}})
}

func names(c *intercept.Chain) []string {
	var out []string
	for _, d := range c.Descriptors() {
		out = append(out, d.Name)
	}
	return out
}

// waitFor polls cond until it holds (the background dial and list) or
// 10 s have passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestSetServerDownAtStart: one interceptor server is up, the other down
// when the gateway starts. The chain still builds: the up server's
// selected interceptors run with the entry's scope, the down server's
// scope is refused naming the server (fail-closed by default) except
// where its entry says fail_open, and when the server comes up the
// stand-ins give way to its interceptors.
func TestSetServerDownAtStart(t *testing.T) {
	urlA, _ := serve(t, "127.0.0.1:0", denyIf("pii/secret", "SECRET"), denyIf("pii/everything", ""))
	addrB := freeAddr(t)
	cfg := parse(t, fmt.Sprintf(`{
	  "interceptorServers": {
	    "a": {"url": %q},
	    "b": {"url": "http://%s/mcp", "retry_initial": 0.05, "retry_max": 0.2, "timeout": 5}
	  },
	  "interceptors": [
	    {"server": "a", "names": ["pii/secret"], "servers": ["github"]},
	    {"server": "b", "tools": ["write_*"]},
	    {"server": "b", "tools": ["read_*"], "fail_open": true}
	  ]}`, urlA, addrB))
	s := start(t, cfg, Options{})

	want := []string{"pii/secret", "interceptorServers.b", "interceptorServers.b#2"}
	if got := names(s.Chain()); !slices.Equal(got, want) {
		t.Fatalf("chain %v, want %v (pii/everything not selected)", got, want)
	}
	for _, tc := range []struct {
		name, srv, tool, payload string
		refusedBy, reason        string
	}{
		{"a's validator refuses in its scope", "github", "read_file", `{"x":"SECRET"}`, "pii/secret", "found SECRET"},
		{"a's validator is out of scope elsewhere", "gitlab", "read_file", `{"x":"SECRET"}`, "", ""},
		{"b never reached: fail-closed, naming the server", "github", "write_file", `{}`, "interceptorServers.b", `interceptor server "b" not reached`},
		{"b never reached: the fail_open entry passes", "gitlab", "read_file", `{}`, "", ""},
		{"outside every scope of b", "gitlab", "list_dir", `{}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(s, tc.srv, tc.tool, tc.payload)
			var ref *intercept.Refusal
			if tc.refusedBy == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.As(err, &ref) || ref.Interceptor != tc.refusedBy || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("got %v, want a refusal by %s with %q", err, tc.refusedBy, tc.reason)
			}
		})
	}
	st := s.Servers()
	if !st[0].Reached || st[1].Reached || !strings.Contains(st[1].Err, "connecting to interceptor server") || len(st[0].Interceptors) != 2 {
		t.Errorf("status %+v", st)
	}

	// b comes up: the background dial reaches it and its interceptor
	// takes the stand-ins' places, with each entry's scope.
	serve(t, addrB, denyIf("b/write", "DROP"))
	waitFor(t, "b's interceptor in the chain", func() bool { return slices.Contains(names(s.Chain()), "b/write") })
	if _, err := call(s, "github", "write_file", `{}`); err != nil {
		t.Errorf("b reached, a clean write refused: %v", err)
	}
	if _, err := call(s, "github", "write_file", `{"q":"DROP"}`); err == nil || !strings.Contains(err.Error(), "b/write") {
		t.Errorf("b's validator did not refuse: %v", err)
	}
}

// TestSetRelists: a server that lists other interceptors (it restarted
// with a new set) is listed again on the timer, and the chain follows.
func TestSetRelists(t *testing.T) {
	addr := freeAddr(t)
	_, stop := serve(t, addr, denyIf("v1/check", "X"))
	cfg := parse(t, fmt.Sprintf(`{"interceptorServers": {"p": {"url": "http://%s/mcp"}}, "interceptors": [{"server": "p", "mode": "audit", "priority": 7}]}`, addr))
	changes := make(chan *intercept.Chain, 8)
	s := start(t, cfg, Options{Relist: 50 * time.Millisecond, OnChange: func(c *intercept.Chain) { changes <- c }})
	if got := names(s.Chain()); !slices.Equal(got, []string{"v1/check"}) {
		t.Fatalf("chain %v", got)
	}
	if d := s.Chain().Descriptors()[0]; d.Mode != intercept.Audit || d.PriorityHint.Request != 7 {
		t.Errorf("overrides not applied: %+v", d)
	}
	if _, err := call(s, "any", "t", `"X"`); err != nil {
		t.Errorf("audit mode blocked: %v", err)
	}
	// Calls keep coming while the server restarts and the chain is
	// rebuilt: each gets one answer from the chain it started with.
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				_, _ = call(s, "any", "t", `"X"`)
			}
		}()
	}
	stop()
	serve(t, addr, denyIf("v2/check", "Y"))
	waitFor(t, "the new list", func() bool { return slices.Equal(names(s.Chain()), []string{"v2/check"}) })
	close(done)
	wg.Wait()
	select {
	case c := <-changes:
		if c == nil {
			t.Error("OnChange with no chain")
		}
	default:
		t.Error("OnChange not called")
	}
}

// TestSetModules: module entries take the Wasm modules' interceptors
// (ABI 1.1 declared ones) in the entries' order with the list's
// overrides; a policy no entry names follows.
func TestSetModules(t *testing.T) {
	ctx := context.Background()
	cache, err := wasmtest.CompileCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.NewEngine(ctx, policy.EngineConfig{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close(ctx) })
	mods := map[string]*policy.Module{}
	for name, example := range map[string]string{"guard": "cross-boundary-guard", "redactor": "secretless-redactor"} {
		m, err := eng.Load(ctx, name, wasmtest.Example(t, example), policy.ModuleOptions{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		mods[name] = m
	}
	cfg := parse(t, `{
	  "policies": [
	    {"name": "guard", "module": "/nowhere/guard.wasm", "on_error": "allow"},
	    {"name": "redactor", "module": "/nowhere/redactor.wasm", "timeout_ms": 300}
	  ],
	  "interceptors": [{"module": "redactor", "mode": "audit"}]}`)
	s := start(t, cfg, Options{Modules: func(ctx context.Context, name string) ([]intercept.Interceptor, error) {
		return ModuleInterceptors(ctx, mods[name])
	}})
	ds := s.Chain().Descriptors()
	if len(ds) != 2 || ds[0].Name != "security/secretless-redactor" || ds[0].Mode != intercept.Audit || ds[1].Name != "security/cross-boundary-guard" || !ds[1].FailOpen {
		t.Fatalf("chain %+v", ds)
	}
	if _, err := NewSet(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "no module source") {
		t.Errorf("module entries without a source: %v", err)
	}
}

// TestSetEntryConfig: an entry's config reaches the remote interceptor
// with every invocation.
func TestSetEntryConfig(t *testing.T) {
	seen := make(chan string, 1)
	probe := &intercept.Func{Desc: intercept.Descriptor{Name: "cfg/probe", Type: intercept.Validation, Hooks: onCall},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			seen <- string(inv.Config)
			return intercept.Pass(), nil
		}}
	url, _ := serve(t, "127.0.0.1:0", probe)
	s := start(t, parse(t, fmt.Sprintf(`{"interceptorServers": {"p": {"url": %q}},
	  "interceptors": [{"server": "p", "config": {"entities": ["email", "iban"], "min_score": 0.8}}]}`, url)), Options{})
	if _, err := call(s, "gh", "t", `{}`); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != `{"entities":["email","iban"],"min_score":0.8}` {
		t.Errorf("config %s", got)
	}
}

// TestSetRelistsAfterReconnect: a call that finds the server restarted
// dials again, and the new session's list replaces the old one without
// waiting for the timer.
func TestSetRelistsAfterReconnect(t *testing.T) {
	addr := freeAddr(t)
	_, stop := serve(t, addr, denyIf("v1/check", "X"))
	cfg := parse(t, fmt.Sprintf(`{"interceptorServers": {"p": {"url": "http://%s/mcp"}}, "interceptors": [{"server": "p"}]}`, addr))
	s := start(t, cfg, Options{Relist: time.Hour})
	stop()
	serve(t, addr, denyIf("v2/check", "Y"))
	time.Sleep(1100 * time.Millisecond) // the client dials again at most once a second
	if _, err := call(s, "any", "t", `{}`); err == nil {
		t.Error("the old interceptor, unknown to the new server, passed")
	}
	waitFor(t, "the list after the reconnect", func() bool { return slices.Equal(names(s.Chain()), []string{"v2/check"}) })
}
