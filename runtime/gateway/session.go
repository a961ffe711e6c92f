package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/transports"
)

// noID is the zero id: "related to no request".
var noID jsonrpc.ID

// MCP error codes used by the gateway besides the JSON-RPC ones.
const (
	codeResourceNotFound = -32002
	codeRequestTimeout   = -32001
)

// session is one downstream client session.
type session struct {
	g      *Gateway
	conn   transports.Connection
	ctx    context.Context
	cancel context.CancelFunc

	initialized atomic.Bool
	lastActive  atomic.Int64
	logLevel    atomic.Int32 // index into logLevels; -1: not set
	caps        struct{ sampling, elicitation, roots bool }

	nextOut   atomic.Int64
	client    policy.Client // who is calling, as policy modules see it
	id        auth.Identity // who is calling, as authentication said
	transport string        // how: transportStreamable, "sse", "websocket" or "stdio"

	mu       sync.Mutex
	view     *sessionView                     // policy-filtered tools list, when a module filters
	inflight map[jsonrpc.ID]inflight          // downstream id → upstream call
	out      map[int64]chan *jsonrpc.Response // our requests to the client
	closed   bool
}

// inflight locates a forwarded call upstream.
type inflight struct {
	l  *link
	id int64
}

func newSession(g *Gateway, conn transports.Connection) *session {
	ctx, cancel := context.WithCancel(g.ctx)
	s := &session{
		g: g, conn: conn, ctx: ctx, cancel: cancel,
		inflight: make(map[jsonrpc.ID]inflight),
		out:      make(map[int64]chan *jsonrpc.Response),
	}
	s.logLevel.Store(-1)
	s.id, s.transport = anonymous, "stdio"
	if p, ok := transports.Peer(conn).(*peer); ok {
		s.id, s.transport = p.id, p.transport
	}
	s.client.ID = s.id.Name
	return s
}

// transportStreamable names the streamable HTTP transport in peers.
const transportStreamable = "streamable-http"

// run reads the client's messages until the session ends, then cancels what
// the client still has in flight upstream.
func (s *session) run() {
	defer s.close()
	for {
		msg, err := s.conn.Read(s.ctx)
		if err != nil {
			return
		}
		s.lastActive.Store(time.Now().UnixNano())
		switch m := msg.(type) {
		case *jsonrpc.Request:
			if m.IsCall() {
				s.handleCall(m)
			} else {
				s.handleNotification(m)
			}
		case *jsonrpc.Response:
			s.handleResponse(m)
		}
	}
}

func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	pending := s.inflight
	s.inflight = map[jsonrpc.ID]inflight{}
	out := s.out
	s.out = map[int64]chan *jsonrpc.Response{}
	s.mu.Unlock()
	for _, f := range pending {
		if c := f.l.take(f.id); c != nil {
			if t := c.timer.Load(); t != nil {
				t.Stop()
			}
			c.end(s.g, "client disconnected")
			f.l.notify("notifications/cancelled", cancelParams(f.id, "client disconnected"))
		}
	}
	for _, ch := range out {
		close(ch)
	}
	s.cancel()
	s.conn.Close()
	s.g.removeSession(s)
}

// reply answers the client's request id.
func (s *session) reply(id jsonrpc.ID, result json.RawMessage) {
	s.write(s.ctx, &jsonrpc.Response{ID: id, Result: result})
}

func (s *session) replyError(id jsonrpc.ID, code int64, format string, args ...any) {
	s.write(s.ctx, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}})
}

func (s *session) write(ctx context.Context, msg jsonrpc.Message) {
	if err := s.conn.Write(ctx, msg); err != nil {
		s.g.log.Debug("writing to client", "err", err)
	}
}

// notify sends a notification related to the client's request rel (noID:
// related to none).
func (s *session) notify(rel jsonrpc.ID, method string, params json.RawMessage) {
	ctx := s.ctx
	if rel.IsValid() {
		ctx = transports.WithRelated(ctx, rel)
	}
	s.write(ctx, &jsonrpc.Request{Method: method, Params: params})
}

func (s *session) listChanged(method string) {
	if s.initialized.Load() {
		s.notify(noID, method, nil)
	}
}

// logLevels in increasing severity, as MCP names them.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func levelIndex(level string) int {
	for i, l := range logLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// log forwards a notifications/message when the session's level admits it.
func (s *session) log(rel jsonrpc.ID, params json.RawMessage) {
	if min := int(s.logLevel.Load()); min >= 0 {
		level, _ := wire.String(params, "level")
		if levelIndex(level) < min {
			return
		}
	}
	s.notify(rel, "notifications/message", params)
}

// request sends a request to the client (on behalf of an upstream) and waits
// for its answer.
func (s *session) request(ctx context.Context, rel jsonrpc.ID, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	var capable bool
	switch method {
	case "sampling/createMessage":
		capable = s.caps.sampling
	case "elicitation/create":
		capable = s.caps.elicitation
	case "roots/list":
		capable = s.caps.roots
	default:
		capable = true
	}
	if !capable {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("edge-mcp: the downstream client does not support %s", method)}
	}
	id := s.nextOut.Add(1)
	ch := make(chan *jsonrpc.Response, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: the downstream client disconnected"}
	}
	s.out[id] = ch
	s.mu.Unlock()
	wctx := s.ctx
	if rel.IsValid() {
		wctx = transports.WithRelated(wctx, rel)
	}
	if err := s.conn.Write(wctx, &jsonrpc.Request{ID: intID(id), Method: method, Params: params}); err != nil {
		s.mu.Lock()
		delete(s.out, id)
		s.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: forwarding to the client: " + err.Error()}
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: the downstream client disconnected"}
		}
		if resp.Error != nil {
			if e, ok := resp.Error.(*jsonrpc.Error); ok {
				return nil, e
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: resp.Error.Error()}
		}
		return resp.Result, nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.out, id)
		s.mu.Unlock()
		s.notify(rel, "notifications/cancelled", cancelParams(id, "cancelled by the server"))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: request cancelled"}
	}
}

func (s *session) handleResponse(r *jsonrpc.Response) {
	id, ok := idInt(r.ID)
	if !ok {
		return
	}
	s.mu.Lock()
	ch := s.out[id]
	delete(s.out, id)
	s.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

func (s *session) handleNotification(n *jsonrpc.Request) {
	switch n.Method {
	case "notifications/initialized":
		s.initialized.Store(true)
	case "notifications/cancelled":
		id, ok := requestID(n.Params)
		if !ok {
			return
		}
		reason, _ := wire.String(n.Params, "reason")
		s.cancelCall(id, reason)
	case "notifications/roots/list_changed":
		for _, u := range s.g.upstreams().list {
			if l := u.current(); l != nil {
				l.notify(n.Method, n.Params)
			}
		}
	}
}

// cancelCall forwards a client's cancellation to the upstream holding the
// request. The request gets no answer, as the protocol prescribes.
func (s *session) cancelCall(id jsonrpc.ID, reason string) {
	s.mu.Lock()
	f, ok := s.inflight[id]
	delete(s.inflight, id)
	s.mu.Unlock()
	if !ok {
		return
	}
	if c := f.l.take(f.id); c != nil {
		if t := c.timer.Load(); t != nil {
			t.Stop()
		}
		if reason == "" {
			reason = "cancelled by the client"
		}
		c.end(s.g, reason)
		f.l.notify("notifications/cancelled", cancelParams(f.id, reason))
	}
}

// finish delivers an upstream's answer to a forwarded call.
func (s *session) finish(c *call, resp *jsonrpc.Response) {
	s.mu.Lock()
	delete(s.inflight, c.origID)
	s.mu.Unlock()
	out := &jsonrpc.Response{ID: c.origID, Result: resp.Result, Error: resp.Error}
	if c.tool != "" {
		outcome, msg := metricsOK, ""
		if e, ok := resp.Error.(*jsonrpc.Error); ok {
			outcome, msg = metricsError, e.Message
			if transports.IsLocal(resp) || e.Code == jsonrpc.CodeInternalError && strings.HasPrefix(e.Message, "edge-mcp: ") {
				outcome = metricsUnavailable
			}
		} else if resp.Error != nil {
			outcome, msg = metricsError, resp.Error.Error()
		} else if v, ok, _ := wire.Field(resp.Result, "isError"); ok && string(v) == "true" {
			outcome = metricsError
		}
		s.g.recordToolCall(s, c.server, c.tool, outcome, c.start, c.args, msg)
	}
	switch {
	case c.pol != nil && resp.Error == nil:
		// Result policies may take a while: off the upstream's read loop.
		go func() {
			defer c.end(s.g, "")
			s.write(s.ctx, s.filterResult(c, out))
		}()
	default:
		c.end(s.g, "")
		s.write(s.ctx, out)
	}
	if c.tool != "" && s.g.events.wanted(slog.LevelInfo) {
		ev := Event{Type: EventToolExecuted, Server: c.server, Tool: c.tool, Success: true,
			Duration: time.Since(c.start), ContentLength: len(resp.Result)}
		if e, ok := resp.Error.(*jsonrpc.Error); ok {
			ev.Success, ev.ErrorMessage = false, e.Message
		} else if resp.Error != nil {
			ev.Success, ev.ErrorMessage = false, resp.Error.Error()
		} else if v, ok, _ := wire.Field(resp.Result, "isError"); ok && string(v) == "true" {
			ev.Success, ev.ErrorMessage = false, "the tool reported an error (isError)"
		}
		s.g.events.emit(slog.LevelInfo, ev)
	}
}

// requestID decodes params.requestId of a notifications/cancelled: a JSON
// string or integer.
func requestID(params json.RawMessage) (jsonrpc.ID, bool) {
	raw, ok, _ := wire.Field(params, "requestId")
	if !ok {
		return jsonrpc.ID{}, false
	}
	if s, ok := wire.Unquote(raw); ok {
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	return intID(n), true
}

// supportedVersion negotiates the protocol version with a client.
func supportedVersion(requested string) string {
	if knownVersion(requested) {
		return requested
	}
	return knownProtocolVersions[len(knownProtocolVersions)-1]
}

func (s *session) handleCall(req *jsonrpc.Request) {
	s.g.metrics.Request(req.Method)
	switch req.Method {
	case "initialize":
		s.initialize(req)
	case "ping":
		s.reply(req.ID, json.RawMessage(`{}`))
	case "tools/list":
		s.list(req, kindTools)
	case "prompts/list":
		s.list(req, kindPrompts)
	case "resources/list":
		s.list(req, kindResources)
	case "resources/templates/list":
		s.list(req, kindTemplates)
	case "tools/call":
		s.forwardNamed(req, kindTools)
	case "prompts/get":
		s.forwardNamed(req, kindPrompts)
	case "resources/read":
		s.forwardURI(req)
	case "resources/subscribe":
		s.subscribe(req)
	case "resources/unsubscribe":
		s.unsubscribe(req)
	case "completion/complete":
		s.complete(req)
	case "logging/setLevel":
		go s.setLevel(req)
	default:
		s.replyError(req.ID, jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
	}
}

func (s *session) initialize(req *jsonrpc.Request) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
		ClientInfo      struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
		Capabilities struct {
			Sampling    json.RawMessage `json:"sampling"`
			Elicitation json.RawMessage `json:"elicitation"`
			Roots       json.RawMessage `json:"roots"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "invalid initialize params: %v", err)
		return
	}
	s.client.Name = p.ClientInfo.Name
	s.caps.sampling = p.Capabilities.Sampling != nil
	s.caps.elicitation = p.Capabilities.Elicitation != nil
	s.caps.roots = p.Capabilities.Roots != nil
	version := supportedVersion(p.ProtocolVersion)
	var instructions string
	for _, u := range s.g.upstreams().list {
		if l := u.current(); l != nil && l.instructions != "" {
			instructions += u.name + ": " + l.instructions + "\n"
		}
	}
	res := struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		ServerInfo      map[string]any `json:"serverInfo"`
		Instructions    string         `json:"instructions,omitempty"`
	}{
		ProtocolVersion: version,
		Capabilities: map[string]any{
			"tools":       map[string]any{"listChanged": true},
			"prompts":     map[string]any{"listChanged": true},
			"resources":   map[string]any{"listChanged": true, "subscribe": true},
			"logging":     map[string]any{},
			"completions": map[string]any{},
		},
		ServerInfo:   map[string]any{"name": "edge-mcp", "title": "edge-mcp gateway", "version": Version},
		Instructions: instructions,
	}
	b, _ := json.Marshal(res)
	s.initialized.Store(true)
	s.reply(req.ID, b)
}

func (s *session) list(req *jsonrpc.Request, k listKind) {
	cursor, _ := wire.String(req.Params, "cursor")
	cat := s.catalogue()
	page, err := cat.page(k, cursor, s.g.opts.PageSize)
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: %v", req.Method, err)
		return
	}
	s.reply(req.ID, page)
}

// forwardNamed routes tools/call and prompts/get by params.name.
func (s *session) forwardNamed(req *jsonrpc.Request, k listKind) {
	name, ok := wire.String(req.Params, "name")
	if !ok {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: params.name must be a string", req.Method)
		return
	}
	it := s.catalogue().index[k][name]
	if it == nil {
		what := "tool"
		if k == kindPrompts {
			what = "prompt"
		}
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "unknown %s %q", what, name)
		return
	}
	if k == kindTools {
		s.toolCall(req, it)
		return
	}
	var pg *policyGen
	if cur := s.g.pol.current(); cur != nil && len(cur.chain.Match(it.up.name, it.name)) > 0 {
		pg = s.g.pol.acquire()
	}
	params := req.Params
	if it.name != it.exposed {
		var err error
		if params, err = wire.SetField(params, "name", wire.AppendString(nil, it.name)); err != nil {
			s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: %v", req.Method, err)
			return
		}
	}
	info := forwardInfo{kind: k, upName: it.name}
	if pg != nil {
		if resultPolicy(pg.chain, k, it.up.name, it.name) {
			info.pol = pg // released when the call ends
			info.args, _, _ = wire.Field(params, "arguments")
		} else {
			s.g.pol.release(pg)
		}
	}
	s.forward(req, it.up, params, info)
}

// forwardURI routes resources/read by params.uri.
func (s *session) forwardURI(req *jsonrpc.Request) {
	uri, ok := wire.String(req.Params, "uri")
	if !ok {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: params.uri must be a string", req.Method)
		return
	}
	u := s.catalogue().resource(uri)
	if u == nil {
		s.replyError(req.ID, codeResourceNotFound, "resource not found: %s", uri)
		return
	}
	info := forwardInfo{kind: kindResources, upName: uri}
	if cur := s.g.pol.current(); cur != nil && resultPolicy(cur.chain, kindResources, u.name, uri) {
		if pg := s.g.pol.acquire(); pg != nil {
			if resultPolicy(pg.chain, kindResources, u.name, uri) {
				info.pol = pg // released when the call ends
			} else {
				s.g.pol.release(pg)
			}
		}
	}
	s.forward(req, u, req.Params, info)
}

func (s *session) subscribe(req *jsonrpc.Request) {
	uri, ok := wire.String(req.Params, "uri")
	if !ok {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: params.uri must be a string", req.Method)
		return
	}
	u := s.catalogue().resource(uri)
	if u == nil {
		s.replyError(req.ID, codeResourceNotFound, "resource not found: %s", uri)
		return
	}
	if !s.g.subscribe(s, uri) {
		s.reply(req.ID, json.RawMessage(`{}`)) // the upstream already sends updates for uri
		return
	}
	s.forward(req, u, req.Params, forwardInfo{})
}

func (s *session) unsubscribe(req *jsonrpc.Request) {
	uri, ok := wire.String(req.Params, "uri")
	if !ok {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: params.uri must be a string", req.Method)
		return
	}
	u := s.catalogue().resource(uri)
	if u == nil || !s.g.unsubscribe(s, uri) {
		s.reply(req.ID, json.RawMessage(`{}`))
		return
	}
	s.forward(req, u, req.Params, forwardInfo{})
}

// complete routes completion/complete by the prompt or resource template it
// completes for.
func (s *session) complete(req *jsonrpc.Request) {
	ref, _, _ := wire.Field(req.Params, "ref")
	typ, _ := wire.String(ref, "type")
	cat := s.catalogue()
	switch typ {
	case "ref/prompt":
		name, _ := wire.String(ref, "name")
		it := cat.index[kindPrompts][name]
		if it == nil {
			s.replyError(req.ID, jsonrpc.CodeInvalidParams, "unknown prompt %q", name)
			return
		}
		params := req.Params
		if it.name != it.exposed {
			newRef, err := wire.SetField(ref, "name", wire.AppendString(nil, it.name))
			if err == nil {
				params, err = wire.SetField(params, "ref", newRef)
			}
			if err != nil {
				s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: %v", req.Method, err)
				return
			}
		}
		s.forward(req, it.up, params, forwardInfo{})
	case "ref/resource":
		uri, _ := wire.String(ref, "uri")
		u := (*upstream)(nil)
		if it := cat.index[kindTemplates][uri]; it != nil {
			u = it.up
		} else {
			u = cat.resource(uri)
		}
		if u == nil {
			s.replyError(req.ID, codeResourceNotFound, "resource not found: %s", uri)
			return
		}
		s.forward(req, u, req.Params, forwardInfo{})
	default:
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "completion/complete: unknown ref type %q", typ)
	}
}

// setLevel records the session's level and passes it to every upstream that
// logs. Log messages are filtered per session, so one client's level does
// not silence another's.
func (s *session) setLevel(req *jsonrpc.Request) {
	level, _ := wire.String(req.Params, "level")
	i := levelIndex(level)
	if i < 0 {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "logging/setLevel: unknown level %q", level)
		return
	}
	s.logLevel.Store(int32(i))
	var wg sync.WaitGroup
	for _, u := range s.g.upstreams().list {
		l := u.current()
		if l == nil {
			continue
		}
		if _, ok := l.caps["logging"]; !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(s.ctx, u.cfg.Timeout)
			defer cancel()
			if _, err := l.call(ctx, "logging/setLevel", req.Params); err != nil {
				u.log.Warn("passing logging/setLevel upstream", "err", err)
			}
		}()
	}
	wg.Wait()
	s.reply(req.ID, json.RawMessage(`{}`))
}

// forward sends the client's request to upstream u. The answer comes back
// through the link's read loop (link.finish → session.finish).
// forwardInfo is what a forwarded call carries besides its params: the
// exposed tool name (for events) and, when result policies apply, the chain
// and what they need to see.
type forwardInfo struct {
	tool   string
	kind   listKind
	upName string          // upstream tool or prompt name, or resource URI
	args   json.RawMessage // the call's arguments, for result policies
	pol    *policyGen      // non-nil when the result passes through policies; the call holds a reference
	// For tools/call: the tool rule's timeout (0: the server's), the
	// upstream concurrency slot to give back, when the chain started, and
	// the trace span.
	timeout time.Duration
	slot    func()
	start   time.Time
	span    trace.Span
}

// abandon releases what a call that never went upstream holds.
func (info *forwardInfo) abandon(g *Gateway) {
	g.pol.release(info.pol)
	if info.slot != nil {
		info.slot()
	}
	if info.span != nil {
		info.span.End()
	}
}

func (s *session) forward(req *jsonrpc.Request, u *upstream, params json.RawMessage, info forwardInfo) {
	l := u.current()
	if l == nil {
		info.abandon(s.g)
		if info.tool != "" {
			s.g.recordToolCall(s, u.name, info.tool, metricsUnavailable, info.start, info.args, errNotConnected.Error())
		}
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: server %q is %s", u.name, errNotConnected)
		return
	}
	start := info.start
	if start.IsZero() {
		start = time.Now()
	}
	c := &call{method: req.Method, start: start, sess: s, origID: req.ID, tool: info.tool, server: u.name,
		kind: info.kind, upName: info.upName, args: info.args, pol: info.pol, slot: info.slot, span: info.span}
	id, ok := l.register(c)
	if !ok {
		info.abandon(s.g)
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: server %q is %s", u.name, errNotConnected)
		return
	}
	params, err := s.rewriteMeta(params, c, id)
	if err != nil {
		if l.take(id) != nil {
			c.end(s.g, "")
		}
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: %v", req.Method, err)
		return
	}
	s.mu.Lock()
	if _, dup := s.inflight[req.ID]; dup || s.closed {
		s.mu.Unlock()
		if l.take(id) != nil {
			c.end(s.g, "")
		}
		s.replyError(req.ID, jsonrpc.CodeInvalidRequest, "request id %v is already in flight", req.ID.Raw())
		return
	}
	s.inflight[req.ID] = inflight{l, id}
	s.mu.Unlock()
	timeout := u.cfg.Timeout
	if info.timeout > 0 {
		timeout = info.timeout
	}
	c.timer.Store(time.AfterFunc(timeout, func() {
		if l.take(id) == nil {
			return
		}
		if c.tool != "" {
			s.g.recordToolCall(s, u.name, c.tool, metricsTimeout, c.start, c.args, "timeout")
		}
		c.end(s.g, "timeout")
		s.mu.Lock()
		delete(s.inflight, req.ID)
		s.mu.Unlock()
		l.notify("notifications/cancelled", cancelParams(id, "timeout"))
		s.replyError(req.ID, codeRequestTimeout, "edge-mcp: server %q did not answer %s within %s", u.name, req.Method, timeout)
	}))
	s.g.senders.submit(func() {
		err := l.conn.Write(l.ctx, &jsonrpc.Request{ID: intID(id), Method: req.Method, Params: params})
		if err != nil {
			if c := l.take(id); c != nil {
				l.finish(c, nil, fmt.Errorf("sending %s to server %q: %v", req.Method, u.name, err))
			}
			l.suspect()
		}
	})
}

// rewriteMeta replaces the client's progress token with the upstream request
// id (so tokens of different clients cannot collide upstream) and drops the
// per-connection _meta keys. Params without _meta pass untouched.
func (s *session) rewriteMeta(params json.RawMessage, c *call, id int64) (json.RawMessage, error) {
	meta, ok, err := wire.Field(params, "_meta")
	if err != nil || !ok {
		return params, err
	}
	changed := false
	if tok, ok, _ := wire.Field(meta, "progressToken"); ok {
		c.progressToken = append(json.RawMessage(nil), tok...)
		if meta, err = wire.SetField(meta, "progressToken", strconv.AppendInt(nil, id, 10)); err != nil {
			return nil, err
		}
		changed = true
	}
	for _, k := range connectionMetaKeys {
		if _, ok, _ := wire.Field(meta, k); ok {
			if meta, err = wire.DeleteField(meta, k); err != nil {
				return nil, err
			}
			changed = true
		}
	}
	if !changed {
		return params, nil
	}
	return wire.SetField(params, "_meta", meta)
}
