package transports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const scProtocolVersion = "2025-11-25"

// scSeen is one HTTP request a test server received.
type scSeen struct {
	method string
	header http.Header
	body   string
}

// scRecorder wraps a handler and records the requests it receives.
type scRecorder struct {
	mu   sync.Mutex
	reqs []scSeen
}

func (r *scRecorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
			req.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, scSeen{req.Method, req.Header.Clone(), string(body)})
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
}

func (r *scRecorder) all() []scSeen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]scSeen(nil), r.reqs...)
}

// waitFor polls the recorded requests until one satisfies ok.
func (r *scRecorder) waitFor(t *testing.T, what string, ok func(scSeen) bool) scSeen {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range r.all() {
			if ok(s) {
				return s
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the server never received %s", what)
	return scSeen{}
}

// scNewServer returns a go-sdk server with an echo tool, served by a
// streamable HTTP handler on a real listener.
func scNewServer(t testing.TB, opts *mcp.StreamableHTTPOptions) (*httptest.Server, *mcp.Server, *scRecorder) {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	scAddEcho(server)
	rec := &scRecorder{}
	ts := httptest.NewServer(rec.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, opts)))
	t.Cleanup(ts.Close)
	return ts, server, rec
}

type scEchoArgs struct {
	Text   string `json:"text"`
	Repeat int    `json:"repeat,omitempty"`
}

func scAddEcho(server *mcp.Server) {
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, args scEchoArgs) (*mcp.CallToolResult, any, error) {
		text := args.Text
		if args.Repeat > 0 {
			text = strings.Repeat(text, args.Repeat)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
}

func scConnect(t testing.TB, url string, header http.Header) Connection {
	t.Helper()
	conn, err := (&StreamableClientTransport{URL: url, Header: header}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func scID(n int64) jsonrpc.ID {
	id, err := jsonrpc.MakeID(float64(n))
	if err != nil {
		panic(err)
	}
	return id
}

func scCall(id int64, method, params string) *jsonrpc.Request {
	r := &jsonrpc.Request{ID: scID(id), Method: method}
	if params != "" {
		r.Params = json.RawMessage(params)
	}
	return r
}

func scWrite(t testing.TB, conn Connection, msg jsonrpc.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := conn.Write(ctx, msg); err != nil {
		t.Fatalf("Write(%s): %v", describeMsg(msg), err)
	}
}

func scRead(t testing.TB, conn Connection) jsonrpc.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return msg
}

func scReadResponse(t testing.TB, conn Connection, id int64) *jsonrpc.Response {
	t.Helper()
	msg := scRead(t, conn)
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		t.Fatalf("read %s %+v, want the response to %d", describeMsg(msg), msg, id)
	}
	if resp.ID != scID(id) {
		t.Fatalf("read the response to %v, want the one to %d", resp.ID.Raw(), id)
	}
	return resp
}

// scHandshake initializes the session on conn.
func scHandshake(t testing.TB, conn Connection) {
	t.Helper()
	scWrite(t, conn, scCall(1, "initialize", `{"protocolVersion":"`+scProtocolVersion+`","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}`))
	resp := scReadResponse(t, conn, 1)
	if resp.Error != nil {
		t.Fatalf("initialize failed: %v", resp.Error)
	}
	scWrite(t, conn, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
}

// scToolText returns the text of the first content block of a tools/call result.
func scToolText(t testing.TB, resp *jsonrpc.Response) string {
	t.Helper()
	if resp.Error != nil {
		t.Fatalf("tools/call failed: %v", resp.Error)
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil || len(res.Content) == 0 || res.IsError {
		t.Fatalf("bad tools/call result %s (%v)", resp.Result, err)
	}
	return res.Content[0].Text
}

func scEchoCall(id int64, text string) *jsonrpc.Request {
	return scCall(id, "tools/call", `{"name":"echo","arguments":{"text":"`+text+`"}}`)
}

func TestStreamableClientHandshakeAndHeaders(t *testing.T) {
	t.Parallel()
	ts, _, rec := scNewServer(t, nil)
	conn := scConnect(t, ts.URL, http.Header{"authorization": {"Bearer secret"}})
	scHandshake(t, conn)
	sid := conn.SessionID()
	if sid == "" {
		t.Fatal("no session id after initialize")
	}
	scWrite(t, conn, scEchoCall(2, "hi"))
	if got := scToolText(t, scReadResponse(t, conn, 2)); got != "hi" {
		t.Errorf("echo returned %q", got)
	}
	rec.waitFor(t, "the standalone GET", func(s scSeen) bool { return s.method == http.MethodGet })

	for i, s := range rec.all() {
		if got := s.header.Get("Authorization"); got != "Bearer secret" {
			t.Errorf("request %d (%s): Authorization = %q", i, s.method, got)
		}
		init := strings.Contains(s.body, `"initialize"`)
		wantSID, wantPV := sid, scProtocolVersion
		if init {
			wantSID, wantPV = "", ""
		}
		if got := s.header.Get("Mcp-Session-Id"); got != wantSID {
			t.Errorf("request %d (%s %s): Mcp-Session-Id = %q, want %q", i, s.method, s.body, got, wantSID)
		}
		if got := s.header.Get("MCP-Protocol-Version"); got != wantPV {
			t.Errorf("request %d (%s %s): MCP-Protocol-Version = %q, want %q", i, s.method, s.body, got, wantPV)
		}
		switch s.method {
		case http.MethodPost:
			if got := s.header.Get("Accept"); got != "application/json, text/event-stream" {
				t.Errorf("POST Accept = %q", got)
			}
			if got := s.header.Get("Content-Type"); got != "application/json" {
				t.Errorf("POST Content-Type = %q", got)
			}
		case http.MethodGet:
			if got := s.header.Get("Accept"); got != "text/event-stream" {
				t.Errorf("GET Accept = %q", got)
			}
		}
	}
}

func TestStreamableClientServerModes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{
		{"sse", nil},
		{"json", &mcp.StreamableHTTPOptions{JSONResponse: true}},
		{"stateless", &mcp.StreamableHTTPOptions{Stateless: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts, _, rec := scNewServer(t, tt.opts)
			conn := scConnect(t, ts.URL, nil)
			scHandshake(t, conn)
			if tt.opts != nil && tt.opts.Stateless && conn.SessionID() != "" {
				t.Errorf("stateless server gave session id %q", conn.SessionID())
			}
			scWrite(t, conn, scEchoCall(2, "plain"))
			if got := scToolText(t, scReadResponse(t, conn, 2)); got != "plain" {
				t.Errorf("echo returned %q", got)
			}

			// A 1 MiB result arrives whole.
			scWrite(t, conn, scCall(3, "tools/call", `{"name":"echo","arguments":{"text":"0123456789abcdef","repeat":65536}}`))
			if got := scToolText(t, scReadResponse(t, conn, 3)); len(got) != 1<<20 || got[:16] != "0123456789abcdef" {
				t.Errorf("1 MiB echo returned %d bytes", len(got))
			}

			// Unknown tools give a JSON-RPC error, passed on as is.
			scWrite(t, conn, scCall(4, "tools/call", `{"name":"nope","arguments":{}}`))
			if resp := scReadResponse(t, conn, 4); resp.Error == nil && !strings.Contains(string(resp.Result), `"isError":true`) {
				t.Errorf("unknown tool answered %s", resp.Result)
			}
			if tt.opts != nil && tt.opts.Stateless {
				for _, s := range rec.all() {
					if s.method != http.MethodPost {
						t.Errorf("stateless server got a %s", s.method)
					}
				}
			}
		})
	}
}

func TestStreamableClientProgressAndLogging(t *testing.T) {
	t.Parallel()
	ts, server, _ := scNewServer(t, nil)
	release := make(chan struct{})
	mcp.AddTool(server, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2})
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "working"})
		<-release // Write must have returned without waiting for this
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2, Total: 2})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	conn := scConnect(t, ts.URL, nil)
	scHandshake(t, conn)
	scWrite(t, conn, scCall(2, "logging/setLevel", `{"level":"debug"}`))
	scReadResponse(t, conn, 2)

	scWrite(t, conn, scCall(3, "tools/call", `{"name":"slow","arguments":{},"_meta":{"progressToken":"tok"}}`))
	var got []string
	for len(got) < 2 {
		msg := scRead(t, conn)
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			t.Fatalf("got %+v before the notifications", msg)
		}
		if rel, ok := RelatedTo(req); !ok || rel != scID(3) {
			t.Errorf("%s related to %v (%v), want request 3", req.Method, rel.Raw(), ok)
		}
		got = append(got, req.Method)
	}
	close(release)
	msg := scRead(t, conn)
	if req, ok := msg.(*jsonrpc.Request); !ok || req.Method != "notifications/progress" || !strings.Contains(string(req.Params), `"progress":2`) {
		t.Fatalf("got %+v, want the second progress notification", msg)
	}
	if got := scToolText(t, scReadResponse(t, conn, 3)); got != "done" {
		t.Errorf("result %q", got)
	}
	if fmt.Sprint(got) != "[notifications/progress notifications/message]" {
		t.Errorf("notifications in order %v", got)
	}
}

func TestStreamableClientSampling(t *testing.T) {
	t.Parallel()
	ts, server, _ := scNewServer(t, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			MaxTokens: 10,
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "question"}}},
		})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
	})
	conn := scConnect(t, ts.URL, nil)
	scHandshake(t, conn)
	scWrite(t, conn, scCall(2, "tools/call", `{"name":"ask","arguments":{}}`))
	msg := scRead(t, conn)
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "sampling/createMessage" || !req.IsCall() {
		t.Fatalf("got %+v, want a sampling request", msg)
	}
	if rel, ok := RelatedTo(req); !ok || rel != scID(2) {
		t.Errorf("sampling request related to %v (%v), want request 2", rel.Raw(), ok)
	}
	scWrite(t, conn, &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"answer"},"model":"m"}`)})
	if got := scToolText(t, scReadResponse(t, conn, 2)); got != "answer" {
		t.Errorf("tool returned %q", got)
	}
}

func TestStreamableClientStandaloneStream(t *testing.T) {
	t.Parallel()
	ts, server, rec := scNewServer(t, nil)
	conn := scConnect(t, ts.URL, nil)
	scHandshake(t, conn)
	rec.waitFor(t, "the standalone GET", func(s scSeen) bool { return s.method == http.MethodGet })

	// The GET may reach the server's session a little after the handler
	// saw it: add tools until a notification comes through.
	for i := range 20 {
		server.AddTool(&mcp.Tool{Name: fmt.Sprintf("late%d", i), InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		msg, err := conn.Read(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.Method != "notifications/tools/list_changed" {
			t.Fatalf("got %+v, want tools/list_changed", msg)
		}
		if rel, ok := RelatedTo(req); ok {
			t.Errorf("standalone notification related to %v", rel.Raw())
		}
		return
	}
	t.Fatal("no tools/list_changed arrived on the standalone stream")
}

func TestStreamableClientResumption(t *testing.T) {
	t.Parallel()
	ts, server, rec := scNewServer(t, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	mcp.AddTool(server, &mcp.Tool{Name: "poll"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 20 * time.Millisecond})
		time.Sleep(50 * time.Millisecond)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "after resume"}}}, nil, nil
	})
	conn := scConnect(t, ts.URL, nil)
	scHandshake(t, conn)
	scWrite(t, conn, scCall(2, "tools/call", `{"name":"poll","arguments":{},"_meta":{"progressToken":1}}`))
	if msg, ok := scRead(t, conn).(*jsonrpc.Request); !ok || msg.Method != "notifications/progress" {
		t.Fatalf("got %+v, want progress", msg)
	}
	if got := scToolText(t, scReadResponse(t, conn, 2)); got != "after resume" {
		t.Errorf("result %q", got)
	}
	rec.waitFor(t, "a GET with Last-Event-ID", func(s scSeen) bool {
		return s.method == http.MethodGet && s.header.Get("Last-Event-ID") != ""
	})
}

// scSwitchHandler serves with whichever handler is current.
type scSwitchHandler struct{ h atomic.Pointer[http.Handler] }

func (s *scSwitchHandler) set(h http.Handler) { s.h.Store(&h) }
func (s *scSwitchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

func TestStreamableClientSessionExpired(t *testing.T) {
	t.Parallel()
	newHandler := func(block chan struct{}) http.Handler {
		server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		scAddEcho(server)
		mcp.AddTool(server, &mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
			select {
			case <-block:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{}, nil, nil
		})
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	}
	block := make(chan struct{})
	defer close(block)
	sw := &scSwitchHandler{}
	sw.set(newHandler(block))
	rec := &scRecorder{}
	ts := httptest.NewServer(rec.wrap(sw))
	defer ts.Close()

	conn := scConnect(t, ts.URL, nil)
	scHandshake(t, conn)
	// A call in flight on the old session.
	scWrite(t, conn, scCall(2, "tools/call", `{"name":"block","arguments":{},"_meta":{"progressToken":"p"}}`))
	scRead(t, conn) // its progress

	// The standalone stream stays with the old server.
	rec.waitFor(t, "the standalone GET", func(s scSeen) bool { return s.method == http.MethodGet })
	sw.set(newHandler(block)) // the server restarted: the session is gone
	scWrite(t, conn, scEchoCall(3, "lost"))

	answered := map[any]string{}
	for range 2 {
		resp, ok := scRead(t, conn).(*jsonrpc.Response)
		if !ok || resp.Error == nil {
			t.Fatalf("got %+v, want an error response", resp)
		}
		answered[resp.ID.Raw()] = resp.Error.Error()
	}
	if _, ok := answered[int64(2)]; !ok {
		t.Errorf("call in flight not answered: %v", answered)
	}
	if _, ok := answered[int64(3)]; !ok {
		t.Errorf("call that met the 404 not answered: %v", answered)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Read(ctx); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("Read after expiry: %v, want ErrSessionExpired", err)
	}
	if err := conn.Write(ctx, scEchoCall(4, "x")); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("Write after expiry: %v, want ErrSessionExpired", err)
	}
	conn.Close()
	for _, s := range rec.all() {
		if s.method == http.MethodDelete {
			t.Error("Close sent DELETE for an expired session")
		}
	}
}

// scRawServer is a hand-written streamable HTTP server: initialize is answered
// with a session, everything else by handle.
func scRawServer(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message)) (*httptest.Server, *scRecorder) {
	rec := &scRecorder{}
	ts := httptest.NewServer(rec.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			handle(w, r, nil)
			return
		}
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.DecodeMessage(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"result":{"protocolVersion":"%s","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`, req.ID.Raw(), scProtocolVersion)
			return
		}
		handle(w, r, msg)
	})))
	t.Cleanup(ts.Close)
	return ts, rec
}

func scSSEHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

func TestStreamableClientStreamEndsWithoutAnswer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		withID bool
	}{{"no event ids", false}, {"resumption refused", true}} {
		t.Run(tt.name, func(t *testing.T) {
			ts, rec := scRawServer(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
				req, _ := msg.(*jsonrpc.Request)
				switch {
				case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "":
					http.Error(w, "stream replay unsupported", http.StatusBadRequest)
				case r.Method != http.MethodPost:
					http.Error(w, "no stream", http.StatusMethodNotAllowed)
				case req != nil && req.IsCall():
					scSSEHeaders(w)
					if tt.withID {
						io.WriteString(w, "id: ev1\n")
					}
					io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n")
				default:
					w.WriteHeader(http.StatusAccepted)
				}
			})
			conn := scConnect(t, ts.URL, nil)
			scHandshake(t, conn)
			scWrite(t, conn, scEchoCall(2, "x"))
			if req, ok := scRead(t, conn).(*jsonrpc.Request); !ok || req.Method != "notifications/message" {
				t.Fatalf("got %+v, want the notification", req)
			}
			resp := scReadResponse(t, conn, 2)
			var werr *jsonrpc.Error
			if !errors.As(resp.Error, &werr) || werr.Code != jsonrpc.CodeInternalError || werr.Message != "upstream closed the response stream before answering" {
				t.Fatalf("answer %+v, want the synthesized error", resp.Error)
			}
			if tt.withID {
				s := rec.waitFor(t, "a resumption GET", func(s scSeen) bool { return s.method == http.MethodGet && s.header.Get("Last-Event-ID") != "" })
				if got := s.header.Get("Last-Event-ID"); got != "ev1" {
					t.Errorf("Last-Event-ID = %q, want ev1", got)
				}
			}
			// Exactly one answer: nothing else arrives.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if msg, err := conn.Read(ctx); err == nil {
				t.Errorf("unexpected extra message %+v", msg)
			}
		})
	}
}

func TestStreamableClientHTTPErrors(t *testing.T) {
	t.Parallel()
	ts, _ := scRawServer(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		if r.Method == http.MethodGet {
			http.Error(w, "no stream", http.StatusMethodNotAllowed)
			return
		}
		req, ok := msg.(*jsonrpc.Request)
		switch {
		case !ok:
			w.WriteHeader(http.StatusAccepted)
		case req.Method == "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case req.Method == "jsonrpc-error":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32020,"message":"header mismatch"}}`)
		default:
			http.Error(w, "boom "+strings.Repeat("z", 2000), http.StatusInternalServerError)
		}
	})
	conn := scConnect(t, ts.URL, nil)
	scHandshake(t, conn)

	t.Run("call with HTTP 500", func(t *testing.T) {
		scWrite(t, conn, scEchoCall(2, "x"))
		resp := scReadResponse(t, conn, 2)
		var werr *jsonrpc.Error
		if !errors.As(resp.Error, &werr) || werr.Code != jsonrpc.CodeInternalError {
			t.Fatalf("answer %+v, want an internal error", resp.Error)
		}
		if !strings.Contains(werr.Message, "500") || !strings.Contains(werr.Message, "boom") {
			t.Errorf("message %q does not name the status and body", werr.Message)
		}
		if len(werr.Message) > 600 {
			t.Errorf("message of %d bytes quotes too much of the body", len(werr.Message))
		}
	})
	t.Run("call with JSON-RPC error body", func(t *testing.T) {
		scWrite(t, conn, scCall(3, "jsonrpc-error", ""))
		resp := scReadResponse(t, conn, 3)
		var werr *jsonrpc.Error
		if !errors.As(resp.Error, &werr) || werr.Code != -32020 || werr.Message != "header mismatch" {
			t.Fatalf("answer %+v, want the server's error", resp.Error)
		}
	})
	t.Run("notification with HTTP 500", func(t *testing.T) {
		err := conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/whatever"})
		if err == nil || !strings.Contains(err.Error(), "500") {
			t.Fatalf("Write = %v, want an error naming HTTP 500", err)
		}
	})
	t.Run("the connection still works", func(t *testing.T) {
		scWrite(t, conn, &jsonrpc.Response{ID: scID(99), Result: json.RawMessage(`{}`)})
	})
}

func TestStreamableClientTransportErrors(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close() // nothing listens there now

	conn := scConnect(t, url, nil)
	err = conn.Write(context.Background(), scEchoCall(1, "x"))
	if err == nil || !strings.Contains(err.Error(), "tools/call") {
		t.Fatalf("Write = %v, want a connection error naming the request", err)
	}
	// The failed request is not answered through Read, and the id is free.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if msg, err := conn.Read(ctx); err == nil {
		t.Errorf("Read returned %+v", msg)
	}
	if err := conn.Write(context.Background(), scEchoCall(1, "x")); err == nil || strings.Contains(err.Error(), "in flight") {
		t.Errorf("second Write = %v, want a connection error", err)
	}

	if _, err := (&StreamableClientTransport{URL: "ftp://x"}).Connect(context.Background()); err == nil {
		t.Error("Connect accepted an ftp URL")
	}
}

func TestStreamableClientWriteContext(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	ts, _ := scRawServer(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		if r.Method == http.MethodGet {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusAccepted)
	})
	defer close(hold)
	conn := scConnect(t, ts.URL, nil)
	scHandshake(t, conn)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := conn.Write(ctx, scEchoCall(2, "x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Write took %v after its context ended", d)
	}
}

// scGoroutines returns the stacks of goroutines running this package's
// connection code.
func scGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "transports.(*streamableClientConn)") {
			out = append(out, g)
		}
	}
	return out
}

func TestStreamableClientClose(t *testing.T) {
	before := runtime.NumGoroutine()
	ts, server, rec := scNewServer(t, nil)
	release := make(chan struct{})
	mcp.AddTool(server, &mcp.Tool{Name: "hang"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	conn, err := (&StreamableClientTransport{URL: ts.URL}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	scHandshake(t, conn)
	sid := conn.SessionID()
	rec.waitFor(t, "the standalone GET", func(s scSeen) bool { return s.method == http.MethodGet })
	scWrite(t, conn, scCall(2, "tools/call", `{"name":"hang","arguments":{},"_meta":{"progressToken":"p"}}`))
	scRead(t, conn) // progress: the response stream is open

	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(context.Background())
		readErr <- err
	}()
	time.Sleep(20 * time.Millisecond)
	// The go-sdk server answers DELETE only once its handlers returned.
	go func() {
		for {
			for _, s := range rec.all() {
				if s.method == http.MethodDelete {
					close(release)
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t0 := time.Now()
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	if g := scGoroutines(); len(g) > 0 {
		t.Errorf("%d goroutines outlived Close:\n%s", len(g), strings.Join(g, "\n\n"))
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("pending Read returned %v, want ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Error("Close did not unblock Read")
	}
	if err := conn.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := conn.Write(context.Background(), scEchoCall(3, "x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v, want ErrClosed", err)
	}
	del := rec.waitFor(t, "DELETE", func(s scSeen) bool { return s.method == http.MethodDelete })
	if got := del.header.Get("Mcp-Session-Id"); got != sid {
		t.Errorf("DELETE for session %q, want %q", got, sid)
	}

	ts.Close()
	sharedHTTPClient().CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestStreamableClientConcurrentCalls(t *testing.T) {
	t.Parallel()
	ts, _, _ := scNewServer(t, nil)
	conn := scConnect(t, ts.URL, nil)
	scHandshake(t, conn)
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := conn.Write(context.Background(), scEchoCall(int64(100+i), fmt.Sprint(i))); err != nil {
				t.Error(err)
			}
		})
	}
	seen := map[int64]bool{}
	for len(seen) < n {
		resp, ok := scRead(t, conn).(*jsonrpc.Response)
		if !ok {
			continue
		}
		id := resp.ID.Raw().(int64)
		if seen[id] {
			t.Fatalf("two answers to %d", id)
		}
		seen[id] = true
		if got := scToolText(t, resp); got != fmt.Sprint(id-100) {
			t.Errorf("answer to %d is %q", id, got)
		}
	}
	wg.Wait()
}

// scDriver issues calls on a Connection from many goroutines, matching
// responses by id.
type scDriver struct {
	conn    Connection
	next    atomic.Int64
	mu      sync.Mutex
	waiting map[int64]chan *jsonrpc.Response
}

func scNewDriver(conn Connection) *scDriver {
	d := &scDriver{conn: conn, waiting: map[int64]chan *jsonrpc.Response{}}
	d.next.Store(1000)
	go func() {
		for {
			msg, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			if resp, ok := msg.(*jsonrpc.Response); ok {
				id, _ := resp.ID.Raw().(int64)
				d.mu.Lock()
				ch := d.waiting[id]
				delete(d.waiting, id)
				d.mu.Unlock()
				if ch != nil {
					ch <- resp
				}
			}
		}
	}()
	return d
}

func (d *scDriver) call(method string, params json.RawMessage) (*jsonrpc.Response, error) {
	id := d.next.Add(1)
	ch := make(chan *jsonrpc.Response, 1)
	d.mu.Lock()
	d.waiting[id] = ch
	d.mu.Unlock()
	if err := d.conn.Write(context.Background(), &jsonrpc.Request{ID: scID(id), Method: method, Params: params}); err != nil {
		return nil, err
	}
	return <-ch, nil
}

// scMinimalServer answers every call with a fixed tools/call result, as SSE
// or JSON: it shows the cost of the client transport with little server
// work.
func scMinimalServer(b *testing.B, sse bool) *httptest.Server {
	ts, _ := scRawServer(b, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		req, ok := msg.(*jsonrpc.Request)
		switch {
		case r.Method != http.MethodPost:
			http.Error(w, "no", http.StatusMethodNotAllowed)
		case !ok || !req.IsCall():
			w.WriteHeader(http.StatusAccepted)
		default:
			data := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"hello"}]}}`, req.ID.Raw())
			if sse {
				scSSEHeaders(w)
				writeSSEEvent(w, "message", "", data)
			} else {
				w.Header().Set("Content-Type", "application/json")
				w.Write(data)
			}
		}
	})
	return ts
}

// BenchmarkStreamableClientCall measures a tools/call round trip with this
// transport ("edge") and with the go-sdk's own client transport ("gosdk"),
// driven the same way, against an in-process go-sdk server with an echo tool
// and against minimal servers that answer with SSE or JSON.
func BenchmarkStreamableClientCall(b *testing.B) {
	gosdk, _, _ := scNewServer(b, nil)
	servers := []struct {
		name string
		url  string
	}{
		{"gosdk-server", gosdk.URL},
		{"minimal-sse", scMinimalServer(b, true).URL},
		{"minimal-json", scMinimalServer(b, false).URL},
	}
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hello"}}`)
	for _, srv := range servers {
		for _, tr := range []struct {
			name string
			t    mcp.Transport
		}{
			{"edge", &StreamableClientTransport{URL: srv.url}},
			{"edge-budget", &StreamableClientTransport{URL: srv.url, Budget: NewByteBudget(64 << 20)}},
			{"gosdk", &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: sharedHTTPClient(), DisableStandaloneSSE: true}},
		} {
			conn, err := tr.t.Connect(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			scHandshake(b, conn)
			d := scNewDriver(conn)
			check := func(resp *jsonrpc.Response, err error) {
				if err != nil {
					b.Fatal(err)
				}
				if resp.Error != nil {
					b.Fatal(resp.Error)
				}
			}
			b.Run(srv.name+"/"+tr.name+"/sequential", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					check(d.call("tools/call", params))
				}
			})
			b.Run(srv.name+"/"+tr.name+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						check(d.call("tools/call", params))
					}
				})
			})
			conn.Close()
		}
	}
}
