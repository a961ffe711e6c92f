package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
	"github.com/edge-mcp/edge-mcp/runtime/probe"
	"github.com/edge-mcp/edge-mcp/runtime/relay"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is the downstream session: one client's connection, its read
// loop, and the dispatch of each request to its stage (initialize, ping and
// logging/setLevel are answered here; lists and named calls go to the
// router, route.go). Writes to the client and the gateway's own requests to
// it (sampling, elicitation, roots, approval) go through here too.

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
	modern      atomic.Bool // a request followed revision 2026-07-28 (runtime/bridge)
	lastActive  atomic.Int64
	logLevel    atomic.Int32 // index into logLevels; -1: not set
	caps        struct{ sampling, elicitation, elicitationURL, roots bool }

	client    policy.Client // who is calling, as policy modules see it
	id        auth.Identity // who is calling, as authentication said
	transport string        // how: transportStreamable, "sse", "websocket" or "stdio"
	// fleet is the fleet's state of the session (runtime/fleet).
	fleet    fleet.SessionState
	vs       string                    // the virtual server it was opened on ("": /mcp)
	vlast    atomic.Pointer[catalogue] // the virtual server's view it was last told of
	bridging bridge.State              // 2026-07-28 state and the capabilities relayed upstream (runtime/bridge)

	out relay.Out // our requests to the client (runtime/relay)

	mu       sync.Mutex
	view     *sessionView            // policy-filtered tools list, when a module filters
	inflight map[jsonrpc.ID]inflight // downstream id → upstream call
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
	}
	s.logLevel.Store(-1)
	s.id, s.transport = anonymous, "stdio"
	if p, ok := transports.Peer(conn).(*peer); ok {
		s.id, s.transport, s.vs = p.id, p.transport, p.vs
		if p.adopted != nil {
			adopt(s, p.adopted)
		}
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
	s.inflight = nil // nothing is added once closed
	s.mu.Unlock()
	for _, f := range pending {
		if c := f.l.take(f.id); c != nil {
			if t := c.timer.Load(); t != nil {
				t.Stop()
			}
			c.end("client disconnected")
			f.l.notify("notifications/cancelled", relay.CancelParams(f.id, "client disconnected"))
		}
	}
	s.out.Close()
	s.cancel()
	s.conn.Close()
	s.g.removeSession(s)
	s.g.route.tasks.ForgetSession(taskSession{s})
}

// reply answers the client's request id.
func (s *session) reply(id jsonrpc.ID, result json.RawMessage) {
	s.write(s.ctx, &jsonrpc.Response{ID: id, Result: result})
}

func (s *session) replyError(id jsonrpc.ID, code int64, format string, args ...any) {
	s.write(s.ctx, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}})
}

func (s *session) write(ctx context.Context, msg jsonrpc.Message) {
	if s.fleet.Caught(msg) {
		return
	}
	if s.modern.Load() {
		msg = s.g.bridge.Result(&s.bridging, msg)
	}
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
	} else if id, ok := s.bridging.Subscription(method); ok {
		s.notify(id, method, bridge.Tag(nil, id))
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
	return s.out.Ask(ctx, clientOut{s}, rel, method, params)
}

// clientOut implements relay.Client for a session.
type clientOut struct{ s *session }

func (c clientOut) Send(ctx context.Context, rel jsonrpc.ID, id int64, method string, params json.RawMessage) error {
	wctx := c.s.ctx
	if rel.IsValid() {
		wctx = transports.WithRelated(wctx, rel)
	}
	return c.s.conn.Write(wctx, &jsonrpc.Request{ID: c.s.g.fleet.OutID(fleetSession{c.s}, id), Method: method, Params: params})
}

func (c clientOut) Cancelled(ctx context.Context, rel jsonrpc.ID, id int64) {
	reason := "cancelled by the server"
	if errors.Is(context.Cause(ctx), bridge.ErrCallCancelled) {
		// The client cancelled the call this request belongs to (a
		// bridged round, runtime/bridge) and no longer reads that
		// call's stream: tell it on the session's own.
		rel, reason = noID, "the request it belongs to ended"
	}
	c.s.notify(rel, "notifications/cancelled", relay.CancelParams(id, reason))
}

func (s *session) handleResponse(r *jsonrpc.Response) {
	if id, ok := s.g.fleet.OutIndex(fleetSession{s}, r); ok {
		s.answer(id, r)
	}
}

// answer hands r to our request number id, when it still waits.
func (s *session) answer(id int64, r *jsonrpc.Response) { s.out.Answer(id, r) }

func (s *session) handleNotification(n *jsonrpc.Request) {
	switch n.Method {
	case "notifications/initialized":
		s.initialized.Store(true)
	case "notifications/cancelled":
		id, ok := relay.CancelledID(n.Params)
		if !ok {
			return
		}
		reason, _ := wire.String(n.Params, "reason")
		if !s.cancelCall(id, reason) {
			s.g.fleet.ShareCancel(fleetSession{s}, n.Params) // in flight on another replica, perhaps
		}
	case "notifications/roots/list_changed":
		for _, l := range s.sessionLinks() {
			l.notify(n.Method, n.Params)
		}
	}
}

func (s *session) handleCall(req *jsonrpc.Request) {
	s.g.metrics.Request(req.Method)
	if version, ok := bridge.RequestVersion(req); ok && !s.g.bridge.Begin(bridgeSession{s}, req, version) {
		return
	}
	if s.fleet.Remote() && s.g.fleet.ToOwner(fleetSession{s}, req) {
		return
	}
	switch req.Method {
	case "initialize":
		s.initialize(req)
	case "ping":
		s.reply(req.ID, json.RawMessage(`{}`))
	case "tools/list":
		routing{s}.list(req, kindTools)
	case "prompts/list":
		routing{s}.list(req, kindPrompts)
	case "resources/list":
		routing{s}.list(req, kindResources)
	case "resources/templates/list":
		routing{s}.list(req, kindTemplates)
	case "tools/call":
		routing{s}.forwardNamed(req, kindTools)
	case "prompts/get":
		routing{s}.forwardNamed(req, kindPrompts)
	case "resources/read":
		routing{s}.forwardURI(req)
	case "resources/subscribe":
		routing{s}.subscribe(req)
	case "resources/unsubscribe":
		routing{s}.unsubscribe(req)
	case "completion/complete":
		routing{s}.complete(req)
	case "logging/setLevel":
		go s.setLevel(req)
	case intercept.MethodList, intercept.MethodInvoke:
		go s.interceptorMethod(req) // stage_intercept.go: a module may take its time
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update":
		s.g.route.tasks.Request(taskOps{s.g}, taskSession{s}, req)
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
	_, s.caps.elicitationURL, _ = wire.Field(p.Capabilities.Elicitation, "url")
	s.caps.roots = p.Capabilities.Roots != nil
	s.bridging.SetRelayed(req.Params, "capabilities")
	version := probe.Negotiate(p.ProtocolVersion)
	res := struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		ServerInfo      map[string]any `json:"serverInfo"`
		Instructions    string         `json:"instructions,omitempty"`
	}{
		ProtocolVersion: version,
		Capabilities:    bridgeOps{s.g}.Capabilities(version),
		ServerInfo:      virtualSide{s}.serverInfo(),
		Instructions:    virtualSide{s}.instructions(),
	}
	b, _ := json.Marshal(res)
	s.initialized.Store(true)
	s.reply(req.ID, b)
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
	s.g.fleet.ShareLevel(fleetSession{s}, level)
	var wg sync.WaitGroup
	for _, l := range s.sessionLinks() {
		if _, ok := l.caps["logging"]; !ok || l.v2026.Load() {
			continue // 2026-07-28: the level goes in each request's _meta (clientMeta)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(s.ctx, l.u.cfg.Timeout)
			defer cancel()
			if _, err := l.call(ctx, "logging/setLevel", req.Params); err != nil {
				l.u.log.Warn("passing logging/setLevel upstream", "err", err)
			} else {
				l.toldLevel.Store(int32(i) + 1)
			}
		}()
	}
	wg.Wait()
	s.reply(req.ID, json.RawMessage(`{}`))
}
