package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
	"github.com/edge-mcp/edge-mcp/runtime/relay"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file sends a routed request upstream: the request id is remapped to
// one of the upstream link's own, the client's progress token replaced, the
// per-connection _meta keys dropped, and the call registered in flight with
// its timeout. Everything else in params passes through as raw JSON.

// cancelCall forwards a client's cancellation to the upstream holding the
// request. The request gets no answer, as the protocol prescribes. It
// reports whether the request was in flight here.
func (s *session) cancelCall(id jsonrpc.ID, reason string) bool {
	s.mu.Lock()
	f, ok := s.inflight[id]
	delete(s.inflight, id)
	s.mu.Unlock()
	s.g.bridge.CancelRound(bridgeSession{s}, id) // a call whose client is being asked (runtime/bridge)
	if !ok {
		return false
	}
	if c := f.l.take(f.id); c != nil {
		if t := c.timer.Load(); t != nil {
			t.Stop()
		}
		if reason == "" {
			reason = "cancelled by the client"
		}
		c.end(reason)
		f.l.notify("notifications/cancelled", relay.CancelParams(f.id, reason))
	}
	return true
}

// forward sends the client's request to upstream u. The answer comes back
// through the link's read loop (link.finish → session.finish).
// forwardInfo is what a forwarded call carries besides its params: the
// exposed tool name (for events) and, when result policies apply, the chain
// and what they need to see.
type forwardInfo struct {
	tool   string
	kind   listKind
	upName string           // upstream tool or prompt name, or resource URI
	args   json.RawMessage  // the call's arguments, for result policies
	pg     *policyset.Gen   // non-nil when the result passes through policies (held by the caller's scope)
	ic     *intercept.Chain // non-nil when the result passes through the interceptor chain
	// waited is set when the caller waits for the call to end (it holds a
	// scope): forward then returns a channel closed at the end.
	waited bool
	// For tools/call: the tool rule's timeout (0: the server's), when the
	// chain started, and the trace span.
	timeout time.Duration
	start   time.Time
	span    trace.Span
}

// abandon ends what a call that never went upstream started.
func (info *forwardInfo) abandon() {
	if info.span != nil {
		info.span.End()
	}
}

// It returns a channel closed when the call ends when info.waited, else nil;
// nil also when the call never went upstream (it has been answered).
func (s *session) forward(req *jsonrpc.Request, u *upstream, params json.RawMessage, info forwardInfo) <-chan struct{} {
	if info.tool == "" && u.perIdentity() {
		if err := s.g.oauth.UserAuthorization(s.ctx, u.name, s.id.Name); err != nil {
			s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: %v", err)
			info.abandon()
			return nil
		}
	}
	l, err := u.linkFor(s)
	if err != nil {
		info.abandon()
		if info.tool != "" {
			s.recordToolCall(u.name, info.tool, metricsUnavailable, info.start, info.args, err.Error())
		}
		if errors.Is(err, errNotConnected) && !u.perClient() {
			s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: server %q is %s", u.name, errNotConnected)
		} else {
			s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: %v", err)
		}
		return nil
	}
	syncLevel(s, u, l)
	start := info.start
	if start.IsZero() {
		start = time.Now()
	}
	c := &call{method: req.Method, start: start, sess: s, origID: req.ID, tool: info.tool, server: u.name,
		kind: info.kind, upName: info.upName, args: info.args, pg: info.pg, ic: info.ic, span: info.span, size: len(req.Params)}
	if info.waited {
		c.done = make(chan struct{})
	}
	id, ok := l.register(c)
	if !ok {
		info.abandon()
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: server %q is %s", u.name, errNotConnected)
		return nil
	}
	params, err = s.rewriteMeta(params, c, id)
	if err != nil {
		if l.take(id) != nil {
			c.end("")
		}
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: %v", req.Method, err)
		return c.done
	}
	s.mu.Lock()
	if _, dup := s.inflight[req.ID]; dup || s.closed {
		s.mu.Unlock()
		if l.take(id) != nil {
			c.end("")
		}
		s.replyError(req.ID, jsonrpc.CodeInvalidRequest, "request id %v is already in flight", req.ID.Raw())
		return c.done
	}
	s.inflight[req.ID] = inflight{l, id}
	s.mu.Unlock()
	timeout := u.cfg.Timeout
	if info.timeout > 0 {
		timeout = info.timeout
	}
	if l.v2026.Load() && !s.modern.Load() && bridge.MultiRound(req.Method) {
		// What an input_required answer needs to send the call again (runtime/bridge).
		c.again = &bridge.Again{Req: req, Params: params, Schema: s.toolSchema(l, u, &info), Timeout: timeout}
	}
	s.armTimer(l, c, id, timeout)
	schema, cm := s.toolSchema(l, u, &info), s.clientMeta()
	s.g.senders.submit(func() {
		err := l.writeAndRead(l.upstreamRequest(req, id, params, schema, cm))
		if err != nil {
			if c := l.take(id); c != nil {
				l.finish(c, nil, fmt.Errorf("sending %s to server %q: %v", req.Method, u.name, err))
			}
			l.sendFailed(req.Method, err)
		}
	})
	return c.done
}

// writeAndRead sends msg for a forwarding worker, which waits for nothing
// else: over streamable HTTP it also reads the answer's event stream (one
// goroutine less per call), and an answer that comes first on it is
// finished by the worker itself (one hand-off less); other messages, and
// an answer after them, come through the read loop, in order.
// The POST is not tied to l.ctx (a context.AfterFunc per call): whatever
// ends l.ctx closes the link, and closing the connection ends its POSTs.
func (l *link) writeAndRead(msg *jsonrpc.Request) error {
	if sr, ok := l.conn.(transports.StreamReader); ok {
		return sr.WriteAndRead(l.postCtx, msg, l.onAnswer)
	}
	return l.conn.Write(l.ctx, msg)
}

// rewriteMeta replaces the client's progress token with the upstream request
// id (so tokens of different clients cannot collide upstream) and drops the
// per-connection _meta keys. Params without _meta pass untouched.
func (s *session) rewriteMeta(params json.RawMessage, c *call, id int64) (json.RawMessage, error) {
	meta, ok, err := wire.Field(params, "_meta")
	if err != nil || !ok {
		return params, err
	}
	var set []wire.Member
	if tok, ok, _ := wire.Field(meta, "progressToken"); ok {
		c.progressToken = append(json.RawMessage(nil), tok...)
		set = []wire.Member{{Key: "progressToken", Value: strconv.AppendInt(nil, id, 10)}}
	}
	changed := set != nil
	for _, k := range connectionMetaKeys {
		if !changed {
			_, changed, _ = wire.Field(meta, k)
		}
	}
	if !changed {
		return params, nil
	}
	if meta, err = wire.EditFields(meta, connectionMetaKeys, set); err != nil {
		return nil, err
	}
	return wire.SetField(params, "_meta", meta)
}

// upstreamRequest is the request sent upstream for the client's req, with
// the link's request id and params. A 2026-07-28 link also carries the
// Mcp-Param-* headers req arrived with (transports.ParamHeaders in Extra,
// turned into headers by the streamable HTTP client), unchanged; a 2025
// link drops them: they mean nothing before 2026-07-28. A request without
// them costs nothing more.
//
// When the client sent none, a tools/call of a tool whose inputSchema maps
// arguments to headers (x-mcp-header) gets them derived from its arguments
// (runtime/bridge); schema is that tool's inputSchema (nil: unknown).
// cm is what a 2026-07-28 link says of the client in _meta
// (session.clientMeta).
func (l *link) upstreamRequest(req *jsonrpc.Request, id int64, params, schema json.RawMessage, cm clientMeta) *jsonrpc.Request {
	up := &jsonrpc.Request{ID: intID(id), Method: req.Method, Params: l.stampFor(params, cm)}
	if !l.v2026.Load() {
		return up
	}
	if ph, ok := req.Extra.(transports.ParamHeaders); ok && len(ph) > 0 {
		up.Extra = ph
	} else if schema != nil && req.Method == "tools/call" {
		if ph := bridge.DerivedParamHeaders(schema, params); ph != nil {
			up.Extra = ph
		}
	}
	return up
}

// toolSchema is the inputSchema of the tool a forwarded tools/call names,
// when the catalogue holds it on upstream u under that upstream name; nil
// otherwise, for other methods and links below 2026-07-28, and for a
// 2026-07-28 client: its headers are its own (it sends them from the same
// schema), so one it left out stays out and the upstream refuses the call
// with HeaderMismatch, as the revision requires.
func (s *session) toolSchema(l *link, u *upstream, info *forwardInfo) json.RawMessage {
	if info.kind != kindTools || info.tool == "" || !l.v2026.Load() || s.modern.Load() {
		return nil
	}
	cat := s.g.route.catalogue()
	if cat == nil {
		return nil
	}
	it := cat.Find(kindTools, info.tool)
	if it == nil || it.Up != u || it.Name != info.upName {
		return nil
	}
	sch, ok, err := wire.Field(it.Raw, "inputSchema")
	if err != nil || !ok {
		return nil
	}
	return sch
}

// armTimer ends call c, sent upstream as id, when it outlives timeout:
// the upstream is told it is cancelled and the client gets a timeout
// error. A call sent again in a bridged round (runtime/bridge) is armed
// anew for its new id.
func (s *session) armTimer(l *link, c *call, id int64, timeout time.Duration) {
	c.timer.Store(time.AfterFunc(timeout, func() {
		if l.take(id) == nil {
			return
		}
		if c.tool != "" {
			s.recordToolCall(c.server, c.tool, metricsTimeout, c.start, c.args, "timeout")
		}
		c.end("timeout")
		s.mu.Lock()
		delete(s.inflight, c.origID)
		s.mu.Unlock()
		l.notify("notifications/cancelled", relay.CancelParams(id, "timeout"))
		s.replyError(c.origID, codeRequestTimeout, "edge-mcp: server %q did not answer %s within %s", c.server, c.method, timeout)
	}))
}
