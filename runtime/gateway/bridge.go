package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/consent"
	"github.com/edge-mcp/edge-mcp/runtime/relay"
	"github.com/edge-mcp/edge-mcp/runtime/tasks"
	"github.com/edge-mcp/edge-mcp/transports"
)

// The gateway's side of bridging 2025 and 2026-07-28 (runtime/bridge):
// Gateway.bridge parks upstream requests and runs input rounds, each
// session's bridging state is its bridge.State, and the types below
// implement the interfaces through which the bridge reaches the gateway
// (bridgeOps), a session (bridgeSession), a forwarded call (bridgingCall,
// roundCall) and its link (bridgeLink); in a fleet, retries go to other
// replicas over NATS (bridge.OverNATS, Bridge.ServeRetries).

const (
	protocol2026           = transports.Protocol2026
	metaClientCapabilities = bridge.MetaClientCapabilities
	metaClientInfo         = bridge.MetaClientInfo
	metaLogLevel           = bridge.MetaLogLevel
	codeUnsupportedVersion = bridge.CodeUnsupportedVersion
)

// newBridge makes the gateway's bridge; in a fleet its requestState keys
// are the fleet's (bridge.New).
func newBridge(g *Gateway, c *config.Cluster) (*bridge.Bridge, error) {
	var fleet string
	var secrets []string
	if c != nil {
		fleet, secrets = c.Name, c.Secrets
	}
	return bridge.New(bridgeOps{g}, fleet, secrets)
}

// serverInfo is the gateway's Implementation.
func serverInfo() map[string]any {
	return map[string]any{"name": "edge-mcp", "title": "edge-mcp gateway", "version": Version}
}

// bridgeOps implements bridge.Gateway for a gateway.
type bridgeOps struct{ g *Gateway }

var _ bridge.Gateway = bridgeOps{}

func (o bridgeOps) InputTimeout() time.Duration { return o.g.cfgp.Load().Limits.InputTimeout }
func (o bridgeOps) InputRounds() int            { return o.g.cfgp.Load().Limits.InputRounds }
func (o bridgeOps) ServerInfo() any             { return serverInfo() }
func (o bridgeOps) Log() *slog.Logger           { return o.g.log }

// Capabilities is what the gateway offers at version: the server
// capabilities and the tasks its upstreams support.
func (o bridgeOps) Capabilities(version string) map[string]any {
	return tasks.Capabilities(taskOps{o.g}, bridge.ServerCapabilities(version), version)
}

// Instructions joins the instructions of the connected upstreams.
func (o bridgeOps) Instructions() string {
	var out string
	for _, u := range o.g.route.upstreams().list {
		if l := u.current(); l != nil && l.instructions != "" {
			out += u.name + ": " + l.instructions + "\n"
		}
	}
	return out
}

// Hints are the caching hints of the catalogue now (the rules are
// runtime/bridge's, cachehints.go).
func (o bridgeOps) Hints() bridge.Hints {
	g := o.g
	h := bridge.Hints{TTLMs: bridge.TTLSettled, Scope: "public"}
	for _, u := range g.route.upstreams().list {
		if u.current() == nil {
			h.TTLMs = bridge.TTLIncomplete
		}
		if u.perClient() {
			h.Scope = "private"
		}
	}
	if g.route.relisting.Load() > 0 {
		h.TTLMs = bridge.TTLRelisting
	}
	gd := g.guard.Load()
	if gd.Auth != nil || gd.Access != nil || gd.AnyDeferred || g.pol.Current().Hooks().Has(policy.HookToolsList) {
		h.Scope = "private"
	}
	return h
}

// hintsFor are the hints for the list of kind k: the catalogue's bounded
// by the upstreams' own for that list.
func (o bridgeOps) hintsFor(k listKind) bridge.Hints {
	h := o.Hints()
	now := time.Now()
	for _, u := range o.g.route.upstreams().list {
		if lh := u.hints[k].Load(); lh != nil {
			var expired bool
			if h, expired = h.Bound(lh, now); expired {
				u.refreshExpired(k)
			}
		}
	}
	return h
}

func (o bridgeOps) Fleet() bridge.Fleet {
	if fs := o.g.fleetSess.Load(); fs != nil {
		return bridge.OverNATS(fs.node)
	}
	return nil
}

func (o bridgeOps) ServeOne(conn transports.OneRequest) { o.g.serveOne(conn) }

func (o bridgeOps) PeerOf(id auth.Identity) any {
	return &peer{id: id, transport: transportStreamable}
}

// RetryWait is the upstream's timeout and the margin of a request to
// another replica.
func (o bridgeOps) RetryWait(server string) time.Duration {
	wait := ownerMargin
	if u := o.g.route.upstreams().byName[server]; u != nil {
		wait += u.cfg.Timeout
	}
	return wait
}

// recordHint keeps the hint of kind k's list as the shared link's upstream
// gave it just now (per-client links' lists do not make the catalogue).
func (l *link) recordHint(k listKind, h bridge.ListHint) {
	if l.owner != nil {
		return
	}
	l.u.hints[k].Store(h.Listed(l.v2026.Load()))
}

// refreshExpired re-lists kind k of u in the background when its positive
// TTL has run out, unless a refresh for that is already running.
func (u *upstream) refreshExpired(k listKind) {
	l := u.current()
	if l == nil || !u.hintRefresh.CompareAndSwap(false, true) {
		return
	}
	u.g.route.relists.Go(func() {
		defer u.hintRefresh.Store(false)
		u.g.route.relisting.Add(1)
		defer u.g.route.relisting.Add(-1)
		u.refresh(l, []listKind{k}, false)
	})
}

// bridgeSession implements bridge.Session for a session; equal values are
// the same session.
type bridgeSession struct{ s *session }

var _ bridge.Session = bridgeSession{}

func (b bridgeSession) Identity() auth.Identity  { return b.s.id }
func (b bridgeSession) Context() context.Context { return b.s.ctx }
func (b bridgeSession) State() *bridge.State     { return &b.s.bridging }
func (b bridgeSession) Modern() bool             { return b.s.modern.Load() }
func (b bridgeSession) Account() *budget.Account {
	return b.s.g.clientMem.Acquire(b.s.id.Name, budgetShared(b.s.id))
}
func (b bridgeSession) Write(ctx context.Context, msg jsonrpc.Message) { b.s.write(ctx, msg) }

func (b bridgeSession) Adopt(level, name string) {
	b.s.modern.Store(true)
	if i := levelIndex(level); i >= 0 {
		b.s.logLevel.Store(int32(i))
	} else {
		b.s.logLevel.Store(int32(len(logLevels)))
	}
	if name != "" {
		b.s.client.Name = name
	}
}

func (b bridgeSession) Request(ctx context.Context, rel jsonrpc.ID, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	return b.s.request(ctx, rel, method, params)
}

func (b bridgeSession) Has(capability string) bool {
	switch capability {
	case "sampling":
		return b.s.caps.sampling
	case "elicitation":
		return b.s.caps.elicitation
	case "roots":
		return b.s.caps.roots
	}
	return false
}

func (b bridgeSession) Detach(id jsonrpc.ID) (bridge.Link, int64, bool) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	f, ok := b.s.inflight[id]
	delete(b.s.inflight, id)
	if !ok {
		return nil, 0, false
	}
	return bridgeLink{f.l}, f.id, true
}

func (b bridgeSession) Attach(id jsonrpc.ID, l bridge.Link, upID int64) bool {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if b.s.closed {
		return false
	}
	b.s.inflight[id] = inflight{l.(bridgeLink).l, upID}
	return true
}

// SubscribeAll subscribes the session to the resources it may follow and
// returns their URIs: those of shared upstreams that accept the
// subscription.
func (b bridgeSession) SubscribeAll(uris []string) []string {
	s := b.s
	var ok []string
	for _, uri := range uris {
		u := s.catalogue().Resource(uri)
		if u == nil || u.perClient() {
			continue
		}
		if s.g.route.subscribe(s, uri) {
			l := u.current()
			var err error
			if l != nil {
				ctx, cancel := context.WithTimeout(s.ctx, u.cfg.Timeout)
				err = l.subscribeResource(ctx, uri)
				cancel()
			}
			if l == nil || err != nil {
				s.g.route.unsubscribe(s, uri)
				continue
			}
		}
		ok = append(ok, uri)
	}
	return ok
}

// bridgeLink implements bridge.Link for a link.
type bridgeLink struct{ l *link }

func (b bridgeLink) Timeout() time.Duration { return b.l.u.cfg.Timeout }

func (b bridgeLink) Respond(id jsonrpc.ID, result json.RawMessage, err *jsonrpc.Error) {
	b.l.respond(id, result, err)
}

// Cancel ends the call upID upstream, if it is still in flight.
func (b bridgeLink) Cancel(upID int64, reason string) {
	c := b.l.take(upID)
	if c == nil {
		return
	}
	if t := c.timer.Load(); t != nil {
		t.Stop()
	}
	c.end(reason)
	b.l.notify("notifications/cancelled", relay.CancelParams(upID, reason))
}

// bridgingCall implements bridge.Call for a forwarded call; equal values
// are the same call.
type bridgingCall struct{ c *call }

func (b bridgingCall) ClientID() jsonrpc.ID { return b.c.origID }
func (b bridgingCall) Server() string       { return b.c.server }
func (b bridgingCall) Method() string       { return b.c.method }
func (b bridgingCall) Size() int            { return b.c.size }
func (b bridgingCall) MarkBridged()         { b.c.bridged.Store(true) }
func (b bridgingCall) Bridged() bool        { return b.c.bridged.Load() }
func (b bridgingCall) End(reason string)    { b.c.end(reason) }

func (b bridgingCall) Session() bridge.Session {
	if b.c.sess == nil {
		return nil
	}
	return bridgeSession{b.c.sess}
}

// Name is what a retry must name to continue the call: the exposed tool
// of a tools/call, else the upstream's prompt name or resource URI.
func (b bridgingCall) Name() string {
	if b.c.tool != "" {
		return b.c.tool
	}
	return b.c.upName
}

func (b bridgingCall) Finish(s bridge.Session, id jsonrpc.ID, resp *jsonrpc.Response) {
	b.c.sess, b.c.origID = s.(bridgeSession).s, id
	b.c.sess.finish(b.c, resp)
}

// bridgeRequest turns a server→client request that belongs to a
// 2026-07-28 client's tools/call, prompts/get or resources/read into an
// input_required result, and reports whether it did. Other requests take
// the ordinary path.
func (l *link) bridgeRequest(req *jsonrpc.Request) bool {
	if !bridge.Bridgeable(req.Method) {
		return false
	}
	var bc bridge.Call
	if c, _ := l.relatedCall(req); c != nil {
		bc = bridgingCall{c}
	}
	return l.u.g.bridge.Park(bridgeLink{l}, bc, req)
}

// roundCall implements bridge.RoundCall for a 2025 client's call c on a
// 2026-07-28 link l.
type roundCall struct {
	bridgingCall
	l *link
}

// inputRequired takes over resp when it is an input_required result for a
// 2025 client's call c (the link speaks 2026-07-28), and reports whether
// it did: the client is asked, off the read loop, and the call is sent
// again. Every other answer takes the ordinary way.
func (l *link) inputRequired(c *call, resp *jsonrpc.Response) bool {
	if !bridge.IsInputRequired(c.again, resp) {
		return false
	}
	go l.u.g.bridge.Round(roundCall{bridgingCall{c}, l}, resp.Result)
	return true
}

// markInputRequired marks a 2025 upstream's result carrying inputRequests
// input_required for the 2026-07-28 client of c (bridge.MarkInputRequired).
func (l *link) markInputRequired(c *call, resp *jsonrpc.Response) bool {
	if c.sess == nil || l.v2026.Load() || !c.sess.modern.Load() {
		return false
	}
	return bridge.MarkInputRequired(c.method, resp)
}

func (r roundCall) Again() *bridge.Again { return r.c.again }

// Fail answers the call's client with rerr, unless the client cancelled
// the call or went away meanwhile, and ends the call.
func (r roundCall) Fail(rerr *jsonrpc.Error) {
	s, c := r.c.sess, r.c
	s.mu.Lock()
	_, waiting := s.inflight[c.origID]
	waiting = waiting && !s.closed
	s.mu.Unlock()
	if !waiting {
		c.end("cancelled by the client")
		return
	}
	s.finish(c, &jsonrpc.Response{ID: c.origID, Error: rerr}) // records and answers, as for any answer
}

// SendAgain sends the call upstream on its link again, with params, under
// a new upstream id: the client's request id now maps to it
// (cancellation) and so does the call's progress token.
func (r roundCall) SendAgain(params json.RawMessage) {
	s, c, l := r.c.sess, r.c, r.l
	id, ok := l.register(c)
	if !ok {
		r.Fail(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("edge-mcp: server %q is %s", c.server, errNotConnected)})
		return
	}
	if c.progressToken != nil {
		var err error
		if params, err = bridge.SetProgressToken(params, id); err != nil {
			l.take(id)
			r.Fail(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: " + err.Error()})
			return
		}
	}
	s.mu.Lock()
	_, waiting := s.inflight[c.origID]
	if waiting && !s.closed {
		s.inflight[c.origID] = inflight{l, id}
	}
	s.mu.Unlock()
	if !waiting {
		l.take(id)
		c.end("cancelled by the client") // between the answers and now
		return
	}
	s.armTimer(l, c, id, c.again.Timeout)
	up := l.upstreamRequest(c.again.Req, id, params, c.again.Schema, s.clientMeta())
	s.g.senders.submit(func() {
		if err := l.conn.Write(l.ctx, up); err != nil {
			if c := l.take(id); c != nil {
				l.finish(c, nil, fmt.Errorf("sending %s to server %q: %v", c.method, c.server, err))
			}
			l.sendFailed(c.method, err)
		}
	})
}

// askApproval answers tc of a 2026-07-28 client with input_required asking
// for its approval, or, when its request did not declare elicitation,
// with MissingRequiredClientCapability (-32021).
func (s *session) askApproval(tc *toolCall) {
	if rerr := s.bridging.MissingCapability(tc.it.Exposed, "elicitation"); rerr != nil {
		s.recordCall(tc, metrics.OutcomeDenied, rerr.Message)
		s.write(s.ctx, &jsonrpc.Response{ID: tc.req.ID, Error: rerr})
		return
	}
	s.g.bridge.AskApproval(bridgeSession{s}, tc.req, bridge.Approval{Server: tc.it.Up.name, Tool: tc.it.Exposed,
		Args: tc.args, Params: tc.params, Form: approvalParams(tc), Within: consent.Timeout})
}

// clientMeta is what a 2026-07-28 link's request says of the client in
// _meta beyond the protocol version (probe.go's stampFor).
type clientMeta struct {
	caps     json.RawMessage // nil: the gateway's own (upstreamCapabilities)
	logLevel string          // "": none
}

// clientMeta is what a 2026-07-28 upstream is told of this session's
// client: the capabilities it declared (nil for a session that declared
// none, e.g. a 2025 stdio client that never initialized) and, for a 2025
// client, the level it set with logging/setLevel: the revision has no
// setLevel, a request names its level in _meta. A 2026-07-28 client's own
// logLevel passes in its request's _meta unchanged.
func (s *session) clientMeta() clientMeta {
	cm := clientMeta{caps: s.bridging.Relayed()}
	if !s.modern.Load() {
		if i := int(s.logLevel.Load()); i >= 0 && i < len(logLevels) {
			cm.logLevel = logLevels[i]
		}
	}
	return cm
}
