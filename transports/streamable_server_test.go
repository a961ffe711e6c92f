package transports_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// srvHarness runs a StreamableServer on a real loopback listener; every
// accepted session is served by srvHarness.loop, a small MCP server written
// directly against the Connection.
type srvHarness struct {
	t      testing.TB
	srv    *transports.StreamableServer
	hs     *httptest.Server
	client *http.Client
	simple bool // answer every call inline with a fixed result

	conns     chan transports.Connection // every accepted connection
	readErrs  chan error                 // the error that ended each loop
	notes     chan *jsonrpc.Request      // notifications received
	slowCalls chan jsonrpc.ID            // ids of "slow" calls received
	lateWrite chan error                 // Write result of a "slow" call's late response
	loops     sync.WaitGroup
}

func srvStart(t testing.TB, simple bool, opts transports.StreamableServerOptions) *srvHarness {
	t.Helper()
	h := &srvHarness{
		t:         t,
		simple:    simple,
		conns:     make(chan transports.Connection, 16),
		readErrs:  make(chan error, 16),
		notes:     make(chan *jsonrpc.Request, 64),
		slowCalls: make(chan jsonrpc.ID, 16),
		lateWrite: make(chan error, 16),
	}
	h.srv = transports.NewStreamableServer(func(c transports.Connection) {
		h.conns <- c
		h.loops.Add(1)
		go h.loop(c)
	}, opts)
	h.hs = httptest.NewServer(h.srv)
	h.client = h.hs.Client()
	t.Cleanup(h.close)
	return h
}

func (h *srvHarness) close() {
	h.srv.Close()
	h.hs.Close()
	h.loops.Wait()
}

// loop is a minimal MCP server: initialize, ping, tools/list and the tools
// "echo", "progress" (two related progress notifications, then the result),
// "ask" (a related sampling request whose answer is returned) and "slow"
// (answers only after it is cancelled).
func (h *srvHarness) loop(conn transports.Connection) {
	defer h.loops.Done()
	var (
		mu      sync.Mutex
		pending = map[string]chan *jsonrpc.Response{} // our requests to the client
		cancels = map[string]chan struct{}{}          // slow calls by id
		calls   sync.WaitGroup
	)
	defer calls.Wait()
	reply := func(id jsonrpc.ID, result string) error {
		return conn.Write(context.Background(), &jsonrpc.Response{ID: id, Result: json.RawMessage(result)})
	}
	for {
		msg, err := conn.Read(context.Background())
		if err != nil {
			h.readErrs <- err
			mu.Lock()
			for _, c := range cancels {
				close(c)
			}
			cancels = map[string]chan struct{}{}
			mu.Unlock()
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			mu.Lock()
			if c := pending[fmt.Sprint(m.ID.Raw())]; c != nil {
				c <- m
			}
			mu.Unlock()
			continue
		case *jsonrpc.Request:
			if !m.IsCall() {
				if m.Method == "notifications/cancelled" {
					var p struct {
						RequestID any `json:"requestId"`
					}
					_ = json.Unmarshal(m.Params, &p)
					mu.Lock()
					if c := cancels[fmt.Sprint(p.RequestID)]; c != nil {
						close(c)
						delete(cancels, fmt.Sprint(p.RequestID))
					}
					mu.Unlock()
				}
				select {
				case h.notes <- m:
				default:
				}
				continue
			}
			if h.simple {
				_ = reply(m.ID, `{"content":[{"type":"text","text":"ok"}]}`)
				continue
			}
			switch m.Method {
			case "initialize":
				v, _ := wire.String(m.Params, "protocolVersion")
				if v == "reject-me" {
					_ = conn.Write(context.Background(), &jsonrpc.Response{ID: m.ID,
						Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "rejected"}})
					continue
				}
				switch v {
				case "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05":
				default:
					v = "2025-11-25"
				}
				_ = reply(m.ID, `{"protocolVersion":"`+v+`","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"srv-test","version":"1.0.0"}}`)
			case "ping":
				_ = reply(m.ID, `{}`)
			case "tools/list":
				_ = reply(m.ID, `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"progress","inputSchema":{"type":"object"}},{"name":"ask","inputSchema":{"type":"object"}},{"name":"slow","inputSchema":{"type":"object"}}]}`)
			case "tools/call":
				var p struct {
					Name string `json:"name"`
					Meta struct {
						ProgressToken json.RawMessage `json:"progressToken"`
					} `json:"_meta"`
				}
				_ = json.Unmarshal(m.Params, &p)
				id := m.ID
				switch p.Name {
				case "echo":
					_ = reply(id, `{"content":[{"type":"text","text":"ok"}]}`)
				case "progress":
					ctx := transports.WithRelated(context.Background(), id)
					for i := 1; i <= 2 && len(p.Meta.ProgressToken) > 0; i++ {
						_ = conn.Write(ctx, &jsonrpc.Request{Method: "notifications/progress",
							Params: json.RawMessage(fmt.Sprintf(`{"progressToken":%s,"progress":%d,"total":2}`, p.Meta.ProgressToken, i))})
					}
					_ = reply(id, `{"content":[{"type":"text","text":"done"}]}`)
				case "ask":
					askID := fmt.Sprintf("ask-%v", id.Raw())
					c := make(chan *jsonrpc.Response, 1)
					mu.Lock()
					pending[askID] = c
					mu.Unlock()
					calls.Add(1)
					go func() {
						defer calls.Done()
						ctx := transports.WithRelated(context.Background(), id)
						err := conn.Write(ctx, &jsonrpc.Request{ID: srvStrID(askID), Method: "sampling/createMessage",
							Params: json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"question?"}}],"maxTokens":10}`)})
						if err != nil {
							_ = reply(id, `{"isError":true,"content":[]}`)
							return
						}
						select {
						case resp := <-c:
							var r struct {
								Content struct {
									Text string `json:"text"`
								} `json:"content"`
							}
							_ = json.Unmarshal(resp.Result, &r)
							text, _ := json.Marshal(r.Content.Text)
							_ = reply(id, `{"content":[{"type":"text","text":`+string(text)+`}]}`)
						case <-time.After(10 * time.Second):
							_ = reply(id, `{"isError":true,"content":[]}`)
						}
					}()
				case "slow":
					c := make(chan struct{})
					mu.Lock()
					cancels[fmt.Sprint(id.Raw())] = c
					mu.Unlock()
					h.slowCalls <- id
					calls.Add(1)
					go func() {
						defer calls.Done()
						select {
						case <-c:
						case <-time.After(10 * time.Second):
						}
						h.lateWrite <- reply(id, `{"content":[]}`)
					}()
				default:
					_ = conn.Write(context.Background(), &jsonrpc.Response{ID: id,
						Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool"}})
				}
			default:
				_ = conn.Write(context.Background(), &jsonrpc.Response{ID: m.ID,
					Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}})
			}
		}
	}
}

// do sends a request to the harness with the MCP POST headers, overridden
// by hdr (an empty value deletes a header).
func (h *srvHarness) do(t testing.TB, ctx context.Context, method, sid, body string, hdr map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.hs.URL, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	for k, v := range hdr {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp
}

func (h *srvHarness) post(t testing.TB, sid, body string) *http.Response {
	t.Helper()
	return h.do(t, context.Background(), http.MethodPost, sid, body, nil)
}

const srvInitBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// initSession opens a session with a raw initialize and returns its id and
// Connection.
func (h *srvHarness) initSession(t testing.TB) (string, transports.Connection) {
	t.Helper()
	resp := h.post(t, "", srvInitBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: status %d: %s", resp.StatusCode, body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("initialize response has no Mcp-Session-Id")
	}
	var conn transports.Connection
	select {
	case conn = <-h.conns:
	case <-time.After(5 * time.Second):
		t.Fatal("accept was not called")
	}
	if conn.SessionID() != sid {
		t.Fatalf("Connection.SessionID() = %q, header %q", conn.SessionID(), sid)
	}
	return sid, conn
}

// srvBody reads and closes a response body.
func srvBody(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return b
}

// srvEvent is one parsed SSE event or comment.
type srvEvent struct {
	name, data, comment string
}

// srvEvents reads SSE events from r and sends them on the returned channel,
// which is closed at the end of the stream.
func srvEvents(r io.Reader) <-chan srvEvent {
	out := make(chan srvEvent, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		var ev srvEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data != nil || ev.name != "" {
					ev.data = strings.Join(data, "\n")
					out <- ev
				}
				ev, data = srvEvent{}, nil
			case strings.HasPrefix(line, ":"):
				out <- srvEvent{comment: strings.TrimSpace(line[1:])}
			case strings.HasPrefix(line, "event:"):
				ev.name = strings.TrimSpace(line[6:])
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(line[5:], " "))
			}
		}
	}()
	return out
}

func srvNextEvent(t testing.TB, c <-chan srvEvent, skipComments bool) srvEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				t.Fatal("event stream ended")
			}
			if skipComments && ev.comment != "" {
				continue
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("timed out waiting for an SSE event")
		}
	}
}

// srvErrorBody checks a JSON-RPC error body and returns its id (raw JSON),
// code and message.
func srvErrorBody(t testing.TB, resp *http.Response) (string, int64, string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	body := srvBody(t, resp)
	var e struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.JSONRPC != "2.0" || e.Error == nil || e.ID == nil {
		t.Fatalf("not a JSON-RPC error body (%v): %s", err, body)
	}
	return string(e.ID), e.Error.Code, e.Error.Message
}

func srvWait[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	panic("unreachable")
}

func TestStreamableServerGoSDKClient(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", "2025-06-18", "2025-03-26", ""} {
		t.Run("version="+version, func(t *testing.T) {
			h := srvStart(t, false, transports.StreamableServerOptions{})
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()

			var mu sync.Mutex
			var progress []float64
			progressed := make(chan struct{}, 2)
			listChanged := make(chan struct{}, 1)
			client := mcp.NewClient(&mcp.Implementation{Name: "srv-test-client", Version: "1.0.0"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, req.Params.Progress)
					mu.Unlock()
					progressed <- struct{}{}
				},
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: "forty-two"}, Model: "m", Role: "assistant"}, nil
				},
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					select {
					case listChanged <- struct{}{}:
					default:
					}
				},
			})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.hs.URL, HTTPClient: h.client},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			conn := srvWait(t, h.conns, "accepted connection")
			if conn.SessionID() == "" {
				// The default client first probes server/discover
				// (2026-07-28), served on a one-request connection; this
				// server answers it with method-not-found, so the client
				// falls back to initialize.
				if err := srvWait(t, h.readErrs, "discover connection to end"); !errors.Is(err, io.EOF) {
					t.Errorf("discover connection Read error = %v, want io.EOF", err)
				}
				conn = srvWait(t, h.conns, "accepted session")
			}
			if cs.ID() != conn.SessionID() {
				t.Errorf("client session %q, server session %q", cs.ID(), conn.SessionID())
			}
			if note := srvWait(t, h.notes, "initialized notification"); note.Method != "notifications/initialized" {
				t.Errorf("first notification = %s, want notifications/initialized", note.Method)
			}

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			if len(tools.Tools) != 4 || tools.Tools[1].Name != "progress" {
				t.Errorf("ListTools = %+v", tools.Tools)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "progress", Meta: mcp.Meta{"progressToken": "tok-1"}})
			if err != nil {
				t.Fatalf("CallTool(progress): %v", err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "done" {
				t.Errorf("progress result = %+v", res.Content)
			}
			// The client dispatches notifications on its own goroutine; the
			// wire order is checked in TestStreamableServerSSEOrder.
			srvWait(t, progressed, "first progress")
			srvWait(t, progressed, "second progress")
			mu.Lock()
			if fmt.Sprint(progress) != "[1 2]" {
				t.Errorf("progress = %v, want [1 2]", progress)
			}
			mu.Unlock()

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask"})
			if err != nil {
				t.Fatalf("CallTool(ask): %v", err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "forty-two" {
				t.Errorf("ask result = %+v, want the sampling answer", res.Content)
			}

			// An unrelated notification travels on the standalone GET stream
			// (or waits in the backlog until the client opens it).
			if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/tools/list_changed"}); err != nil {
				t.Fatalf("Write(list_changed): %v", err)
			}
			srvWait(t, listChanged, "ToolListChangedHandler")

			if err := cs.Close(); err != nil {
				t.Errorf("client Close: %v", err)
			}
			if err := srvWait(t, h.readErrs, "server Read to end"); !errors.Is(err, io.EOF) {
				t.Errorf("server Read after client Close = %v, want io.EOF", err)
			}
		})
	}
}

func TestStreamableServerErrors(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{MaxBodyBytes: 1024})
	sid, _ := h.initSession(t)
	port := h.hs.Listener.Addr().String()[strings.LastIndex(h.hs.Listener.Addr().String(), ":"):]
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"` + strings.Repeat("a", 2048) + `"}}`
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

	tests := []struct {
		name       string
		method     string
		sid        string
		body       string
		hdr        map[string]string
		chunked    bool
		wantStatus int
		wantCode   int64  // JSON-RPC error code; 0: not an error
		wantID     string // raw JSON id of the error body
		wantMsg    string
	}{
		{name: "evil host and origin", method: "POST", body: srvInitBody, hdr: map[string]string{"Host": "evil.example.com", "Origin": "http://evil.example.com"}, wantStatus: 403, wantCode: -32000, wantID: "null", wantMsg: "Host"},
		{name: "evil host without origin", method: "POST", body: srvInitBody, hdr: map[string]string{"Host": "evil.example.com:80"}, wantStatus: 403, wantCode: -32000, wantID: "null"},
		{name: "loopback host evil origin", method: "POST", body: srvInitBody, hdr: map[string]string{"Host": "127.0.0.1" + port, "Origin": "http://evil.example.com"}, wantStatus: 403, wantCode: -32000, wantID: "null", wantMsg: "Origin"},
		{name: "loopback host null origin", method: "POST", body: srvInitBody, hdr: map[string]string{"Origin": "null"}, wantStatus: 403, wantCode: -32000, wantID: "null"},
		{name: "loopback host and origin", method: "POST", body: srvInitBody, hdr: map[string]string{"Host": "127.0.0.1" + port, "Origin": "http://127.0.0.1" + port}, wantStatus: 200},
		{name: "localhost origin other port", method: "POST", body: srvInitBody, hdr: map[string]string{"Host": "localhost" + port, "Origin": "http://localhost:5173"}, wantStatus: 200},
		{name: "ipv6 loopback origin", method: "POST", body: srvInitBody, hdr: map[string]string{"Origin": "http://[::1]:8080"}, wantStatus: 200},
		{name: "accept json only", method: "POST", body: srvInitBody, hdr: map[string]string{"Accept": "application/json"}, wantStatus: 406, wantCode: -32000, wantID: "null"},
		{name: "no accept", method: "POST", body: srvInitBody, hdr: map[string]string{"Accept": ""}, wantStatus: 406, wantCode: -32000, wantID: "null"},
		{name: "accept wildcard", method: "POST", body: srvInitBody, hdr: map[string]string{"Accept": "*/*"}, wantStatus: 200},
		{name: "content type", method: "POST", body: srvInitBody, hdr: map[string]string{"Content-Type": "text/plain"}, wantStatus: 415, wantCode: -32000, wantID: "null"},
		{name: "content type with charset", method: "POST", body: srvInitBody, hdr: map[string]string{"Content-Type": "application/json; charset=utf-8"}, wantStatus: 200},
		{name: "too large", method: "POST", sid: sid, body: big, wantStatus: 413, wantCode: -32600, wantID: "null", wantMsg: "1024"},
		{name: "too large chunked", method: "POST", sid: sid, body: big, chunked: true, wantStatus: 413, wantCode: -32600, wantID: "null"},
		{name: "empty body", method: "POST", sid: sid, body: "", wantStatus: 400, wantCode: -32600, wantID: "null", wantMsg: "empty"},
		{name: "parse error", method: "POST", sid: sid, body: `{"jsonrpc":`, wantStatus: 400, wantCode: -32700, wantID: "null"},
		{name: "invalid request", method: "POST", sid: sid, body: `{"jsonrpc":"1.0","id":1,"method":"x"}`, wantStatus: 400, wantCode: -32600, wantID: "null"},
		{name: "not an object", method: "POST", sid: sid, body: `42`, wantStatus: 400, wantCode: -32600, wantID: "null"},
		{name: "batch", method: "POST", sid: sid, body: " [" + list + "]", wantStatus: 400, wantCode: -32600, wantID: "null", wantMsg: "batch"},
		{name: "missing session", method: "POST", body: list, wantStatus: 400, wantCode: -32000, wantID: "1", wantMsg: "Mcp-Session-Id"},
		{name: "missing session notification", method: "POST", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, wantStatus: 400, wantCode: -32000, wantID: "null"},
		{name: "unknown session", method: "POST", sid: "nope", body: list, wantStatus: 404, wantCode: -32000, wantID: "1"},
		{name: "bad protocol version", method: "POST", sid: sid, body: list, hdr: map[string]string{"MCP-Protocol-Version": "1999-01-01"}, wantStatus: 400, wantCode: -32022, wantID: "1", wantMsg: "1999-01-01"},
		{name: "future protocol version", method: "POST", body: `{"jsonrpc":"2.0","id":"d","method":"server/discover"}`, hdr: map[string]string{"MCP-Protocol-Version": "2099-01-01"}, wantStatus: 400, wantCode: -32022, wantID: `"d"`},
		{name: "2026-07-28 without _meta version", method: "POST", body: `{"jsonrpc":"2.0","id":"d","method":"server/discover"}`, hdr: map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}, wantStatus: 400, wantCode: -32602, wantID: `"d"`},
		{name: "old protocol version", method: "POST", sid: sid, body: list, hdr: map[string]string{"MCP-Protocol-Version": "2024-11-05"}, wantStatus: 200},
		{name: "put", method: "PUT", sid: sid, body: list, wantStatus: 405, wantCode: -32000, wantID: "null"},
		{name: "get without session", method: "GET", wantStatus: 400, wantCode: -32000, wantID: "null"},
		{name: "get without accept", method: "GET", sid: sid, hdr: map[string]string{"Accept": ""}, wantStatus: 406, wantCode: -32000, wantID: "null"},
		{name: "get unknown session", method: "GET", sid: "nope", wantStatus: 404, wantCode: -32000, wantID: "null"},
		{name: "get bad protocol version", method: "GET", sid: sid, hdr: map[string]string{"MCP-Protocol-Version": "x"}, wantStatus: 400, wantCode: -32022, wantID: "null"},
		{name: "delete without session", method: "DELETE", wantStatus: 400, wantCode: -32000, wantID: "null"},
		{name: "delete unknown session", method: "DELETE", sid: "nope", wantStatus: 404, wantCode: -32000, wantID: "null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			if tc.chunked {
				req, _ := http.NewRequest(tc.method, h.hs.URL, io.MultiReader(strings.NewReader(tc.body)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", tc.sid)
				var err error
				if resp, err = h.client.Do(req); err != nil {
					t.Fatal(err)
				}
				if req.ContentLength != -1 && req.ContentLength != 0 {
					t.Fatalf("request is not chunked: ContentLength %d", req.ContentLength)
				}
			} else {
				resp = h.do(t, context.Background(), tc.method, tc.sid, tc.body, tc.hdr)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tc.wantStatus, srvBody(t, resp))
			}
			if tc.wantCode == 0 {
				srvBody(t, resp)
				return
			}
			id, code, msg := srvErrorBody(t, resp)
			if code != tc.wantCode || id != tc.wantID || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("error = id %s code %d %q; want id %s code %d containing %q", id, code, msg, tc.wantID, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestStreamableServerAllowedHostsAndOrigins(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{
		AllowedHosts:   []string{"gw.example.com"},
		AllowedOrigins: []string{"https://app.example.com"},
	})
	tests := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"allowed host", map[string]string{"Host": "gw.example.com:8080"}, 200},
		{"allowed host same origin", map[string]string{"Host": "gw.example.com", "Origin": "https://gw.example.com"}, 200},
		{"allowed host allowed origin", map[string]string{"Host": "gw.example.com", "Origin": "https://app.example.com"}, 200},
		{"allowed host foreign origin", map[string]string{"Host": "gw.example.com", "Origin": "https://evil.example.com"}, 403},
		{"loopback host allowed origin", map[string]string{"Origin": "https://app.example.com/"}, 200},
		{"other host", map[string]string{"Host": "other.example.com"}, 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.do(t, context.Background(), http.MethodPost, "", srvInitBody, tc.hdr)
			body := srvBody(t, resp)
			if resp.StatusCode != tc.want {
				t.Errorf("status = %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
		})
	}
}

func TestStreamableServerResponses(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{})
	sid, conn := h.initSession(t)

	t.Run("json fast path", func(t *testing.T) {
		resp := h.post(t, sid, `{"jsonrpc":"2.0","id":"l1","method":"tools/list"}`)
		body := srvBody(t, resp)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if resp.Header.Get("Mcp-Session-Id") != "" {
			t.Error("Mcp-Session-Id echoed on a non-initialize response")
		}
		msg, err := wire.Decode(body)
		if err != nil {
			t.Fatalf("decoding %s: %v", body, err)
		}
		r, ok := msg.(*jsonrpc.Response)
		if !ok || r.ID != srvStrID("l1") || !bytes.Contains(r.Result, []byte(`"progress"`)) {
			t.Errorf("response = %s", body)
		}
	})

	t.Run("sse when a notification comes first", func(t *testing.T) {
		resp := h.post(t, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":99}}}`)
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("status %d, Content-Type %q", resp.StatusCode, ct)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("Cache-Control = %q", cc)
		}
		events := srvEvents(resp.Body)
		for i := 1; i <= 2; i++ {
			ev := srvNextEvent(t, events, true)
			want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":99,"progress":%d,"total":2}}`, i)
			if ev.name != "message" || ev.data != want {
				t.Errorf("event %d = %+v, want message %s", i, ev, want)
			}
		}
		ev := srvNextEvent(t, events, true)
		if msg, err := wire.Decode([]byte(ev.data)); err != nil || msg.(*jsonrpc.Response).ID != srvIntID(7) {
			t.Errorf("last event = %+v, want the response to 7", ev)
		}
		if ev, ok := <-events; ok {
			t.Errorf("stream continued after the response: %+v", ev)
		}
	})

	t.Run("sse when the client prefers it", func(t *testing.T) {
		for _, tc := range []struct {
			accept, want string
		}{
			{"text/event-stream, application/json", "text/event-stream"},
			{"application/json, text/event-stream", "application/json"},
			{"*/*", "application/json"},
		} {
			resp := h.do(t, context.Background(), http.MethodPost, sid,
				`{"jsonrpc":"2.0","id":"pref","method":"tools/list"}`, map[string]string{"Accept": tc.accept})
			body := srvBody(t, resp)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != tc.want {
				t.Errorf("Accept %q: status %d, Content-Type %q, want %s (%s)", tc.accept, resp.StatusCode, ct, tc.want, body)
			}
		}
	})

	t.Run("notification gets 202", func(t *testing.T) {
		resp := h.post(t, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if body := srvBody(t, resp); resp.StatusCode != 202 || len(body) != 0 {
			t.Fatalf("status %d body %q, want 202 and no body", resp.StatusCode, body)
		}
		if n := srvWait(t, h.notes, "notification"); n.Method != "notifications/initialized" {
			t.Errorf("delivered %s", n.Method)
		}
	})

	t.Run("response gets 202", func(t *testing.T) {
		resp := h.post(t, sid, `{"jsonrpc":"2.0","id":"x1","result":{}}`)
		if body := srvBody(t, resp); resp.StatusCode != 202 || len(body) != 0 {
			t.Fatalf("status %d body %q, want 202 and no body", resp.StatusCode, body)
		}
	})

	t.Run("duplicate in-flight id", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		slow := `{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"slow"}}`
		go func() {
			if resp, err := h.client.Do(srvRequest(ctx, h.hs.URL, sid, slow)); err == nil {
				resp.Body.Close()
			}
		}()
		srvWait(t, h.slowCalls, "slow call")
		resp := h.post(t, sid, slow)
		if resp.StatusCode != 400 {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
		if id, code, _ := srvErrorBody(t, resp); id != `"dup"` || code != jsonrpc.CodeInvalidRequest {
			t.Errorf("error id %s code %d", id, code)
		}
		cancel()
		srvWait(t, h.lateWrite, "late response")
	})

	t.Run("unrelated messages reach the standalone stream", func(t *testing.T) {
		// Written while no GET is open: kept in the backlog.
		if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/tools/list_changed"}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp := h.do(t, ctx, http.MethodGet, sid, "", nil)
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("GET status %d Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		events := srvEvents(resp.Body)
		if ev := srvNextEvent(t, events, true); ev.data != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` {
			t.Errorf("backlogged event = %+v", ev)
		}
		// Related to a request that has ended: also the standalone stream.
		ctxRel := transports.WithRelated(context.Background(), srvIntID(7))
		if err := conn.Write(ctxRel, &jsonrpc.Request{ID: srvStrID("s1"), Method: "ping"}); err != nil {
			t.Fatal(err)
		}
		if ev := srvNextEvent(t, events, true); ev.data != `{"jsonrpc":"2.0","id":"s1","method":"ping"}` {
			t.Errorf("live event = %+v", ev)
		}

		second := h.do(t, context.Background(), http.MethodGet, sid, "", nil)
		if second.StatusCode != http.StatusConflict {
			t.Errorf("second GET status = %d, want 409", second.StatusCode)
		}
		srvBody(t, second)
	})

	t.Run("late response is dropped", func(t *testing.T) {
		if err := conn.Write(context.Background(), &jsonrpc.Response{ID: srvStrID("never-asked"), Result: json.RawMessage(`{}`)}); err != nil {
			t.Errorf("Write of an unroutable response = %v, want nil", err)
		}
	})
}

func srvRequest(ctx context.Context, url, sid, body string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	return req
}

func TestStreamableServerClientDisconnect(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{})
	sid, _ := h.initSession(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		resp, err := h.client.Do(srvRequest(ctx, h.hs.URL, sid, `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"slow"}}`))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	if id := srvWait(t, h.slowCalls, "slow call"); id != srvStrID("c1") {
		t.Fatalf("slow call id %v", id.Raw())
	}
	cancel()
	<-done
	note := srvWait(t, h.notes, "synthesized cancellation")
	if note.Method != "notifications/cancelled" || string(note.Params) != `{"requestId":"c1","reason":"client disconnected"}` {
		t.Errorf("delivered %s %s", note.Method, note.Params)
	}
	if err := srvWait(t, h.lateWrite, "late response"); err != nil {
		t.Errorf("Write of the response after the client left = %v, want nil", err)
	}
	// The session is still usable and the id is free again.
	resp := h.post(t, sid, `{"jsonrpc":"2.0","id":"c1","method":"ping"}`)
	if body := srvBody(t, resp); resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"id":"c1"`)) {
		t.Errorf("ping after disconnect: %d %s", resp.StatusCode, body)
	}
}

func TestStreamableServerKeepAlive(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{KeepAlive: 20 * time.Millisecond})
	sid, _ := h.initSession(t)

	t.Run("standalone stream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp := h.do(t, ctx, http.MethodGet, sid, "", nil)
		defer resp.Body.Close()
		events := srvEvents(resp.Body)
		for {
			if ev := srvNextEvent(t, events, false); ev.comment == "keepalive" {
				return
			}
		}
	})

	t.Run("pending call switches to sse", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := h.client.Do(srvRequest(ctx, h.hs.URL, sid, `{"jsonrpc":"2.0","id":"k1","method":"tools/call","params":{"name":"slow"}}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		srvWait(t, h.slowCalls, "slow call")
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type = %q, want text/event-stream", ct)
		}
		events := srvEvents(resp.Body)
		if ev := srvNextEvent(t, events, false); ev.comment != "keepalive" {
			t.Errorf("first event = %+v, want a keepalive comment", ev)
		}
		cancel()
		srvWait(t, h.lateWrite, "late response")
	})
}

func TestStreamableServerSessionLifecycle(t *testing.T) {
	t.Parallel()
	t.Run("delete", func(t *testing.T) {
		h := srvStart(t, false, transports.StreamableServerOptions{})
		sid, conn := h.initSession(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		get := h.do(t, ctx, http.MethodGet, sid, "", nil)
		defer get.Body.Close()

		resp := h.do(t, context.Background(), http.MethodDelete, sid, "", nil)
		if srvBody(t, resp); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE status = %d, want 204", resp.StatusCode)
		}
		if err := srvWait(t, h.readErrs, "Read to end"); !errors.Is(err, io.EOF) {
			t.Errorf("Read after DELETE = %v, want io.EOF", err)
		}
		if _, err := conn.Read(context.Background()); !errors.Is(err, io.EOF) {
			t.Errorf("second Read = %v, want io.EOF", err)
		}
		if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/x"}); !errors.Is(err, transports.ErrClosed) {
			t.Errorf("Write after DELETE = %v, want ErrClosed", err)
		}
		// The open GET stream ends.
		if _, err := io.Copy(io.Discard, get.Body); err != nil {
			t.Errorf("GET body after DELETE: %v", err)
		}
		resp = h.post(t, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if resp.StatusCode != 404 {
			t.Errorf("POST after DELETE status = %d, want 404", resp.StatusCode)
		}
		srvErrorBody(t, resp)
	})

	t.Run("connection close", func(t *testing.T) {
		h := srvStart(t, false, transports.StreamableServerOptions{})
		sid, conn := h.initSession(t)
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
		if err := conn.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
		resp := h.post(t, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if srvBody(t, resp); resp.StatusCode != 404 {
			t.Errorf("POST after Close status = %d, want 404", resp.StatusCode)
		}
	})

	t.Run("idle timeout", func(t *testing.T) {
		h := srvStart(t, false, transports.StreamableServerOptions{IdleTimeout: 50 * time.Millisecond})
		// start is taken before the session exists: its idle time counts
		// from its last activity inside initSession, which a loaded machine
		// may return from well after.
		start := time.Now()
		sid, _ := h.initSession(t)
		if err := srvWait(t, h.readErrs, "idle close"); !errors.Is(err, io.EOF) {
			t.Errorf("Read = %v, want io.EOF", err)
		}
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Errorf("session closed after %v, before the idle timeout", d)
		}
		resp := h.post(t, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if srvBody(t, resp); resp.StatusCode != 404 {
			t.Errorf("POST after idle close status = %d, want 404", resp.StatusCode)
		}
	})

	t.Run("activity keeps a session", func(t *testing.T) {
		h := srvStart(t, false, transports.StreamableServerOptions{IdleTimeout: 300 * time.Millisecond})
		sid, _ := h.initSession(t)
		for range 8 {
			time.Sleep(50 * time.Millisecond)
			resp := h.post(t, sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			if srvBody(t, resp); resp.StatusCode != 200 {
				t.Fatalf("ping status = %d, want 200", resp.StatusCode)
			}
		}
	})

	t.Run("failed initialize closes the session", func(t *testing.T) {
		h := srvStart(t, false, transports.StreamableServerOptions{})
		resp := h.post(t, "", strings.Replace(srvInitBody, "2025-11-25", "reject-me", 1))
		body := srvBody(t, resp)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"rejected"`)) {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		if err := srvWait(t, h.readErrs, "session close"); !errors.Is(err, io.EOF) {
			t.Errorf("Read = %v, want io.EOF", err)
		}
	})

	t.Run("server close", func(t *testing.T) {
		h := srvStart(t, false, transports.StreamableServerOptions{})
		sid, _ := h.initSession(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pending := make(chan *http.Response, 1)
		go func() {
			resp, err := h.client.Do(srvRequest(ctx, h.hs.URL, sid, `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"slow"}}`))
			if err != nil {
				pending <- nil
				return
			}
			pending <- resp
		}()
		srvWait(t, h.slowCalls, "slow call")
		if err := h.srv.Close(); err != nil {
			t.Fatal(err)
		}
		if err := srvWait(t, h.readErrs, "Read to end"); !errors.Is(err, io.EOF) {
			t.Errorf("Read after server Close = %v, want io.EOF", err)
		}
		if resp := srvWait(t, pending, "pending POST"); resp == nil || resp.StatusCode != 503 {
			t.Errorf("pending POST after server Close = %+v, want 503", resp)
		} else {
			srvErrorBody(t, resp)
		}
		resp := h.post(t, "", srvInitBody)
		if srvBody(t, resp); resp.StatusCode != 503 {
			t.Errorf("POST after server Close status = %d, want 503", resp.StatusCode)
		}
	})
}

// TestStreamableServerNoLeaks runs a full session mix and checks that no
// goroutine of the server or of the test loop survives closing.
func TestStreamableServerNoLeaks(t *testing.T) {
	t.Parallel()
	srvLeaks := func() []string {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaks []string
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i == 0 { // this goroutine
				continue
			}
			if strings.Contains(g, "transports.(*StreamableServer)") || strings.Contains(g, "transports.(*srv") ||
				strings.Contains(g, "transports.srv") || strings.Contains(g, "transports_test.(*srvHarness)") {
				leaks = append(leaks, g)
			}
		}
		return leaks
	}
	func() {
		h := srvStart(t, false, transports.StreamableServerOptions{KeepAlive: 10 * time.Millisecond})
		defer h.close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
			CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: "a"}, Model: "m", Role: "assistant"}, nil
			},
		})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.hs.URL, HTTPClient: h.client}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		srvWait(t, h.conns, "accepted connection")
		for _, name := range []string{"progress", "ask", "echo"} {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name}); err != nil {
				t.Fatalf("CallTool(%s): %v", name, err)
			}
		}
		// A second session left open with a GET stream and a pending call:
		// closing the server must end both.
		sid, _ := h.initSession(t)
		get := h.do(t, ctx, http.MethodGet, sid, "", nil)
		defer get.Body.Close()
		postDone := make(chan struct{})
		go func() {
			defer close(postDone)
			if resp, err := h.client.Do(srvRequest(ctx, h.hs.URL, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		srvWait(t, h.slowCalls, "slow call")
		cs.Close()
		// Closing the server, with the clients still connected, ends the
		// GET stream and the pending POST.
		h.srv.Close()
		getDone := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, get.Body)
			getDone <- err
		}()
		if err := srvWait(t, getDone, "GET stream to end"); err != nil {
			t.Errorf("GET stream: %v", err)
		}
		srvWait(t, postDone, "pending POST to end")
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		leaks := srvLeaks()
		if len(leaks) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines leaked:\n%s", len(leaks), strings.Join(leaks, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FuzzStreamablePOST posts arbitrary bodies to a live session: every POST
// gets exactly one HTTP answer, and a 2xx exactly when the body is one valid
// JSON-RPC message.
func FuzzStreamablePOST(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":"a","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"x"}`,
		`{"jsonrpc":"2.0"}`,
		`{"jsonrpc":`,
		``,
		`null`,
		"\xff",
	} {
		f.Add([]byte(seed))
	}
	h := srvStart(f, true, transports.StreamableServerOptions{})
	sid, _ := h.initSession(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _ := http.NewRequest(http.MethodPost, h.hs.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatalf("no HTTP answer: %v", err)
		}
		got := srvBody(t, resp)
		msg, decErr := wire.Decode(body)
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		valid := decErr == nil && (len(trimmed) == 0 || trimmed[0] != '[')
		ok := resp.StatusCode/100 == 2
		if valid != ok {
			t.Fatalf("status %d for body %q (decode error %v): %s", resp.StatusCode, body, decErr, got)
		}
		if !ok {
			if resp.StatusCode != 400 {
				t.Fatalf("status %d, want 400 for %q", resp.StatusCode, body)
			}
			var e struct {
				Error *struct{ Code int64 } `json:"error"`
			}
			if json.Unmarshal(got, &e) != nil || e.Error == nil {
				t.Fatalf("400 without a JSON-RPC error body: %s", got)
			}
			return
		}
		if req, isReq := msg.(*jsonrpc.Request); isReq && req.IsCall() {
			out, err := wire.Decode(got)
			if resp.StatusCode != 200 || err != nil || out.(*jsonrpc.Response).ID != req.ID {
				t.Fatalf("call answered %d %s (%v)", resp.StatusCode, got, err)
			}
		} else if resp.StatusCode != 202 || len(got) != 0 {
			t.Fatalf("non-call answered %d %q, want 202", resp.StatusCode, got)
		}
	})
}

func BenchmarkStreamableServerCall(b *testing.B) {
	h := srvStart(b, true, transports.StreamableServerOptions{})
	sid, _ := h.initSession(b)
	url := h.hs.URL
	call := func(client *http.Client, id int) error {
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
		resp, err := client.Do(srvRequest(context.Background(), url, sid, body))
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		id := 0
		for b.Loop() {
			id++
			if err := call(h.client, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		tr := h.client.Transport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		client := &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
		var mu sync.Mutex
		next := 1 << 30
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				mu.Lock()
				next++
				id := next
				mu.Unlock()
				if err := call(client, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func srvStrID(s string) jsonrpc.ID { id, _ := jsonrpc.MakeID(s); return id }

func srvIntID(n int64) jsonrpc.ID { id, _ := jsonrpc.MakeID(float64(n)); return id }
