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
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
	"github.com/edge-mcp/edge-mcp/runtime/relay"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is one live connection to an upstream (a link): the calls in
// flight on it, by upstream id; its read loop; health pings; the MCP
// handshake and the listing of what the server offers.

// call is one request edge-mcp sent upstream and awaits an answer to.
type call struct {
	method string
	start  time.Time

	// For the gateway's own requests.
	reply chan *jsonrpc.Response

	// For requests forwarded from a downstream session.
	sess          *session
	origID        jsonrpc.ID
	progressToken json.RawMessage  // the client's token, when the call carries one
	tool          string           // exposed tool name, for tools/call
	server        string           // the upstream's name, for events
	kind          listKind         // what the call reads: a tool, prompt or resource
	upName        string           // upstream tool or prompt name, or resource URI
	args          json.RawMessage  // the call's arguments, for result policies
	size          int              // bytes of the client's params, for the client-memory budget (bridge.go)
	pg            *policyset.Gen   // non-nil when the result passes through policies (held by the caller's scope)
	ic            *intercept.Chain // non-nil when the result passes through the interceptor chain
	done          chan struct{}    // closed when the call ends, when its caller waits for that
	span          trace.Span       // the call's trace span, ended with it
	timer         atomic.Pointer[time.Timer]
	// bridged is set once the call is bridged to a 2026-07-28 client's
	// input_required rounds (bridge.go): only such calls look the bridge
	// up when they end, so no other call takes its lock.
	bridged atomic.Bool
	// again is set for a 2025 client's call on a 2026-07-28 link, which an
	// input_required result sends again (runtime/bridge's rounds.go).
	again *bridge.Again
}

// link is one live connection to an upstream, with its own id space and
// table of calls in flight.
type link struct {
	u      *upstream
	conn   transports.Connection
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the read loop ends
	// postCtx is ctx without its cancellation, for forwarded writes
	// (writeAndRead); onAnswer is l.answered, made once.
	postCtx  context.Context
	onAnswer func(*jsonrpc.Response)

	protocolVersion string
	v2026           atomic.Bool                // requests carry the _meta keys of 2026-07-28 (probe.go)
	caps            map[string]json.RawMessage // server capabilities
	instructions    string

	nextID atomic.Int64

	// owner is the downstream session a per-client link belongs to (nil:
	// the upstream's shared link); used is when it last carried a call, in
	// Unix nanoseconds.
	owner *session
	used  atomic.Int64
	// toldLevel is 1 + the index of the log level last passed to the
	// upstream with logging/setLevel; 0: none.
	toldLevel atomic.Int32

	probeNow chan struct{} // asks the health loop for a ping at once

	// serverCalls are the requests the upstream sent us being served
	// (runtime/relay), cancelled by its notifications/cancelled.
	serverCalls relay.Served

	mu      sync.Mutex
	pending map[int64]*call
	err     error
	closed  bool

	resListens bridge.Listens // 2026-07-28: subscriptions/listen per subscribed URI (resourcelisten.go)
}

func newLink(ctx context.Context, u *upstream, conn transports.Connection, owner *session) *link {
	lctx, cancel := context.WithCancel(ctx)
	l := &link{
		u: u, conn: conn, ctx: lctx, cancel: cancel, done: make(chan struct{}), owner: owner,
		postCtx:  context.WithoutCancel(lctx),
		pending:  make(map[int64]*call),
		probeNow: make(chan struct{}, 1),
	}
	l.onAnswer = l.answered
	go l.readLoop()
	return l
}

// suspect asks the health loop to check the server now: a call just failed
// in a way that may mean the server is gone.
func (l *link) suspect() {
	select {
	case l.probeNow <- struct{}{}:
	default:
	}
}

// sendFailed is told that sending a request failed in the transport (the
// server refused the connection, or it broke): the link is marked down at
// once, so the next calls wait for a reconnection (heal.go) rather than
// fail one by one until a health check notices.
func (l *link) sendFailed(method string, err error) {
	if errors.Is(err, context.Canceled) && l.ctx.Err() != nil {
		return // the link is closing anyway
	}
	l.fail(fmt.Errorf("sending %s: %w: %w", method, errUnreachable, err))
}

// pinger implements reconnect.Pinger for a link: its health checks.
type pinger struct{ *link }

func (p pinger) Ping(ctx context.Context) error {
	_, err := p.call(ctx, p.pingMethod(), nil)
	return err
}
func (p pinger) Fail(err error) { p.fail(err) }

// fail records err as the reason the link ended and closes the connection,
// which ends the read loop.
func (l *link) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
	l.conn.Close()
}

func (l *link) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		return errors.New("upstream connection closed")
	}
	return l.err
}

// close ends the link: the connection is closed and every call in flight is
// answered with an error at once.
func (l *link) close(reason error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	if l.err == nil {
		l.err = reason
	}
	pending := l.pending
	l.pending = map[int64]*call{}
	l.mu.Unlock()
	l.cancel()
	l.conn.Close()
	for _, c := range pending {
		l.finish(c, nil, fmt.Errorf("server %q disconnected: %v", l.u.name, reason))
	}
}

// register assigns an upstream id to c and records it as in flight.
func (l *link) register(c *call) (int64, bool) {
	id := l.nextID.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, false
	}
	l.pending[id] = c
	return id, true
}

// take removes and returns the call with upstream id, if still in flight.
func (l *link) take(id int64) *call {
	l.mu.Lock()
	c := l.pending[id]
	delete(l.pending, id)
	l.mu.Unlock()
	return c
}

func (l *link) peek(id int64) *call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending[id]
}

// finish delivers the one answer of call c: resp, or err when the call
// failed inside the gateway.
func (l *link) finish(c *call, resp *jsonrpc.Response, err error) {
	if t := c.timer.Load(); t != nil {
		t.Stop()
	}
	if resp == nil {
		resp = &jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: " + err.Error()}}
	}
	if c.reply != nil {
		c.reply <- resp
		return
	}
	if l.inputRequired(c, resp) {
		return // the client is asked, the call sent again (runtime/bridge)
	}
	l.markInputRequired(c, resp)
	c.sess.finish(c, resp)
}

// call sends a request of the gateway's own and waits for its answer.
func (l *link) call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	c := &call{method: method, start: time.Now(), reply: make(chan *jsonrpc.Response, 1)}
	id, ok := l.register(c)
	if !ok {
		return nil, l.failure()
	}
	if err := l.conn.Write(ctx, &jsonrpc.Request{ID: intID(id), Method: method, Params: l.stamp(params)}); err != nil {
		l.take(id)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sending %s: %w", method, ctx.Err())
		}
		return nil, fmt.Errorf("sending %s: %w", method, unreachable(err))
	}
	var resp *jsonrpc.Response
	select {
	case resp = <-c.reply:
	case <-l.done:
		// The read loop ended: no answer comes unless it was taken already.
		if l.take(id) != nil {
			return nil, fmt.Errorf("%s: %w", method, unreachable(l.failure()))
		}
		resp = <-c.reply
	case <-ctx.Done():
		if l.take(id) != nil {
			l.notify("notifications/cancelled", relay.CancelParams(id, "timeout"))
		}
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
	if resp.Error != nil {
		if transports.IsLocal(resp) {
			return nil, fmt.Errorf("%s: %w", method, unreachable(resp.Error))
		}
		return nil, resp.Error
	}
	return resp.Result, nil
}

// notify sends a notification upstream; failures are logged, not returned:
// a broken connection is noticed by the read loop.
func (l *link) notify(method string, params json.RawMessage) {
	if err := l.conn.Write(l.ctx, &jsonrpc.Request{Method: method, Params: params}); err != nil {
		l.u.log.Debug("sending notification upstream", "method", method, "err", err)
	}
}

func intID(id int64) jsonrpc.ID {
	v, _ := jsonrpc.MakeID(float64(id))
	return v
}

func idInt(id jsonrpc.ID) (int64, bool) {
	v, ok := id.Raw().(int64)
	return v, ok
}

// discover reads the lists named by kinds, following nextCursor to the end.
// A list the server does not offer (no capability, or METHOD_NOT_FOUND) is
// empty, not an error.
func (l *link) discover(ctx context.Context, kinds []listKind) (upstreamLists, error) {
	var out upstreamLists
	for _, k := range kinds {
		if _, ok := l.caps[kindCapability[k]]; !ok {
			continue
		}
		var hint bridge.ListHint
		cursor := ""
		for page := 0; ; page++ {
			params := json.RawMessage(`{}`)
			if cursor != "" {
				params = json.RawMessage(`{"cursor":` + string(wire.AppendString(nil, cursor)) + `}`)
			}
			res, err := l.call(ctx, listKinds[k].Method, params)
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeMethodNotFound {
				break
			}
			if err != nil {
				return out, fmt.Errorf("discovering %s: %w", listKinds[k].Member, err)
			}
			items, next, err := parseItems(l.u, k, res)
			if err != nil {
				return out, err
			}
			hint.Add(res)
			out[k] = append(out[k], items...)
			if next == "" || next == cursor || page > 10000 {
				break
			}
			cursor = next
		}
		l.recordHint(k, hint)
	}
	return out, nil
}

// readLoop dispatches everything the upstream sends until the connection
// fails.
func (l *link) readLoop() {
	defer close(l.done)
	for {
		msg, err := l.conn.Read(l.ctx)
		if err != nil {
			l.mu.Lock()
			if l.err == nil {
				l.err = err
			}
			l.mu.Unlock()
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			l.answered(m)
		case *jsonrpc.Request:
			if m.IsCall() {
				l.serverRequest(m)
			} else {
				l.serverNotification(m)
			}
		}
	}
}

// answered gives the upstream's response m to the call it answers. The
// read loop calls it, and so does a forwarding worker for a response that
// came first on its POST (transports.StreamReader): no hand-off to the
// read loop then.
func (l *link) answered(m *jsonrpc.Response) {
	id, ok := idInt(m.ID)
	if !ok {
		l.u.log.Debug("dropping response with foreign id", "id", m.ID.Raw())
		return
	}
	c := l.take(id)
	if c == nil {
		return
	}
	if e, ok := m.Error.(*jsonrpc.Error); ok && transports.IsLocal(m) && c.reply == nil {
		// The transport answered because the server could not: say which
		// server, and check whether it is still there.
		m = &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: e.Code, Data: e.Data,
			Message: fmt.Sprintf("edge-mcp: server %q: %s", l.u.name, e.Message)}}
		l.suspect()
	}
	l.finish(c, m, nil)
}

// end is called once when a forwarded call is over: it ends the call's
// trace span (marked failed with reason, when given) and tells the caller
// waiting to release the call's scope.
func (c *call) end(reason string) {
	if c.done != nil {
		defer close(c.done)
	}
	if c.span != nil {
		if reason != "" {
			c.span.SetStatus(codes.Error, reason)
		}
		c.span.End()
	}
}
