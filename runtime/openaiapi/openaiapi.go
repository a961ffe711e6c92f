// Package openaiapi is the OpenAI-style tool API of the gateway, for
// clients that speak function calling rather than MCP. The gateway mounts
// it at /v1/ behind the same authentication as the MCP endpoints, and it
// serves what the caller's identity may use, no more:
//
//	GET  /v1/tools       {"object":"list","data":[{"type":"function","function":{"name","description","parameters"}}...]}
//	POST /v1/tools/call  {"name": "<function or MCP name>", "arguments": {...}}
//	                     → {"text", "content"?, "structuredContent"?, "isError"}
//
// The data array of GET /v1/tools is OpenAI's list envelope around elements
// in exactly the shape of the chat completions "tools" array, so it can be
// passed on as it is. It holds every tool of the identity's view, deferred
// ones included (an API client wants everything it may call; it has no
// tool_search), with function names made valid by openai.Namer (stable for
// one catalogue snapshot) and "$schema" removed from the parameters.
//
// A call runs through the whole MCP pipeline: the handler opens an
// in-process session of the gateway (Host.ServeConn) for the caller's
// identity (transport "openai"), sends it the tools/call and waits for
// the answer, so access lists, rate limits,
// argument validation, policies, approval and result hooks apply exactly as
// for MCP traffic. The session never initializes: it advertises no client
// capabilities (a call needing approval is refused with a clear error, as a
// client without elicitation is), and it is never chosen to answer an
// upstream's requests that belong to no call.
//
// Errors are {"error":{"message","type"}}: 400 invalid_request_error for a
// malformed body or arguments, 401 from authentication, 404
// not_found_error for an unknown tool or path, 405, 413 for a body over
// max_body_bytes, 429 rate_limit_error (with Retry-After), 502
// upstream_error when the server failed or could not be reached, 504
// timeout_error. A tool that ran and reported an error is a 200 with
// "isError": true, as the model should read it.
package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/openai"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// Transport names the OpenAI-style API in peers and metrics.
const Transport = "openai"

// maxAPIViews bounds the per-identity views the API keeps.
const maxAPIViews = 1024

// The JSON-RPC answers of the gateway the API maps to HTTP statuses.
const (
	codeRateLimited    = -32029 // a call over a rate limit
	codeRequestTimeout = -32001 // a call that timed out
)

// Host is what the API needs of the gateway.
type Host interface {
	// Running reports whether the gateway serves (it has been started).
	Running() bool
	// MaxBodyBytes bounds the body of a call (max_body_bytes).
	MaxBodyBytes() int64
	// Caller is who sent r, as authentication said.
	Caller(r *http.Request) Caller
	// Version identifies what Tools returns for every caller: the
	// catalogue snapshot, policy generation and admission rules. Equal
	// versions (==) give equal tools.
	Version() any
	// Tools is what c may call, as c's MCP sessions would list it (the
	// gateway's own tools left out), deferred tools last.
	Tools(c Caller) []Tool
	// ServeConn runs a session over conn until conn is closed.
	ServeConn(conn transports.Connection)
}

// Caller is the identity of a request.
type Caller struct {
	Name string // the identity's name: views are kept by it
	Peer any    // what a session of the gateway takes as its peer (transports.Peer)
}

// Tool is one tool of a caller's view.
type Tool struct {
	Name string          // the MCP name the caller sees
	Def  json.RawMessage // the MCP tool definition
}

// Options configure the API.
type Options struct {
	Host Host
	Log  *slog.Logger
	// OwnTools are the gateway's own tools (tool search): they are for
	// MCP clients, not this API.
	OwnTools []string
}

// api serves /v1/.
type api struct {
	opts  Options
	mu    sync.Mutex
	views map[string]*apiView // by identity name
}

// apiView is what one identity may call in one Host.Version.
type apiView struct {
	version any
	tools   []Tool
	byName  map[string]json.RawMessage // MCP name → definition, of the view
	namer   *openai.Namer

	once sync.Once
	list []byte // the GET /v1/tools body
}

// New returns the handler of the OpenAI-style tool API under /v1/.
func New(opts Options) http.Handler {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &api{opts: opts, views: make(map[string]*apiView)}
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var method string
	switch r.URL.Path {
	case "/v1/tools":
		method = http.MethodGet
	case "/v1/tools/call":
		method = http.MethodPost
	default:
		apiError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		apiError(w, http.StatusMethodNotAllowed, "invalid_request_error", fmt.Sprintf("%s takes %s, not %s", r.URL.Path, method, r.Method))
		return
	}
	if method == http.MethodPost {
		if status, reason := transports.CheckJSONContentType(r); status != 0 {
			apiError(w, status, "invalid_request_error", reason)
			return
		}
	}
	if !a.opts.Host.Running() {
		apiError(w, http.StatusServiceUnavailable, "server_error", "edge-mcp: the gateway is not running")
		return
	}
	if method == http.MethodGet {
		a.serveTools(w, r)
	} else {
		a.serveCall(w, r)
	}
}

// apiError writes an OpenAI-style error.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": msg, "type": typ}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// view returns the identity's view of the current catalogue.
func (a *api) view(c Caller) *apiView {
	version := a.opts.Host.Version()
	a.mu.Lock()
	v := a.views[c.Name]
	a.mu.Unlock()
	if v != nil && v.version == version {
		return v
	}
	v = &apiView{version: version, tools: a.opts.Host.Tools(c)}
	v.byName = make(map[string]json.RawMessage, len(v.tools))
	names := make([]string, len(v.tools))
	for i, t := range v.tools {
		names[i] = t.Name
		if _, dup := v.byName[t.Name]; !dup {
			v.byName[t.Name] = t.Def
		}
	}
	v.namer = openai.NewNamer(names)
	a.mu.Lock()
	if len(a.views) >= maxAPIViews {
		clear(a.views)
	}
	a.views[c.Name] = v
	a.mu.Unlock()
	return v
}

// resolve finds the MCP name a function or MCP name stands for.
func (v *apiView) resolve(name string) (string, bool) {
	if mcpName, ok := v.namer.MCP(name); ok {
		name = mcpName
	}
	_, ok := v.byName[name]
	return name, ok
}

// listJSON encodes the view's tools as OpenAI function definitions, once.
func (v *apiView) listJSON(log *slog.Logger) []byte {
	v.once.Do(func() {
		b := []byte(`{"object":"list","data":[`)
		n := 0
		for _, t := range v.tools {
			tool, err := openai.ConvertTool(v.namer.OpenAI(t.Name), t.Def)
			if err != nil {
				log.Debug("tool left out of /v1/tools", "tool", t.Name, "err", err)
				continue
			}
			enc, err := json.Marshal(tool)
			if err != nil {
				log.Debug("tool left out of /v1/tools", "tool", t.Name, "err", err)
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			b = append(b, enc...)
			n++
		}
		v.list = append(b, "]}\n"...)
	})
	return v.list
}

func (a *api) serveTools(w http.ResponseWriter, r *http.Request) {
	body := a.view(a.opts.Host.Caller(r)).listJSON(a.opts.Log)
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// apiCall is the body of POST /v1/tools/call.
type apiCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func (a *api) serveCall(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.Host.MaxBodyBytes()))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("the request body is larger than %d bytes", tooLarge.Limit))
			return
		}
		apiError(w, http.StatusBadRequest, "invalid_request_error", "reading the request body: "+err.Error())
		return
	}
	var in apiCall
	if err := json.Unmarshal(body, &in); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", `the body must be a JSON object {"name": string, "arguments": object}: `+err.Error())
		return
	}
	if in.Name == "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", `"name" is required: the function (or MCP tool) name`)
		return
	}
	args, err := openai.ObjectArguments(in.Arguments)
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", `"arguments" `+err.Error())
		return
	}
	c := a.opts.Host.Caller(r)
	name, ok := a.view(c).resolve(in.Name)
	if !ok && slices.Contains(a.opts.OwnTools, in.Name) {
		// The gateway's own tools are for MCP clients, not this API.
		apiError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("unknown tool %q", in.Name))
		return
	}
	// A name the view does not hold goes through the session too, which
	// says why it cannot be called where the caller may know (server down,
	// pending approval) and answers "unknown tool" otherwise.
	if !ok {
		name = in.Name
	}
	resp, err := a.call(r.Context(), c, name, args)
	if err != nil {
		apiError(w, http.StatusBadGateway, "upstream_error", "edge-mcp: the call did not complete: "+err.Error())
		return
	}
	if resp.Error != nil {
		status, typ, msg := apiStatus(resp.Error)
		if status == http.StatusTooManyRequests {
			var e *jsonrpc.Error
			if errors.As(resp.Error, &e) {
				if after, ok, _ := wire.Field(e.Data, "retryAfter"); ok && retryAfterValue(after) != "" {
					w.Header().Set("Retry-After", retryAfterValue(after))
				}
			}
		}
		apiError(w, status, typ, msg)
		return
	}
	res, err := openai.NormalizeResult(resp.Result)
	if err != nil {
		apiError(w, http.StatusBadGateway, "upstream_error", "edge-mcp: the tool's result is not understood: "+err.Error())
		return
	}
	out, _ := json.Marshal(res)
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(out, '\n'))
}

// apiStatus maps a JSON-RPC error of a call to an HTTP status, an error
// type and a message.
func apiStatus(err error) (int, string, string) {
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		return http.StatusBadGateway, "upstream_error", err.Error()
	}
	switch {
	case e.Code == codeRateLimited:
		return http.StatusTooManyRequests, "rate_limit_error", e.Message
	case e.Code == codeRequestTimeout:
		return http.StatusGatewayTimeout, "timeout_error", e.Message
	case e.Code == jsonrpc.CodeInvalidParams && strings.HasPrefix(e.Message, "unknown tool"):
		return http.StatusNotFound, "not_found_error", e.Message
	case unavailableReason(e.Data) != "":
		return http.StatusServiceUnavailable, "server_error", e.Message
	case e.Code == jsonrpc.CodeInvalidParams, e.Code == jsonrpc.CodeInvalidRequest:
		return http.StatusBadRequest, "invalid_request_error", e.Message
	default:
		return http.StatusBadGateway, "upstream_error", e.Message
	}
}

// call runs one tools/call in a fresh in-process session of c and returns
// its answer. The session ends when the call does, or when ctx (the HTTP
// request) ends first, which cancels the call upstream.
func (a *api) call(ctx context.Context, c Caller, name string, args json.RawMessage) (*jsonrpc.Response, error) {
	conn := newAPIConn(c.Peer)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.opts.Host.ServeConn(conn)
	}()
	defer func() {
		conn.Close()
		<-done
	}()
	params := append(wire.AppendString([]byte(`{"name":`), name), '}')
	if args != nil {
		params, _ = wire.SetField(params, "arguments", args)
	}
	id, _ := jsonrpc.MakeID(float64(1))
	if err := conn.deliver(ctx, &jsonrpc.Request{ID: id, Method: "tools/call", Params: params}); err != nil {
		return nil, err
	}
	for {
		msg, err := conn.receive(ctx)
		if err != nil {
			return nil, err
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if m.ID == id {
				return m, nil
			}
		case *jsonrpc.Request:
			if m.IsCall() { // a request to the client: this one cannot answer
				conn.deliver(ctx, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
					Message: "edge-mcp: the OpenAI-style API client cannot answer " + m.Method}})
			}
		}
	}
}

// errAPIConnClosed is returned by an apiConn used after Close.
var errAPIConnClosed = errors.New("edge-mcp: in-process connection closed")

// apiConn is an in-process connection between the API handler and one
// session: the session reads what the handler delivers and writes what the
// handler receives. PeerInfo gives the session the caller's identity.
type apiConn struct {
	peer any
	in   chan jsonrpc.Message // handler → session
	out  chan jsonrpc.Message // session → handler
	done chan struct{}
	once sync.Once
}

func newAPIConn(peer any) *apiConn {
	return &apiConn{peer: peer,
		in: make(chan jsonrpc.Message, 4), out: make(chan jsonrpc.Message, 16), done: make(chan struct{})}
}

// PeerInfo returns who opened the connection (see transports.Peer).
func (c *apiConn) PeerInfo() any { return c.peer }

// Read is the session's side: the next message the handler delivered.
func (c *apiConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.done:
		return nil, errAPIConnClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write is the session's side: a message for the handler.
func (c *apiConn) Write(ctx context.Context, m jsonrpc.Message) error {
	select {
	case c.out <- m:
		return nil
	case <-c.done:
		return errAPIConnClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the connection; it is idempotent.
func (c *apiConn) Close() error {
	if c.done != nil {
		c.once.Do(func() { close(c.done) })
	}
	return nil
}

// SessionID is empty: the session is known to no transport.
func (c *apiConn) SessionID() string { return "" }

// deliver is the handler's side: a message for the session.
func (c *apiConn) deliver(ctx context.Context, m jsonrpc.Message) error {
	select {
	case c.in <- m:
		return nil
	case <-c.done:
		return errAPIConnClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// receive is the handler's side: the next message the session wrote. What
// the session wrote before it closed is still received.
func (c *apiConn) receive(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.out:
		return m, nil
	case <-c.done:
		select {
		case m := <-c.out:
			return m, nil
		default:
			return nil, errors.New("edge-mcp: the session ended before the call was answered")
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// retryAfterValue formats a JSON-RPC retryAfter (seconds) for a header.
func retryAfterValue(raw json.RawMessage) string {
	n, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
	if err != nil || n < 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// unavailableReason is the reason in the data of an error that says why a
// tool cannot be called now (server_unavailable, pending_approval), or "".
func unavailableReason(data json.RawMessage) string {
	r, _ := wire.String(data, "reason")
	if r == "server_unavailable" || r == "pending_approval" {
		return r
	}
	return ""
}
