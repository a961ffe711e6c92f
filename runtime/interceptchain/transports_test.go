package interceptchain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/interceptors"
	"github.com/edge-mcp/edge-mcp/transports"
)

// stdioServerEnv makes the test binary an interceptor server on its
// standard input and output.
const stdioServerEnv = "INTERCEPTCHAIN_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) == "1" {
		srv := mcp.NewServer(&mcp.Implementation{Name: "stdio-ics", Version: "1"}, nil)
		reg, err := intercept.NewRegistry(0, denyIf("stdio/secret", "SECRET"))
		if err == nil {
			err = interceptors.Register(srv, reg)
		}
		if err == nil {
			err = srv.Run(context.Background(), &mcp.StdioTransport{})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// connTransport hands one accepted Connection to a go-sdk server.
type connTransport struct{ c transports.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// serveOn serves an interceptor server for ics with handler kind
// ("sse", "websocket") on 127.0.0.1, requiring the bearer token tok.
func serveOn(t *testing.T, kind, tok string, ics ...intercept.Interceptor) string {
	t.Helper()
	reg, err := intercept.NewRegistry(0, ics...)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: kind, Version: "1"}, nil)
	if err := interceptors.Register(srv, reg); err != nil {
		t.Fatal(err)
	}
	accept := func(c transports.Connection) {
		if _, err := srv.Connect(context.Background(), connTransport{c}, nil); err != nil {
			t.Error(err)
		}
	}
	var h http.Handler
	switch kind {
	case "sse": // edge-mcp's: go-sdk's SSE handler refuses methods it does not know
		h = transports.NewSSEServer(accept, transports.SSEServerOptions{})
	case "websocket":
		h = transports.NewWebSocketServer(accept, transports.WebSocketServerOptions{})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+tok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// TestSetTransports: an interceptor server is reached over each upstream
// transport of the config (legacy SSE and WebSocket with a bearer token,
// stdio as a real child process), and its interceptor refuses in the
// chain.
func TestSetTransports(t *testing.T) {
	sseAddr := serveOn(t, "sse", "sse-tok", denyIf("sse/secret", "SECRET"))
	wsAddr := serveOn(t, "websocket", "ws-tok", denyIf("websocket/secret", "SECRET"))
	cfg := parse(t, fmt.Sprintf(`{"interceptorServers": {
	    "sse": {"type": "sse", "url": "http://%s/sse", "bearer_token": "sse-tok"},
	    "websocket": {"type": "websocket", "url": "ws://%s/ws", "headers": {"Authorization": "Bearer ws-tok"}},
	    "stdio": {"command": %q, "env": {%q: "1"}}
	  },
	  "interceptors": [{"server": "sse"}, {"server": "websocket"}, {"server": "stdio"}]}`, sseAddr, wsAddr, os.Args[0], stdioServerEnv))
	s := start(t, cfg, Options{})
	if got, want := names(s.Chain()), []string{"sse/secret", "websocket/secret", "stdio/secret"}; !slices.Equal(got, want) {
		t.Fatalf("chain %v, want %v; servers %+v", got, want, s.Servers())
	}
	_, err := call(s, "github", "write_file", `{"x":"SECRET"}`)
	var ref *intercept.Refusal
	if !errors.As(err, &ref) || len(ref.Others) != 2 || !strings.Contains(err.Error(), "found SECRET") {
		t.Fatalf("got %v, want a refusal by all three", err)
	}
	if _, err := call(s, "github", "write_file", `{}`); err != nil {
		t.Fatalf("clean call refused: %v", err)
	}
}
