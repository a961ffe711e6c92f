package interceptors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

func serveRegistry(t *testing.T, reg *intercept.Registry) string { return serveRegistryB(t, reg) }

func serveRegistryB(t testing.TB, reg *intercept.Registry) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "reg", Version: "1"}, nil)
	if err := Register(srv, reg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// TestRemoteChainHammer: many events at once through a chain of remote
// interceptors on one connection; every one gets its own answer.
func TestRemoteChainHammer(t *testing.T) {
	both := []intercept.Hook{{Events: []string{"tools/call"}, Phase: intercept.Request}}
	upper := &intercept.Func{Desc: intercept.Descriptor{Name: "m/upper", Type: intercept.Mutation, Hooks: both},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			return intercept.Replace(json.RawMessage(strings.ToUpper(string(inv.Payload)))), nil
		}}
	noLower := &intercept.Func{Desc: intercept.Descriptor{Name: "v/no-secret", Type: intercept.Validation, Hooks: both},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			if strings.Contains(string(inv.Payload), "SECRET") {
				return intercept.Deny("secret"), nil
			}
			return intercept.Pass(), nil
		}}
	reg, err := intercept.NewRegistry(0, upper, noLower)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, serveRegistry(t, reg), ServerOptions{})
	ics, _, err := c.Interceptors(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The hammer is about answers under concurrency, not deadlines: a
	// loaded machine with the race detector must not turn it into one.
	chain, err := intercept.NewChain(intercept.Options{Timeout: time.Minute}, intercept.Member{Interceptor: ics[0]}, intercept.Member{Interceptor: ics[1]})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				word := fmt.Sprintf("w%d_%d", g, i)
				if i%5 == 0 {
					word = "secret"
				}
				out, err := chain.Run(context.Background(), intercept.Event{Event: "tools/call", Phase: intercept.Request,
					Payload: json.RawMessage(`{"name":"echo","arguments":{"x":"` + word + `"}}`)})
				var r *intercept.Refusal
				switch {
				case word == "secret":
					if !errors.As(err, &r) || r.Interceptor != "v/no-secret" {
						t.Errorf("%s: err = %v", word, err)
					}
				case err != nil || !strings.Contains(string(out.Payload), strings.ToUpper(word)):
					t.Errorf("%s: err = %v, payload %s", word, err, out.Payload)
				}
			}
		})
	}
	wg.Wait()
	if got := chain.Counters("v/no-secret").Denials.Load(); got != 8*5 {
		t.Fatalf("denials %d, want 40", got)
	}
}

// TestRedialAfterRestart: the interceptor server restarts (its sessions
// are gone); the next call dials again and is answered.
func TestRedialAfterRestart(t *testing.T) {
	v := &intercept.Func{Desc: intercept.Descriptor{Name: "v", Type: intercept.Validation, Hooks: []intercept.Hook{{Events: []string{"*"}, Phase: intercept.Request}}},
		Fn: func(context.Context, *intercept.Invocation) (*intercept.Result, error) {
			return intercept.Deny("still here"), nil
		}}
	reg, err := intercept.NewRegistry(0, v)
	if err != nil {
		t.Fatal(err)
	}
	start := func(addr string) (string, func()) {
		srv := mcp.NewServer(&mcp.Implementation{Name: "reg", Version: "1"}, nil)
		if err := Register(srv, reg); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("cannot listen on %s again: %v", addr, err)
		}
		hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
		go func() { _ = hs.Serve(ln) }()
		return ln.Addr().String(), func() { _ = hs.Close() }
	}
	addr, stop := start("127.0.0.1:0")
	c := dial(t, "http://"+addr+"/mcp", ServerOptions{})
	c.lastDial = time.Time{} // allow the redial at once
	params := json.RawMessage(`{"name":"v","event":"tools/call","phase":"request","payload":{}}`)
	if _, err := c.Invoke(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	stop()
	_, stop = start(addr)
	defer stop()
	res, err := c.Invoke(context.Background(), params)
	if err != nil || !strings.Contains(string(res), "still here") {
		t.Fatalf("after restart: %s, %v", res, err)
	}
}
