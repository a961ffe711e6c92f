package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// upstreamProtocolVersion is the version edge-mcp asks upstreams for. It is
// pinned (rather than probing server/discover first) so that older servers,
// stdio ones in particular, are not broken by an unknown method.
const upstreamProtocolVersion = "2025-11-25"

// knownProtocolVersions are the MCP revisions edge-mcp speaks, oldest first.
var knownProtocolVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// State is the connection state of an upstream.
type State string

// Upstream states.
const (
	StateDisconnected State = "disconnected"
	StateConnecting   State = "connecting"
	StateConnected    State = "connected"
	StateFailed       State = "failed"
)

// upstream is one configured MCP server. It keeps one connection (a link) at
// a time, shared by every downstream session, and replaces it when it fails.
type upstream struct {
	g         *Gateway
	name      string
	prefix    string
	cfg       config.Server
	orig      config.Server // cfg as configured, to tell whether a reload changed it
	transport mcp.Transport
	fallback  mcp.Transport // legacy SSE, tried when streamable HTTP fails for a URL without a type
	health    HealthOptions
	log       *slog.Logger

	cur atomic.Pointer[link]

	stopRun func()         // ends run; set by Gateway.startUpstream
	done    chan struct{}  // closed when run has returned
	offer   *upstreamLists // what it offers; guarded by g.mu

	mu         sync.Mutex // guards the fields below
	state      State
	lastErr    string
	retries    int
	nextRetry  time.Time
	lastHealth time.Time

	refreshMu sync.Mutex // serializes catalogue refreshes of this upstream
}

func (u *upstream) setState(s State, err error) {
	u.mu.Lock()
	u.state = s
	if err != nil {
		u.lastErr = err.Error()
	}
	u.mu.Unlock()
}

// current returns the live link, or nil when the upstream is not connected.
func (u *upstream) current() *link { return u.cur.Load() }

// run keeps the upstream connected until ctx ends, retrying with exponential
// backoff and ±50% jitter (by default 1 s doubling to 5 min). An expired
// session is re-initialized at once.
func (u *upstream) run(ctx context.Context) {
	minBackoff, maxBackoff := u.cfg.RetryInitial, u.cfg.RetryMax
	if minBackoff <= 0 {
		minBackoff = time.Second
	}
	if maxBackoff <= 0 {
		maxBackoff = 5 * time.Minute
	}
	maxBackoff = max(maxBackoff, minBackoff)
	backoff := minBackoff
	for ctx.Err() == nil {
		u.setState(StateConnecting, nil)
		started := time.Now()
		wasUp, err := u.serveOnce(ctx)
		if ctx.Err() != nil {
			u.setState(StateDisconnected, nil)
			return
		}
		if wasUp && time.Since(started) > time.Minute {
			backoff = minBackoff // it was up for a while: start over
		}
		delay := time.Duration(float64(backoff) * (0.5 + rand.Float64()))
		if wasUp {
			u.g.metrics.UpstreamReconnect(u.name)
		}
		if wasUp && errors.Is(err, transports.ErrSessionExpired) {
			delay = 0 // the server forgot the session: re-initialize now
		}
		u.mu.Lock()
		u.state = StateFailed
		u.lastErr = err.Error()
		u.retries++
		u.nextRetry = time.Now().Add(delay)
		u.mu.Unlock()
		u.log.Warn("upstream unavailable; retrying", "err", err, "retry_in", delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		if delay > 0 {
			backoff = min(backoff*2, maxBackoff)
		}
	}
}

// open connects over t, initializes and discovers.
func (u *upstream) open(ctx context.Context, t mcp.Transport) (*link, upstreamLists, error) {
	conn, err := t.Connect(ctx)
	if err != nil {
		return nil, upstreamLists{}, fmt.Errorf("connecting: %w", err)
	}
	l := newLink(ctx, u, conn)
	initCtx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	err = l.initialize(initCtx)
	var offer upstreamLists
	if err == nil {
		offer, err = l.discover(initCtx, allKinds)
	}
	if err != nil {
		l.close(err)
		<-l.done
		return nil, offer, err
	}
	return l, offer, nil
}

// serveOnce connects, initializes and discovers, then serves until the link
// fails or ctx ends. wasUp reports whether the server got connected.
func (u *upstream) serveOnce(ctx context.Context) (wasUp bool, _ error) {
	l, offer, err := u.open(ctx, u.transport)
	if err != nil && u.fallback != nil && errors.Is(err, errUnreachable) && ctx.Err() == nil {
		// A URL without a type: the server may speak only the legacy
		// HTTP+SSE transport (2024-11-05).
		u.log.Info("streamable HTTP failed; trying legacy HTTP+SSE", "err", err)
		if sl, soffer, serr := u.open(ctx, u.fallback); serr == nil {
			u.transport, u.fallback = u.fallback, nil
			u.mu.Lock()
			u.cfg.Type = "sse"
			u.mu.Unlock()
			l, offer, err = sl, soffer, nil
		}
	}
	if err != nil {
		return false, err
	}
	u.mu.Lock()
	transport := u.cfg.Type
	u.mu.Unlock()
	u.cur.Store(l)
	u.g.metrics.UpstreamUp(u.name, true)
	go l.health(u.health)
	u.g.setOffer(u, &offer)
	u.g.events.emit(slog.LevelInfo, Event{Type: EventServerConnected, Server: u.name, Transport: transport,
		ProtocolVersion: l.protocolVersion, Tools: len(offer[kindTools]), Prompts: len(offer[kindPrompts]),
		Resources: len(offer[kindResources]), Templates: len(offer[kindTemplates])})
	// Connected last: whoever sees the state (WaitReady, /status) also
	// sees the upstream's offer in the catalogue and its event sent.
	u.mu.Lock()
	u.state, u.lastErr, u.retries = StateConnected, "", 0
	u.mu.Unlock()

	select {
	case <-l.done:
	case <-ctx.Done():
	}
	u.cur.CompareAndSwap(l, nil)
	u.g.metrics.UpstreamUp(u.name, false)
	reason := l.failure()
	l.close(reason)
	<-l.done // closing the connection ends the read loop: it must not outlive the gateway
	u.g.setOffer(u, nil)
	level := slog.LevelWarn
	if ctx.Err() != nil {
		level = slog.LevelInfo // shutting down
	}
	u.g.events.emit(level, Event{Type: EventServerDisconnected, Server: u.name, Transport: transport,
		Reason: reason.Error(), HadSession: l.conn.SessionID() != ""})
	return true, reason
}

var allKinds = []listKind{kindTools, kindPrompts, kindResources, kindTemplates}

// refresh re-reads the lists named by kinds after a list_changed
// notification and publishes the new offer.
func (u *upstream) refresh(l *link, kinds []listKind) {
	u.refreshMu.Lock()
	defer u.refreshMu.Unlock()
	ctx, cancel := context.WithTimeout(l.ctx, u.cfg.Timeout)
	defer cancel()
	fresh, err := l.discover(ctx, kinds)
	if err != nil {
		u.log.Warn("refreshing lists after list_changed", "err", err)
		return
	}
	if u.current() != l {
		return
	}
	u.g.updateOffer(u, kinds, &fresh)
}

// call is one request edge-mcp sent upstream and awaits an answer to.
type call struct {
	method string
	start  time.Time

	// For the gateway's own requests.
	reply chan *jsonrpc.Response

	// For requests forwarded from a downstream session.
	sess          *session
	origID        jsonrpc.ID
	progressToken json.RawMessage // the client's token, when the call carries one
	tool          string          // exposed tool name, for tools/call
	server        string          // the upstream's name, for events
	kind          listKind        // what the call reads: a tool, prompt or resource
	upName        string          // upstream tool or prompt name, or resource URI
	args          json.RawMessage // the call's arguments, for result policies
	pol           *policyGen      // non-nil when the result passes through policies; released once when the call ends
	slot          func()          // the upstream concurrency slot, given back when the call ends
	span          trace.Span      // the call's trace span, ended with it
	timer         atomic.Pointer[time.Timer]
}

// link is one live connection to an upstream, with its own id space and
// table of calls in flight.
type link struct {
	u      *upstream
	conn   transports.Connection
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the read loop ends

	protocolVersion string
	caps            map[string]json.RawMessage // server capabilities
	instructions    string

	nextID atomic.Int64

	probeNow chan struct{} // asks the health loop for a ping at once
	misses   int           // consecutive missed pings; health loop only

	mu      sync.Mutex
	pending map[int64]*call
	// serverCalls maps requests the upstream sent us (by their id) to the
	// cancel function of their forwarding.
	serverCalls map[jsonrpc.ID]context.CancelFunc
	err         error
	closed      bool
}

func newLink(ctx context.Context, u *upstream, conn transports.Connection) *link {
	lctx, cancel := context.WithCancel(ctx)
	l := &link{
		u: u, conn: conn, ctx: lctx, cancel: cancel, done: make(chan struct{}),
		pending:     make(map[int64]*call),
		serverCalls: make(map[jsonrpc.ID]context.CancelFunc),
		probeNow:    make(chan struct{}, 1),
	}
	go l.readLoop()
	return l
}

// errUnreachable marks failures where the server could not be reached at
// all (refused connection, broken stream), as opposed to a slow answer.
var errUnreachable = errors.New("unreachable")

// suspect asks the health loop to check the server now: a call just failed
// in a way that may mean the server is gone.
func (l *link) suspect() {
	select {
	case l.probeNow <- struct{}{}:
	default:
	}
}

// health pings the server every interval, and at once when a call failed
// suspiciously. An unreachable server fails the link at once; a server that
// does not answer in time fails it after misses consecutive pings, so a
// slow but answering server stays healthy.
func (l *link) health(h HealthOptions) {
	t := time.NewTicker(h.Interval)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		case <-l.probeNow:
		}
		ctx, cancel := context.WithTimeout(l.ctx, h.Timeout)
		_, err := l.call(ctx, "ping", nil)
		cancel()
		l.u.mu.Lock()
		l.u.lastHealth = time.Now()
		l.u.mu.Unlock()
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil, errors.As(err, &rpcErr) && !errors.Is(err, errUnreachable):
			l.misses = 0 // it answered, even if with an error
			continue
		case l.ctx.Err() != nil:
			return
		case errors.Is(err, errUnreachable):
			l.fail(fmt.Errorf("health check: %w", err))
			return
		}
		l.misses++
		l.u.log.Warn("health check missed", "misses", l.misses, "of", h.Misses, "err", err)
		if l.misses >= h.Misses {
			l.fail(fmt.Errorf("health check: %d pings in a row unanswered: %w", l.misses, err))
			return
		}
	}
}

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
	c.sess.finish(c, resp)
}

// call sends a request of the gateway's own and waits for its answer.
func (l *link) call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	c := &call{method: method, start: time.Now(), reply: make(chan *jsonrpc.Response, 1)}
	id, ok := l.register(c)
	if !ok {
		return nil, l.failure()
	}
	if err := l.conn.Write(ctx, &jsonrpc.Request{ID: intID(id), Method: method, Params: params}); err != nil {
		l.take(id)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sending %s: %w", method, ctx.Err())
		}
		return nil, fmt.Errorf("sending %s: %w: %w", method, errUnreachable, err)
	}
	select {
	case resp := <-c.reply:
		if resp.Error != nil {
			if transports.IsLocal(resp) {
				return nil, fmt.Errorf("%s: %w: %w", method, errUnreachable, resp.Error)
			}
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-ctx.Done():
		if l.take(id) != nil {
			l.notify("notifications/cancelled", cancelParams(id, "timeout"))
		}
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// notify sends a notification upstream; failures are logged, not returned:
// a broken connection is noticed by the read loop.
func (l *link) notify(method string, params json.RawMessage) {
	if err := l.conn.Write(l.ctx, &jsonrpc.Request{Method: method, Params: params}); err != nil {
		l.u.log.Debug("sending notification upstream", "method", method, "err", err)
	}
}

func cancelParams(id int64, reason string) json.RawMessage {
	b := append([]byte(`{"requestId":`), strconv.FormatInt(id, 10)...)
	b = append(b, `,"reason":`...)
	b = wire.AppendString(b, reason)
	return append(b, '}')
}

func intID(id int64) jsonrpc.ID {
	v, _ := jsonrpc.MakeID(float64(id))
	return v
}

func idInt(id jsonrpc.ID) (int64, bool) {
	v, ok := id.Raw().(int64)
	return v, ok
}

// initialize performs the MCP handshake.
func (l *link) initialize(ctx context.Context) error {
	params := `{"protocolVersion":"` + upstreamProtocolVersion + `","capabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}},"clientInfo":{"name":"edge-mcp","version":"` + Version + `"}}`
	res, err := l.call(ctx, "initialize", json.RawMessage(params))
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var r struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		Instructions    string                     `json:"instructions"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fmt.Errorf("initialize: decoding result: %w", err)
	}
	if !knownVersion(r.ProtocolVersion) {
		return fmt.Errorf("initialize: server chose unsupported protocol version %q", r.ProtocolVersion)
	}
	l.protocolVersion, l.caps, l.instructions = r.ProtocolVersion, r.Capabilities, r.Instructions
	l.notify("notifications/initialized", nil)
	return nil
}

func knownVersion(v string) bool {
	for _, k := range knownProtocolVersions {
		if k == v {
			return true
		}
	}
	return false
}

// capability of each list kind.
var kindCapability = [numKinds]string{kindTools: "tools", kindPrompts: "prompts", kindResources: "resources", kindTemplates: "resources"}

// discover reads the lists named by kinds, following nextCursor to the end.
// A list the server does not offer (no capability, or METHOD_NOT_FOUND) is
// empty, not an error.
func (l *link) discover(ctx context.Context, kinds []listKind) (upstreamLists, error) {
	var out upstreamLists
	for _, k := range kinds {
		if _, ok := l.caps[kindCapability[k]]; !ok {
			continue
		}
		cursor := ""
		for page := 0; ; page++ {
			params := json.RawMessage(`{}`)
			if cursor != "" {
				params = json.RawMessage(`{"cursor":` + string(wire.AppendString(nil, cursor)) + `}`)
			}
			res, err := l.call(ctx, listKinds[k].method, params)
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeMethodNotFound {
				break
			}
			if err != nil {
				return out, fmt.Errorf("discovering %s: %w", listKinds[k].member, err)
			}
			items, next, err := parseItems(l.u, k, res)
			if err != nil {
				return out, err
			}
			out[k] = append(out[k], items...)
			if next == "" || next == cursor || page > 10000 {
				break
			}
			cursor = next
		}
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
			id, ok := idInt(m.ID)
			if !ok {
				l.u.log.Debug("dropping response with foreign id", "id", m.ID.Raw())
				continue
			}
			if c := l.take(id); c != nil {
				if e, ok := m.Error.(*jsonrpc.Error); ok && transports.IsLocal(m) && c.reply == nil {
					// The transport answered because the server could not:
					// say which server, and check whether it is still there.
					m = &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{Code: e.Code, Data: e.Data,
						Message: fmt.Sprintf("edge-mcp: server %q: %s", l.u.name, e.Message)}}
					l.suspect()
				}
				l.finish(c, m, nil)
			}
		case *jsonrpc.Request:
			if m.IsCall() {
				l.serverRequest(m)
			} else {
				l.serverNotification(m)
			}
		}
	}
}

// relatedCall returns the forwarded call an upstream message belongs to: the
// one the transport says it arrived with, or else, when exactly one forwarded
// call is in flight, that one.
func (l *link) relatedCall(msg jsonrpc.Message) *call {
	if rid, ok := transports.RelatedTo(msg); ok {
		if id, ok := idInt(rid); ok {
			if c := l.peek(id); c != nil && c.sess != nil {
				return c
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var found *call
	for _, c := range l.pending {
		if c.sess == nil {
			continue
		}
		if found != nil && found.sess != c.sess {
			// Several sessions have calls in flight and the transport does
			// not relate messages to requests: pick the newest call.
			if c.start.After(found.start) {
				found = c
			}
			continue
		}
		if found == nil || c.start.After(found.start) {
			found = c
		}
	}
	return found
}

// serverRequest handles a request from the upstream server: ping is answered
// here; sampling, elicitation and roots go to the downstream session whose
// call is in flight.
func (l *link) serverRequest(req *jsonrpc.Request) {
	if req.Method == "ping" {
		l.respond(req.ID, json.RawMessage(`{}`), nil)
		return
	}
	c := l.relatedCall(req)
	var s *session
	var rel jsonrpc.ID
	if c != nil {
		s, rel = c.sess, c.origID
	} else {
		s = l.u.g.anySession()
	}
	if s == nil {
		l.respond(req.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("edge-mcp: no downstream client session to forward %s to", req.Method)})
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	l.mu.Lock()
	l.serverCalls[req.ID] = cancel
	l.mu.Unlock()
	go func() {
		defer func() {
			l.mu.Lock()
			delete(l.serverCalls, req.ID)
			l.mu.Unlock()
			cancel()
		}()
		res, rerr := s.request(ctx, rel, req.Method, req.Params)
		l.respond(req.ID, res, rerr)
	}()
}

func (l *link) respond(id jsonrpc.ID, result json.RawMessage, rerr *jsonrpc.Error) {
	resp := &jsonrpc.Response{ID: id, Result: result}
	if rerr != nil {
		resp.Error = rerr
		resp.Result = nil
	}
	if err := l.conn.Write(l.ctx, resp); err != nil {
		l.u.log.Debug("answering upstream request", "err", err)
	}
}

// serverNotification routes a notification from the upstream server.
func (l *link) serverNotification(n *jsonrpc.Request) {
	g := l.u.g
	switch n.Method {
	case "notifications/progress":
		tok, ok, _ := wire.Field(n.Params, "progressToken")
		if !ok {
			return
		}
		id, err := strconv.ParseInt(string(tok), 10, 64)
		if err != nil {
			return
		}
		c := l.peek(id)
		if c == nil || c.sess == nil || c.progressToken == nil {
			return // finished or unknown: no progress after the result
		}
		params, err := wire.SetField(n.Params, "progressToken", c.progressToken)
		if err != nil {
			return
		}
		c.sess.notify(c.origID, n.Method, params)
	case "notifications/message":
		if c := l.relatedCall(n); c != nil {
			c.sess.log(c.origID, n.Params)
			return
		}
		g.broadcastLog(n.Params)
	case "notifications/resources/updated":
		uri, _ := wire.String(n.Params, "uri")
		g.resourceUpdated(l.u, uri, n.Params)
	case "notifications/tools/list_changed":
		go l.u.refresh(l, []listKind{kindTools})
	case "notifications/prompts/list_changed":
		go l.u.refresh(l, []listKind{kindPrompts})
	case "notifications/resources/list_changed":
		go l.u.refresh(l, []listKind{kindResources, kindTemplates})
	case "notifications/cancelled":
		id, ok := requestID(n.Params)
		if !ok {
			return
		}
		l.mu.Lock()
		cancel := l.serverCalls[id]
		l.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	default:
		l.u.log.Debug("dropping upstream notification", "method", n.Method)
	}
}

// end releases what a forwarded call holds, once it is over: its policy
// generation, its concurrency slot and its trace span (marked failed with
// reason, when given).
func (c *call) end(g *Gateway, reason string) {
	g.pol.release(c.pol)
	if c.slot != nil {
		c.slot()
	}
	if c.span != nil {
		if reason != "" {
			c.span.SetStatus(codes.Error, reason)
		}
		c.span.End()
	}
}
