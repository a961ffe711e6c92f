package transports_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// sseSrvHarness runs an SSEServer on a real loopback listener, mounted at
// mount (and everything below it). Accepted connections are sent on conns;
// with serve set, each is also answered by sseSrvLoop.
type sseSrvHarness struct {
	srv   *transports.SSEServer
	hs    *httptest.Server
	conns chan transports.Connection
	ended chan error // the Read error that ended each loop
	loops sync.WaitGroup
}

func sseSrvStart(t testing.TB, serve bool, mount string, opts transports.SSEServerOptions) *sseSrvHarness {
	t.Helper()
	h := &sseSrvHarness{conns: make(chan transports.Connection, 64), ended: make(chan error, 64)}
	h.srv = transports.NewSSEServer(func(c transports.Connection) {
		if serve {
			h.loops.Add(1)
			go func() {
				defer h.loops.Done()
				h.ended <- sseSrvLoop(c)
			}()
		}
		h.conns <- c
	}, opts)
	var handler http.Handler = h.srv
	if mount != "" {
		mux := http.NewServeMux()
		mux.Handle("/prefix/", http.StripPrefix("/prefix", h.srv))
		mux.Handle("/sse", h.srv)
		handler = mux
	}
	h.hs = httptest.NewServer(handler)
	t.Cleanup(func() {
		h.srv.Close()
		h.hs.Close()
		h.loops.Wait()
	})
	return h
}

// sseSrvLoop is a minimal 2024-11-05 MCP server written against the
// Connection: initialize, ping, tools/list and the tool "echo".
func sseSrvLoop(c transports.Connection) error {
	ctx := context.Background()
	for {
		msg, err := c.Read(ctx)
		if err != nil {
			return err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			continue
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"sse-test","version":"1.0.0"}}`
		case "ping":
			result = `{}`
		case "tools/list":
			result = `{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}`
		case "tools/call":
			var p struct {
				Name      string `json:"name"`
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			}
			_ = json.Unmarshal(req.Params, &p)
			text, _ := json.Marshal("echo: " + p.Arguments.Text)
			result = `{"content":[{"type":"text","text":` + string(text) + `}]}`
		default:
			_ = c.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no " + req.Method}})
			continue
		}
		if err := c.Write(ctx, &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(result)}); err != nil {
			return err
		}
	}
}

// TestSSEServerGoSDKClient drives the server with the go-sdk's
// SSEClientTransport, mounted directly and behind http.StripPrefix (the
// endpoint event is relative, so both resolve).
func TestSSEServerGoSDKClient(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/sse", "/prefix/sse"} {
		t.Run(path, func(t *testing.T) {
			h := sseSrvStart(t, true, "mux", transports.SSEServerOptions{})
			ctx := wsCtx(t)
			client := mcp.NewClient(&mcp.Implementation{Name: "sse-test-client", Version: "1.0.0"}, nil)
			cs, err := client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: h.hs.URL + path},
				&mcp.ClientSessionOptions{ProtocolVersion: "2024-11-05"})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			if got := cs.InitializeResult().ServerInfo.Name; got != "sse-test" {
				t.Errorf("server name = %q", got)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
				t.Fatalf("tools = %+v", tools.Tools)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi\nthere"}})
			if err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "echo: hi\nthere" {
				t.Fatalf("tools/call = %+v", res.Content)
			}
			if err := cs.Ping(ctx, nil); err != nil {
				t.Fatalf("ping: %v", err)
			}
			cs.Close()
			select {
			case err := <-h.ended:
				if !errors.Is(err, io.EOF) {
					t.Errorf("server Read after the client closed = %v, want io.EOF", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the session did not end when the client disconnected")
			}
		})
	}
}

// sseSrvOpen opens an event stream with a raw GET and returns the reader
// positioned after the endpoint event, and the endpoint.
func sseSrvOpen(t testing.TB, ctx context.Context, url string) (*bufio.Reader, string, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	name, data := sseSrvNextEvent(t, br)
	if name != "endpoint" {
		t.Fatalf("first event %q, want endpoint", name)
	}
	return br, data, resp
}

// sseSrvNextEvent reads one event (skipping comments).
func sseSrvNextEvent(t testing.TB, br *bufio.Reader) (name, data string) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if data != "" || name != "" {
				return name, data
			}
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			if data != "" {
				data += "\n"
			}
			data += line[len("data: "):]
		}
	}
}

func sseSrvPost(t testing.TB, url, ctype, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestSSEServerRawHTTP checks the endpoint event and every error answer.
func TestSSEServerRawHTTP(t *testing.T) {
	t.Parallel()
	h := sseSrvStart(t, true, "", transports.SSEServerOptions{MaxBodyBytes: 1024, AllowedOrigins: []string{"https://ok.example"}})
	ctx := wsCtx(t)
	br, endpoint, _ := sseSrvOpen(t, ctx, h.hs.URL+"/sse")
	conn := <-h.conns
	if want := "sse?sessionId=" + conn.SessionID(); endpoint != want {
		t.Fatalf("endpoint = %q, want %q", endpoint, want)
	}
	post := h.hs.URL + "/sse?sessionId=" + conn.SessionID()

	// A valid request is accepted and answered on the stream; the
	// go-sdk's lowercase sessionid works too.
	for i, u := range []string{post, h.hs.URL + "/sse?sessionid=" + conn.SessionID()} {
		resp, _ := sseSrvPost(t, u, "application/json", `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"method":"ping"}`)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST = %d, want 202", resp.StatusCode)
		}
		name, data := sseSrvNextEvent(t, br)
		if name != "message" || data != `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"result":{}}` {
			t.Fatalf("event %q %q", name, data)
		}
	}

	tests := []struct {
		name   string
		method string
		url    string
		ctype  string
		body   string
		origin string
		status int
		code   int64 // JSON-RPC error code in the body; 0: not checked
	}{
		{"no session", "POST", h.hs.URL + "/sse", "application/json", `{"jsonrpc":"2.0","method":"x"}`, "", 400, -32000},
		{"unknown session", "POST", h.hs.URL + "/sse?sessionId=NOPE", "application/json", `{"jsonrpc":"2.0","method":"x"}`, "", 404, -32000},
		{"malformed JSON", "POST", post, "application/json", `{"jsonrpc":`, "", 400, jsonrpc.CodeParseError},
		{"not JSON-RPC", "POST", post, "application/json", `{"a":1}`, "", 400, jsonrpc.CodeInvalidRequest},
		{"batch", "POST", post, "application/json", `[{"jsonrpc":"2.0","method":"x"}]`, "", 400, jsonrpc.CodeInvalidRequest},
		{"too large", "POST", post, "application/json", `{"jsonrpc":"2.0","method":"x","params":{"p":"` + strings.Repeat("x", 2000) + `"}}`, "", 413, jsonrpc.CodeInvalidRequest},
		{"wrong content type", "POST", post, "text/plain", `{"jsonrpc":"2.0","method":"x"}`, "", 415, -32000},
		{"wrong method", "PUT", post, "application/json", `{}`, "", 405, -32000},
		{"GET without SSE", "GET", h.hs.URL + "/sse", "", "", "", 406, -32000},
		{"foreign origin", "POST", post, "application/json", `{"jsonrpc":"2.0","method":"x"}`, "https://evil.example", 403, -32000},
		{"allowed origin", "POST", post, "application/json", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "https://ok.example", 202, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, tt.url, strings.NewReader(tt.body))
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tt.status, body)
			}
			if tt.code == 0 {
				return
			}
			var e struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   jsonrpc.Error   `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.JSONRPC != "2.0" || string(e.ID) != "null" {
				t.Fatalf("body %s is not a JSON-RPC error with id null", body)
			}
			if e.Error.Code != tt.code || e.Error.Message == "" {
				t.Fatalf("error = %+v, want code %d with a message", e.Error, tt.code)
			}
		})
	}
}

func TestSSEServerKeepAlive(t *testing.T) {
	t.Parallel()
	h := sseSrvStart(t, false, "", transports.SSEServerOptions{KeepAlive: 50 * time.Millisecond})
	br, _, _ := sseSrvOpen(t, wsCtx(t), h.hs.URL+"/sse")
	<-h.conns
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": keepalive\n" {
			return
		}
	}
	t.Fatal("no keepalive comment on an idle stream")
}

// TestSSEServerSessionEnd checks the three ways a session ends: the client
// disconnects, the gateway closes the Connection, the server is closed.
func TestSSEServerSessionEnd(t *testing.T) {
	t.Parallel()
	t.Run("client disconnects", func(t *testing.T) {
		h := sseSrvStart(t, false, "", transports.SSEServerOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		_, _, _ = sseSrvOpen(t, ctx, h.hs.URL+"/sse")
		conn := <-h.conns
		errc := make(chan error, 1)
		go func() { _, err := conn.Read(context.Background()); errc <- err }()
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Read = %v, want io.EOF", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Read did not end when the client disconnected")
		}
		if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/x"}); !errors.Is(err, transports.ErrClosed) {
			t.Fatalf("Write after the end = %v, want ErrClosed", err)
		}
		resp, _ := sseSrvPost(t, h.hs.URL+"/sse?sessionId="+conn.SessionID(), "application/json", `{"jsonrpc":"2.0","method":"x"}`)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("POST to an ended session = %d, want 404", resp.StatusCode)
		}
	})
	t.Run("gateway closes", func(t *testing.T) {
		h := sseSrvStart(t, false, "", transports.SSEServerOptions{})
		br, _, _ := sseSrvOpen(t, wsCtx(t), h.hs.URL+"/sse")
		conn := <-h.conns
		if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/last"}); err != nil {
			t.Fatal(err)
		}
		if name, data := sseSrvNextEvent(t, br); name != "message" || !strings.Contains(data, "notifications/last") {
			t.Fatalf("event %q %q", name, data)
		}
		conn.Close()
		if _, err := io.ReadAll(br); err != nil {
			t.Fatalf("the stream did not end cleanly: %v", err)
		}
		if _, err := conn.Read(context.Background()); !errors.Is(err, io.EOF) {
			t.Fatalf("Read after Close = %v", err)
		}
	})
	t.Run("server closes", func(t *testing.T) {
		h := sseSrvStart(t, false, "", transports.SSEServerOptions{})
		br, _, _ := sseSrvOpen(t, wsCtx(t), h.hs.URL+"/sse")
		<-h.conns
		h.srv.Close()
		if _, err := io.ReadAll(br); err != nil {
			t.Fatalf("the stream did not end cleanly: %v", err)
		}
		req, _ := http.NewRequest(http.MethodGet, h.hs.URL+"/sse", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("GET after Close = %d, want 503", resp.StatusCode)
		}
	})
}

// TestSSEServerOrderAndConcurrency posts from many goroutines and writes
// from many goroutines at once (run with -race).
func TestSSEServerOrderAndConcurrency(t *testing.T) {
	t.Parallel()
	h := sseSrvStart(t, false, "", transports.SSEServerOptions{})
	br, endpoint, _ := sseSrvOpen(t, wsCtx(t), h.hs.URL+"/sse")
	conn := <-h.conns
	post := h.hs.URL + "/" + endpoint
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			resp, body := sseSrvPost(t, post, "application/json", `{"jsonrpc":"2.0","method":"notifications/n","params":{"i":`+strconv.Itoa(i)+`}}`)
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("POST %d = %d %s", i, resp.StatusCode, body)
			}
		}()
		go func() {
			defer wg.Done()
			if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/out", Params: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)}); err != nil {
				t.Errorf("Write %d: %v", i, err)
			}
		}()
	}
	got := map[string]bool{}
	for range n {
		msg, err := conn.Read(wsCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		got[string(msg.(*jsonrpc.Request).Params)] = true
	}
	events := map[string]bool{}
	for range n {
		_, data := sseSrvNextEvent(t, br)
		events[data] = true
	}
	wg.Wait()
	if len(got) != n || len(events) != n {
		t.Fatalf("received %d distinct POSTs and %d distinct events, want %d each", len(got), len(events), n)
	}
}

func TestSSEServerNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		h := sseSrvStart(t, true, "", transports.SSEServerOptions{KeepAlive: 10 * time.Millisecond})
		for i := range 5 {
			ctx, cancel := context.WithCancel(context.Background())
			client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: h.hs.URL + "/sse"},
				&mcp.ClientSessionOptions{ProtocolVersion: "2024-11-05"})
			if err != nil {
				t.Fatal(err)
			}
			conn := <-h.conns
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				cs.Close()
			} else {
				conn.Close() // the gateway ends it
				_ = cs.Wait()
				cs.Close()
			}
			cancel()
		}
		h.srv.Close()
		h.hs.Close()
		h.loops.Wait()
		http.DefaultClient.CloseIdleConnections()
	}()
	wsWaitGoroutines(t, before)
}

// FuzzSSEServerPost posts arbitrary bodies (with arbitrary extra query
// parameters after the session's) to a live session: a body that is one
// JSON-RPC message is answered 202 and delivered once, unchanged; anything
// else gets 400 with a JSON-RPC error, and the session survives.
func FuzzSSEServerPost(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), "")
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`), "x=1&sessionId=other")
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","result":{"k":[1,2,{"z":null}]}}`), "%zz")
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`), "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`), "&&&")
	f.Add([]byte("\xef\xbb\xbf{}"), "sessionid=")
	f.Add([]byte(``), "")

	msgs := make(chan jsonrpc.Message, 1)
	srv := transports.NewSSEServer(func(c transports.Connection) {
		go func() {
			for {
				msg, err := c.Read(context.Background())
				if err != nil {
					return
				}
				msgs <- msg
			}
		}()
	}, transports.SSEServerOptions{MaxBodyBytes: 1 << 16})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, endpoint, _ := sseSrvOpen(f, ctx, hs.URL+"/sse")
	post := hs.URL + "/" + endpoint

	f.Fuzz(func(t *testing.T, body []byte, query string) {
		req, _ := http.NewRequest(http.MethodPost, post, bytes.NewReader(body))
		// Keep the request line valid HTTP: net/http itself rejects
		// spaces and control bytes before the handler runs.
		query = strings.Map(func(r rune) rune {
			if r <= ' ' || r >= 0x7f || r == '#' {
				return -1
			}
			return r
		}, query)
		req.URL.RawQuery += "&" + query
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		respBody, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want, derr := wire.Decode(bytes.Clone(body))
		if derr != nil {
			if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("invalid body answered %d: %s", resp.StatusCode, respBody)
			}
			var e struct {
				Error *jsonrpc.Error `json:"error"`
			}
			if err := json.Unmarshal(respBody, &e); err != nil || e.Error == nil || e.Error.Message == "" {
				t.Fatalf("error body %q is not a JSON-RPC error", respBody)
			}
			return
		}
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("valid message answered %d: %s", resp.StatusCode, respBody)
		}
		select {
		case got := <-msgs:
			g, _ := wire.Encode(got)
			w, _ := wire.Encode(want)
			if !bytes.Equal(g, w) {
				t.Fatalf("delivered %s, want %s", g, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("an accepted message was not delivered")
		}
	})
}
