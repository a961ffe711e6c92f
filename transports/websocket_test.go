package transports_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// wsHarness runs a WebSocketServer on a real loopback listener. Every
// accepted connection is sent on conns; when echo is set, it is also served
// by an echo loop that answers each request with its params as result.
type wsHarness struct {
	srv   *transports.WebSocketServer
	hs    *httptest.Server
	url   string
	conns chan transports.Connection
	loops sync.WaitGroup
}

func wsStart(t testing.TB, echo bool, opts transports.WebSocketServerOptions) *wsHarness {
	t.Helper()
	h := &wsHarness{conns: make(chan transports.Connection, 64)}
	h.srv = transports.NewWebSocketServer(func(c transports.Connection) {
		if echo {
			h.loops.Add(1)
			go func() {
				defer h.loops.Done()
				wsEcho(c)
			}()
		}
		h.conns <- c
	}, opts)
	h.hs = httptest.NewServer(h.srv)
	h.url = "ws" + strings.TrimPrefix(h.hs.URL, "http")
	t.Cleanup(func() {
		h.srv.Close()
		h.hs.Close()
		h.loops.Wait()
	})
	return h
}

// wsEcho answers every request on c with its params (or {}) as result.
func wsEcho(c transports.Connection) {
	for {
		msg, err := c.Read(context.Background())
		if err != nil {
			return
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			res := req.Params
			if len(res) == 0 {
				res = json.RawMessage(`{}`)
			}
			_ = c.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: res})
		}
	}
}

func (h *wsHarness) conn(t testing.TB) transports.Connection {
	t.Helper()
	select {
	case c := <-h.conns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no WebSocket connection was accepted")
		return nil
	}
}

func wsCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wsCall(id int64, method, params string) *jsonrpc.Request {
	req := &jsonrpc.Request{ID: mustID(float64(id)), Method: method}
	if params != "" {
		req.Params = json.RawMessage(params)
	}
	return req
}

func mustID(v any) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		panic(err)
	}
	return id
}

// wsRawDial dials the harness with a coder/websocket client, not this
// package's, offering the mcp subprotocol.
func wsRawDial(t testing.TB, url string, opts *websocket.DialOptions) (*websocket.Conn, *http.Response) {
	t.Helper()
	if opts == nil {
		opts = &websocket.DialOptions{}
	}
	if opts.Subprotocols == nil {
		opts.Subprotocols = []string{"mcp"}
	}
	c, resp, err := websocket.Dial(wsCtx(t), url, opts)
	if err != nil {
		t.Fatalf("dialing %s: %v", url, err)
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() { c.CloseNow() })
	return c, resp
}

// connTransport hands an existing Connection to a go-sdk server or client.
type connTransport struct{ c transports.Connection }

func (t connTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

type echoArgs struct {
	Text string `json:"text"`
}

func newEchoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo-server", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"},
		func(ctx context.Context, req *mcp.CallToolRequest, args echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + args.Text}}}, nil, nil
		})
	return s
}

// TestWebSocketGoSDKClientAndServer runs a go-sdk client over
// WebSocketClientTransport against a go-sdk server on WebSocketServer
// connections: initialize, tools/list and tools/call cross both
// transports.
func TestWebSocketGoSDKClientAndServer(t *testing.T) {
	t.Parallel()
	server := newEchoServer()
	var sessions sync.WaitGroup
	srv := transports.NewWebSocketServer(func(c transports.Connection) {
		ss, err := server.Connect(context.Background(), connTransport{c}, nil)
		if err != nil {
			t.Errorf("server connect: %v", err)
			return
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			_ = ss.Wait()
		}()
	}, transports.WebSocketServerOptions{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()

	ctx := wsCtx(t)
	client := mcp.NewClient(&mcp.Implementation{Name: "ws-test-client", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &transports.WebSocketClientTransport{URL: "ws" + strings.TrimPrefix(hs.URL, "http")},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	if got := cs.InitializeResult().ServerInfo.Name; got != "echo-server" {
		t.Errorf("server name = %q, want echo-server", got)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Fatalf("tools/list = %+v, want the echo tool", tools.Tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "echo: hi" {
		t.Fatalf("tools/call result = %+v, want echo: hi", res.Content)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("closing client session: %v", err)
	}
	done := make(chan struct{})
	go func() { sessions.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the server session did not end after the client closed")
	}
}

// TestWebSocketRawClient drives the server with a plain coder/websocket
// client: JSON-RPC text frames in, text frames out; invalid frames get a
// JSON-RPC error with id null and the connection stays usable.
func TestWebSocketRawClient(t *testing.T) {
	t.Parallel()
	h := wsStart(t, true, transports.WebSocketServerOptions{})
	ctx := wsCtx(t)
	c, resp := wsRawDial(t, h.url, nil)
	if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "mcp" {
		t.Fatalf("selected subprotocol = %q, want mcp", got)
	}
	tests := []struct {
		name string
		send string
		want string // expected reply, compared as JSON
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":[1,2]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"a":[1,2]}}`},
		{"string id", `{"jsonrpc":"2.0","id":"x","method":"ping"}`,
			`{"jsonrpc":"2.0","id":"x","result":{}}`},
		{"malformed JSON", `{"jsonrpc":"2.0",`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}`},
		{"not JSON-RPC", `{"hello":"world"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}`},
		{"batch", `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}`},
		{"empty", ``, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}`},
		{"still usable", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, `{"jsonrpc":"2.0","id":3,"result":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.Write(ctx, websocket.MessageText, []byte(tt.send)); err != nil {
				t.Fatalf("write: %v", err)
			}
			typ, got, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if typ != websocket.MessageText {
				t.Fatalf("reply frame type = %v, want text", typ)
			}
			if !jsonContains(t, got, []byte(tt.want)) {
				t.Fatalf("reply = %s, want it to contain %s", got, tt.want)
			}
		})
	}
}

// jsonContains reports whether every member of want (recursively, for
// objects) is in got.
func jsonContains(t testing.TB, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("reply is not JSON: %s", got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("bad expectation %s", want)
	}
	return contains(g, w)
}

func contains(g, w any) bool {
	wm, ok := w.(map[string]any)
	if !ok {
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		return bytes.Equal(gj, wj)
	}
	gm, ok := g.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok || !contains(gv, wv) {
			return false
		}
	}
	return true
}

func TestWebSocketBinaryFrameCloses1003(t *testing.T) {
	t.Parallel()
	h := wsStart(t, false, transports.WebSocketServerOptions{})
	ctx := wsCtx(t)
	c, _ := wsRawDial(t, h.url, nil)
	sc := h.conn(t)
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusUnsupportedData {
		t.Fatalf("close status = %v (%v), want 1003", got, err)
	}
	msg, err := sc.Read(ctx)
	if err != nil {
		t.Fatalf("the text message before the binary frame was lost: %v", err)
	}
	if req, ok := msg.(*jsonrpc.Request); !ok || req.Method != "notifications/initialized" {
		t.Fatalf("first message = %+v", msg)
	}
	if _, err := sc.Read(ctx); err == nil || !strings.Contains(err.Error(), "binary") {
		t.Fatalf("server Read after a binary frame = %v, want an error about binary frames", err)
	}
}

func TestWebSocketSubprotocol(t *testing.T) {
	t.Parallel()
	t.Run("server requires mcp", func(t *testing.T) {
		h := wsStart(t, false, transports.WebSocketServerOptions{})
		_, resp, err := websocket.Dial(wsCtx(t), h.url, &websocket.DialOptions{Subprotocols: []string{"chat"}})
		if err == nil {
			t.Fatal("dial without the mcp subprotocol succeeded")
		}
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("response = %v, want 400", resp)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `"mcp"`) {
			t.Fatalf("400 body %q does not name the mcp subprotocol", body)
		}
	})
	t.Run("client requires mcp", func(t *testing.T) {
		// A server that accepts WebSockets but selects no subprotocol.
		var served sync.WaitGroup
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			defer served.Done()
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			_, _, _ = c.Read(context.Background())
		}))
		defer func() { hs.Close(); served.Wait() }()
		tr := &transports.WebSocketClientTransport{URL: hs.URL}
		_, err := tr.Connect(wsCtx(t))
		if err == nil || !strings.Contains(err.Error(), `"mcp" subprotocol`) {
			t.Fatalf("Connect = %v, want an error about the mcp subprotocol", err)
		}
	})
	t.Run("handshake error is reported", func(t *testing.T) {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no websockets here", http.StatusTeapot)
		}))
		defer hs.Close()
		_, err := (&transports.WebSocketClientTransport{URL: hs.URL}).Connect(wsCtx(t))
		if err == nil || !strings.Contains(err.Error(), "418") || !strings.Contains(err.Error(), "no websockets here") {
			t.Fatalf("Connect = %v, want the status and body", err)
		}
	})
	t.Run("bad scheme", func(t *testing.T) {
		_, err := (&transports.WebSocketClientTransport{URL: "ftp://example.com/"}).Connect(wsCtx(t))
		if err == nil {
			t.Fatal("Connect with an ftp URL succeeded")
		}
	})
}

func TestWebSocketOrigin(t *testing.T) {
	t.Parallel()
	h := wsStart(t, false, transports.WebSocketServerOptions{AllowedOrigins: []string{"https://app.example"}})
	tests := []struct {
		name   string
		origin string
		host   string
		ok     bool
	}{
		{"no origin", "", "", true},
		{"loopback origin", "http://localhost:3000", "", true},
		{"allowed origin", "https://app.example", "", true},
		{"foreign origin", "https://evil.example", "", false},
		{"rebound host", "http://evil.example:1234", "evil.example:1234", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := http.Header{}
			if tt.origin != "" {
				hdr.Set("Origin", tt.origin)
			}
			c, resp, err := websocket.Dial(wsCtx(t), h.url, &websocket.DialOptions{
				Subprotocols: []string{"mcp"}, HTTPHeader: hdr, Host: tt.host})
			if tt.ok {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				c.CloseNow()
				return
			}
			if err == nil {
				c.CloseNow()
				t.Fatal("dial succeeded, want 403")
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("response = %v, want 403", resp)
			}
		})
	}
}

// TestWebSocketLargeMessage sends 4 MiB each way between this package's
// client and server (the default coder/websocket read limit is 32 KiB),
// and checks that a message over MaxMessageBytes closes the connection
// with 1009.
func TestWebSocketLargeMessage(t *testing.T) {
	t.Parallel()
	h := wsStart(t, true, transports.WebSocketServerOptions{})
	ctx := wsCtx(t)
	// Without compression: deflating 4 MiB twice is slow under -race.
	conn, err := (&transports.WebSocketClientTransport{URL: h.url, DisableCompression: true}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	big := `{"blob":"` + strings.Repeat("abcdefgh", (4<<20)/8) + `"}`
	if err := conn.Write(ctx, wsCall(1, "tools/call", big)); err != nil {
		t.Fatal(err)
	}
	msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || string(resp.Result) != big {
		t.Fatalf("4 MiB echo came back altered (%T, %d bytes)", msg, len(resp.Result))
	}

	small := wsStart(t, false, transports.WebSocketServerOptions{MaxMessageBytes: 1 << 10})
	c, _ := wsRawDial(t, small.url, nil)
	sc := small.conn(t)
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"p":"`+strings.Repeat("x", 2<<10)+`"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("close status = %v (%v), want 1009", websocket.CloseStatus(err), err)
	}
	if _, err := sc.Read(ctx); err == nil || !strings.Contains(err.Error(), "larger than 1024 bytes") {
		t.Fatalf("server Read = %v, want a message-too-big error", err)
	}
}

// TestWebSocketCompression checks that permessage-deflate is negotiated
// when the peer offers it, and only then.
func TestWebSocketCompression(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		disable bool
		mode    websocket.CompressionMode
		want    bool
	}{
		{"client offers context takeover", false, websocket.CompressionContextTakeover, true},
		{"client offers no context takeover", false, websocket.CompressionNoContextTakeover, true},
		{"client offers nothing", false, websocket.CompressionDisabled, false},
		{"server disabled", true, websocket.CompressionContextTakeover, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := wsStart(t, true, transports.WebSocketServerOptions{DisableCompression: tt.disable})
			c, resp := wsRawDial(t, h.url, &websocket.DialOptions{CompressionMode: tt.mode})
			ext := resp.Header.Get("Sec-WebSocket-Extensions")
			if got := strings.Contains(ext, "permessage-deflate"); got != tt.want {
				t.Fatalf("Sec-WebSocket-Extensions = %q, want deflate: %v", ext, tt.want)
			}
			// A compressible message crosses intact.
			ctx := wsCtx(t)
			params := `{"t":"` + strings.Repeat("compress me ", 200) + `"}`
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":7,"method":"x","params":`+params+`}`)); err != nil {
				t.Fatal(err)
			}
			_, got, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(got, []byte(params)) {
				t.Fatalf("reply %.80s... lost the params", got)
			}
		})
	}
	t.Run("client offers deflate", func(t *testing.T) {
		h := wsStart(t, true, transports.WebSocketServerOptions{})
		offered := make(chan string, 1)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			offered <- r.Header.Get("Sec-WebSocket-Extensions")
			h.srv.ServeHTTP(w, r)
		}))
		defer hs.Close()
		conn, err := (&transports.WebSocketClientTransport{URL: hs.URL}).Connect(wsCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if got := <-offered; !strings.Contains(got, "permessage-deflate") {
			t.Fatalf("client offered extensions %q, want permessage-deflate", got)
		}
		big := `{"t":"` + strings.Repeat("z", 5000) + `"}`
		if err := conn.Write(wsCtx(t), wsCall(1, "x", big)); err != nil {
			t.Fatal(err)
		}
		msg, err := conn.Read(wsCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := msg.(*jsonrpc.Response); !ok || string(r.Result) != big {
			t.Fatalf("compressed echo altered: %v", msg)
		}
	})
}

// TestWebSocketConcurrentWrites writes from many goroutines on both ends at
// once (run with -race) and checks every message arrives exactly once.
func TestWebSocketConcurrentWrites(t *testing.T) {
	t.Parallel()
	h := wsStart(t, false, transports.WebSocketServerOptions{})
	ctx := wsCtx(t)
	cc, err := (&transports.WebSocketClientTransport{URL: h.url}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc := h.conn(t)
	const writers, each = 8, 100
	for _, dir := range []struct {
		name     string
		from, to transports.Connection
	}{{"client to server", cc, sc}, {"server to client", sc, cc}} {
		t.Run(dir.name, func(t *testing.T) {
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						id := int64(w*each + i)
						if err := dir.from.Write(context.Background(), wsCall(id, "m", fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))); err != nil {
							t.Errorf("write %d: %v", id, err)
							return
						}
					}
				}()
			}
			seen := make(map[int64]bool)
			last := make(map[float64]float64) // per writer: messages of one writer stay in order
			for len(seen) < writers*each {
				msg, err := dir.to.Read(ctx)
				if err != nil {
					t.Fatalf("read after %d messages: %v", len(seen), err)
				}
				req := msg.(*jsonrpc.Request)
				id := req.ID.Raw().(int64)
				if seen[id] {
					t.Fatalf("message %d delivered twice", id)
				}
				seen[id] = true
				var p struct{ W, I float64 }
				_ = json.Unmarshal(req.Params, &p)
				if prev, ok := last[p.W]; ok && p.I <= prev {
					t.Fatalf("writer %v: message %v after %v", p.W, p.I, prev)
				}
				last[p.W] = p.I
			}
			wg.Wait()
		})
	}
}

func TestWebSocketCloseUnblocksRead(t *testing.T) {
	t.Parallel()
	h := wsStart(t, false, transports.WebSocketServerOptions{})
	ctx := wsCtx(t)
	cc, err := (&transports.WebSocketClientTransport{URL: h.url}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sc := h.conn(t)

	readErr := func(c transports.Connection) chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := c.Read(context.Background())
			ch <- err
		}()
		return ch
	}
	clientRead, serverRead := readErr(cc), readErr(sc)
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cc.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v against a live peer", d)
	}
	select {
	case err := <-clientRead:
		if !errors.Is(err, transports.ErrClosed) {
			t.Errorf("client Read after Close = %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not unblock the client's Read")
	}
	select {
	case err := <-serverRead:
		if !errors.Is(err, io.EOF) {
			t.Errorf("server Read after the client closed = %v, want io.EOF", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the client's close did not end the server's Read")
	}
	if err := cc.Write(ctx, wsCall(1, "x", "")); !errors.Is(err, transports.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWebSocketCloseDeadPeer checks that Close is bounded when the peer
// never completes the close handshake.
func TestWebSocketCloseDeadPeer(t *testing.T) {
	t.Parallel()
	h := wsStart(t, false, transports.WebSocketServerOptions{})
	c, _ := wsRawDial(t, h.url, nil) // never reads: no close frame comes back
	_ = c
	sc := h.conn(t)
	start := time.Now()
	sc.Close()
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("Close took %v against a peer that does not answer", d)
	}
}

// TestWebSocketKeepalive checks that idle connections are pinged: a peer
// that answers pings stays connected, one that does not is dropped.
func TestWebSocketKeepalive(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	t.Run("answering peer stays", func(t *testing.T) {
		h := wsStart(t, true, transports.WebSocketServerOptions{PingInterval: interval})
		conn, err := (&transports.WebSocketClientTransport{URL: h.url, PingInterval: interval}).Connect(wsCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		time.Sleep(6 * interval)
		if err := conn.Write(wsCtx(t), wsCall(1, "ping", "")); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Read(wsCtx(t)); err != nil {
			t.Fatalf("an idle but healthy connection was dropped: %v", err)
		}
	})
	t.Run("silent peer dropped", func(t *testing.T) {
		h := wsStart(t, false, transports.WebSocketServerOptions{PingInterval: interval})
		var pings sync.WaitGroup
		pings.Add(1)
		var once sync.Once
		c, _ := wsRawDial(t, h.url, &websocket.DialOptions{OnPingReceived: func(context.Context, []byte) bool {
			once.Do(pings.Done)
			return false // never pong
		}})
		go func() { _, _, _ = c.Read(context.Background()) }() // processes control frames
		sc := h.conn(t)
		start := time.Now()
		_, err := sc.Read(wsCtx(t))
		if err == nil || !strings.Contains(err.Error(), "keepalive") {
			t.Fatalf("server Read = %v, want a keepalive failure", err)
		}
		pings.Wait()
		if d := time.Since(start); d > 20*interval {
			t.Errorf("dead peer detected after %v", d)
		}
	})
}

// TestWebSocketConnectContext checks that the Connect context bounds only
// the handshake.
func TestWebSocketConnectContext(t *testing.T) {
	t.Parallel()
	h := wsStart(t, true, transports.WebSocketServerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := (&transports.WebSocketClientTransport{URL: h.url}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cancel()
	time.Sleep(20 * time.Millisecond)
	if err := conn.Write(wsCtx(t), wsCall(1, "ping", "")); err != nil {
		t.Fatalf("write after the Connect context ended: %v", err)
	}
	if _, err := conn.Read(wsCtx(t)); err != nil {
		t.Fatalf("read after the Connect context ended: %v", err)
	}
	// An expired request context does not break the connection either.
	expired, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_ = conn.Write(expired, wsCall(2, "ping", ""))
	if err := conn.Write(wsCtx(t), wsCall(3, "ping", "")); err != nil {
		t.Fatalf("write after a write with an expired context: %v", err)
	}
}

// TestWebSocketServerClose checks that closing the server ends its
// connections with 1001 and refuses new ones.
func TestWebSocketServerClose(t *testing.T) {
	t.Parallel()
	h := wsStart(t, false, transports.WebSocketServerOptions{})
	c, _ := wsRawDial(t, h.url, nil)
	sc := h.conn(t)
	errc := make(chan error, 1)
	go func() { _, _, err := c.Read(context.Background()); errc <- err }()
	h.srv.Close()
	if err := <-errc; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("client saw %v, want close 1001", err)
	}
	if _, err := sc.Read(wsCtx(t)); !errors.Is(err, transports.ErrClosed) {
		t.Fatalf("server Read after Close = %v", err)
	}
	_, resp, err := websocket.Dial(wsCtx(t), h.url, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after Close: %v %v, want 503", resp, err)
	}
}

// TestWebSocketNoGoroutineLeak opens and closes connections in every way
// and checks that no goroutine survives.
func TestWebSocketNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		h := wsStart(t, true, transports.WebSocketServerOptions{PingInterval: 50 * time.Millisecond})
		for i := range 10 {
			conn, err := (&transports.WebSocketClientTransport{URL: h.url, PingInterval: 50 * time.Millisecond}).Connect(wsCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.Write(wsCtx(t), wsCall(int64(i), "ping", "")); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Read(wsCtx(t)); err != nil {
				t.Fatal(err)
			}
			switch i % 3 {
			case 0:
				conn.Close()
			case 1: // the server side closes first
				sc := h.conn(t)
				sc.Close()
				if _, err := conn.Read(wsCtx(t)); err == nil {
					t.Fatal("Read succeeded after the server closed")
				}
				conn.Close()
				continue
			case 2: // the server is closed under it
				defer conn.Close()
			}
			<-h.conns
		}
		h.srv.Close()
		h.hs.Close()
		h.loops.Wait()
	}()
	wsWaitGoroutines(t, before)
}

func wsWaitGoroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// FuzzWebSocketFrames sends arbitrary text and binary frames to the server
// with a raw client. The server must not crash; every text frame that is a
// valid JSON-RPC message must be delivered once and in order, every other
// text frame answered with one JSON-RPC error, and a binary frame must end
// the connection with 1003.
//
// The input is split at 0xFF bytes into frames; a frame starting with 0x00
// is sent as binary (without that byte), any other as text.
func FuzzWebSocketFrames(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\xff{bad\xff{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}"))
	f.Add([]byte("[1,2]\xff\xff{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-1,\"message\":\"m\"}}"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\xff\x00binary\xff{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}"))
	f.Add([]byte("\x00"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc3\x28\"}"))

	delivered := make(chan transports.Connection, 1)
	srv := transports.NewWebSocketServer(func(c transports.Connection) { delivered <- c },
		transports.WebSocketServerOptions{MaxMessageBytes: 1 << 20, PingInterval: -1})
	hs := httptest.NewServer(srv)
	f.Cleanup(func() { srv.Close(); hs.Close() })
	url := "ws" + strings.TrimPrefix(hs.URL, "http")

	f.Fuzz(func(t *testing.T, data []byte) {
		frames := bytes.Split(data, []byte{0xff})
		if len(frames) > 32 {
			frames = frames[:32]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.CloseNow()
		sc := <-delivered

		// The client reads error replies until the end marker's reply.
		const marker = "edge-mcp-fuzz-end-3f9a"
		replies := make(chan int, 1)
		go func() {
			n := 0
			for {
				_, b, err := c.Read(ctx)
				if err != nil || bytes.Contains(b, []byte(marker)) {
					replies <- n
					return
				}
				n++
			}
		}()

		var want [][]byte
		invalid, binary := 0, false
		for _, fr := range frames {
			typ := websocket.MessageText
			if len(fr) > 0 && fr[0] == 0 {
				typ, fr = websocket.MessageBinary, fr[1:]
			}
			if err := c.Write(ctx, typ, fr); err != nil {
				break // the server closed after a binary frame
			}
			if typ == websocket.MessageBinary {
				binary = true
				break
			}
			if msg, err := wire.Decode(bytes.Clone(fr)); err == nil {
				enc, _ := wire.Encode(msg)
				want = append(want, enc)
			} else {
				invalid++
			}
		}
		if !binary {
			end := `{"jsonrpc":"2.0","id":"` + marker + `","method":"` + marker + `"}`
			if err := c.Write(ctx, websocket.MessageText, []byte(end)); err != nil {
				t.Fatalf("writing the end marker: %v", err)
			}
		}
		var got [][]byte
		for {
			msg, err := sc.Read(ctx)
			if err != nil {
				if !binary {
					t.Fatalf("server Read failed without a binary frame: %v", err)
				}
				if !strings.Contains(err.Error(), "binary") {
					t.Fatalf("server Read after a binary frame = %v", err)
				}
				break
			}
			if req, ok := msg.(*jsonrpc.Request); ok && req.Method == marker {
				if err := sc.Write(ctx, &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{}`)}); err != nil {
					t.Fatalf("answering the end marker: %v", err)
				}
				break
			}
			enc, err := wire.Encode(msg)
			if err != nil {
				t.Fatalf("re-encoding a delivered message: %v", err)
			}
			got = append(got, enc)
		}
		if len(got) != len(want) {
			t.Fatalf("delivered %d messages, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("message %d = %s, want %s", i, got[i], want[i])
			}
		}
		// After a binary frame the client's reader ends at the close frame;
		// the error replies of the frames before it come first either way.
		if n := <-replies; n != invalid {
			t.Fatalf("got %d error replies, want %d (one per invalid frame)", n, invalid)
		}
		c.CloseNow()
		sc.Close()
	})
}

// BenchmarkWebSocketRoundTrip measures one request/response round trip
// between this package's client and server (the server echoes).
func BenchmarkWebSocketRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		size     int
		compress bool
	}{{64, true}, {4 << 10, true}, {4 << 10, false}} {
		b.Run(fmt.Sprintf("params=%dB/compress=%v", bc.size, bc.compress), func(b *testing.B) {
			h := wsStart(b, true, transports.WebSocketServerOptions{DisableCompression: !bc.compress})
			ctx := context.Background()
			conn, err := (&transports.WebSocketClientTransport{URL: h.url}).Connect(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			req := wsCall(1, "tools/call", `{"name":"echo","arguments":{"text":"`+strings.Repeat("a", bc.size)+`"}}`)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := conn.Write(ctx, req); err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Read(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
