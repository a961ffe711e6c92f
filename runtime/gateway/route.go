package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/catalog"
	"github.com/edge-mcp/edge-mcp/runtime/interceptchain"
	"github.com/edge-mcp/edge-mcp/runtime/relay"
	"github.com/edge-mcp/edge-mcp/runtime/tasks"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is the router: every routing decision of the gateway. Client
// requests are routed by name or URI through the current catalogue snapshot
// to the upstream that owns the tool, prompt, resource or template; a
// server→client message (a request, progress, a log line, a resource
// update) is routed back to the session whose call caused it.

// router is the routing room: it owns the current catalogue snapshot, the
// set of upstreams, the live downstream sessions and their resource
// subscriptions. Every routing decision reads from it: which upstream owns
// a tool, prompt, resource or template (the catalogue), and which session a
// server→client message belongs to (sessions, subscriptions).
//
// Its methods are safe for concurrent use. Lookups (catalogue, upstreams)
// are lock-free loads of immutable snapshots; changes take mu, build a new
// snapshot and swap it in, and tell sessions after mu is released.
type router struct {
	log      *slog.Logger
	pageSize int
	// pin filters an upstream's offer through tool pinning (nil: no pins).
	// It is called with mu held.
	pin func(u *upstream, offer *upstreamLists) *upstreamLists

	cat atomic.Pointer[catalogue]
	ups atomic.Pointer[upstreamSet] // replaced whole on reload

	mu sync.Mutex // guards the fields below
	// offer is what each upstream offers, and offered before it went
	// down; it builds the snapshots (runtime/catalog).
	offer    *catalog.Offers[*upstream, localCall]
	sessions map[*session]struct{}
	// explained records, per session, the names whose refusal was logged.
	explained map[*session]map[string]struct{}
	// subs are the sessions' resource subscriptions (runtime/relay; a
	// lock of its own).
	subs relay.Subscriptions[*session]
	// relisting counts the list_changed notifications of upstreams whose
	// lists are being fetched again: the catalogue is about to change.
	relisting atomic.Int32
	// relists are the re-list goroutines list_changed notifications and
	// expired list hints start; Gateway.Close waits for them.
	relists sync.WaitGroup
	// tasks maps the task ids clients see to the tasks upstream (tasks.go).
	tasks tasks.Table
}

// upstreamSet is the configured upstreams, in config order. It is immutable:
// a reload builds a new set and swaps it in.
type upstreamSet struct {
	list   []*upstream
	byName map[string]*upstream
}

func newRouter(log *slog.Logger, pageSize int, set *upstreamSet, reserved [numKinds]map[string]string) *router {
	r := &router{log: log, pageSize: pageSize,
		offer:     catalog.NewOffers[*upstream, localCall](log, pageSize, reserved, upstreamName),
		sessions:  make(map[*session]struct{}),
		explained: make(map[*session]map[string]struct{})}
	r.ups.Store(set)
	names := make([]string, len(set.list))
	for i, u := range set.list {
		names[i] = u.name
	}
	r.cat.Store(catalog.Build(0, names, make([]*upstreamLists, len(set.list)), reserved, pageSize))
	return r
}

// catalogue returns the current snapshot.
func (r *router) catalogue() *catalogue { return r.cat.Load() }

// upstreams returns the current set of upstreams.
func (r *router) upstreams() *upstreamSet { return r.ups.Load() }

// setOffer replaces everything upstream u offers (nil: it is gone) and
// publishes a new catalogue snapshot.
func (r *router) setOffer(u *upstream, offer *upstreamLists) {
	r.publish(func() { r.offer.Set(u, offer, r.upstreams().byName[u.name] == u) })
}

// updateOffer replaces the lists named by kinds of upstream u, after its
// list_changed: the sessions are told that those lists changed even when
// the merged catalogue reads the same (the upstream re-added a tool it
// had, say), as they would be by the upstream directly.
//
// Unless announce is set (a re-listing of its own, e.g. for an expired
// caching hint), only lists that changed are announced.
func (r *router) updateOffer(u *upstream, kinds []listKind, fresh *upstreamLists, announce bool) {
	var notify []string
	if announce {
		notify = catalog.Announced(kinds)
	}
	r.publishNotifying(notify, func() { r.offer.Update(u, kinds, fresh) })
}

// replace swaps in a new upstream set and reserved names (a reload) and
// publishes the catalogue they make.
func (r *router) replace(set *upstreamSet, reserved [numKinds]map[string]string) {
	r.publish(func() {
		r.ups.Store(set)
		r.offer.Reconfigure(reserved, func(u *upstream) bool { return set.byName[u.name] == u })
	})
}

// publish applies change (nil: none) under mu, builds and swaps in a new
// snapshot, then tells every session which lists changed.
func (r *router) publish(change func()) { r.publishNotifying(nil, change) }

// publishNotifying is publish that also tells the sessions the list_changed
// methods in always, whether or not their lists changed.
func (r *router) publishNotifying(always []string, change func()) {
	old, next, sessions := r.rebuild(change)
	changed := catalog.Changed(old, next, always)
	for _, s := range sessions {
		for _, m := range (virtualSide{s}).listsChanged(old, next, changed) {
			s.listChanged(m)
		}
	}
}

// rebuild is publish's critical section.
func (r *router) rebuild(change func()) (old, next *catalogue, sessions []*session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if change != nil {
		change()
	}
	old = r.cat.Load()
	next = r.offer.Build(r.upstreams().list, r.pin)
	r.cat.Store(next)
	return old, next, r.sessionsLocked()
}

// logConflictsLocked logs the name conflicts of a new snapshot that the
// previous one did not have (catalog.Offers.LogConflicts).
func (r *router) logConflictsLocked(conflicts []conflict) { r.offer.LogConflicts(conflicts) }

// upstreamName is u's name, for the catalogue.
func upstreamName(u *upstream) string { return u.name }

// offers returns what each upstream of the current set offers, in order.
func (r *router) offers() ([]*upstream, []*upstreamLists) {
	ups := r.upstreams().list
	r.mu.Lock()
	defer r.mu.Unlock()
	offers := make([]*upstreamLists, len(ups))
	for i, u := range ups {
		offers[i] = r.offer.Offer(u)
	}
	return ups, offers
}

// addSession registers a live session.
func (r *router) addSession(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessions[s] = struct{}{}
}

// removeSession forgets s and returns the URIs it was the last subscriber
// of (the upstream must be told).
func (r *router) removeSession(s *session) (unsubscribe []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sessions, s)
	delete(r.explained, s)
	return r.subs.Forget(s)
}

// allSessions returns the live sessions.
func (r *router) allSessions() []*session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessionsLocked()
}

func (r *router) sessionsLocked() []*session {
	out := make([]*session, 0, len(r.sessions))
	for s := range r.sessions {
		out = append(out, s)
	}
	return out
}

// onlySession returns the one initialized session when there is exactly
// one (an upstream request that belongs to no call in flight can then only
// be for it), and the number of initialized sessions.
func (r *router) onlySession() (*session, int) {
	var only *session
	n := 0
	for _, s := range r.allSessions() {
		if s.initialized.Load() {
			only = s
			n++
		}
	}
	if n != 1 {
		return nil, n
	}
	return only, 1
}

// subscribedTo reports whether s is subscribed to uri.
func (r *router) subscribedTo(s *session, uri string) bool { return r.subs.Subscribed(s, uri) }

// broadcastLog sends a log message that belongs to no call to every session
// whose level admits it.
func (r *router) broadcastLog(params json.RawMessage) {
	for _, s := range r.allSessions() {
		s.log(noID, params)
	}
}

// subscribe records that s wants updates for uri and reports whether it is
// the first subscriber (so the upstream must be told).
func (r *router) subscribe(s *session, uri string) bool { return r.subs.Subscribe(s, uri) }

// unsubscribe removes s from uri's subscribers and reports whether it was
// the last one.
func (r *router) unsubscribe(s *session, uri string) bool { return r.subs.Unsubscribe(s, uri) }

// resourceUpdated forwards notifications/resources/updated to the sessions
// subscribed to uri.
func (r *router) resourceUpdated(params json.RawMessage, uri string) {
	for _, s := range r.subs.Subscribers(uri) {
		if id, ok := s.bridging.Subscription(""); ok {
			s.notify(id, "notifications/resources/updated", bridge.Tag(params, id))
			continue
		}
		s.notify(noID, "notifications/resources/updated", params)
	}
}

// relist fetches the lists named by kinds of l's upstream again after its
// list_changed, counted in relisting meanwhile.
func (r *router) relist(l *link, kinds []listKind) {
	r.relisting.Add(1)
	defer r.relisting.Add(-1)
	l.u.refresh(l, kinds, true)
}

// routing routes a session's requests by method and name or URI to the
// upstream serving them, from the session's view of the catalogue.
type routing struct{ *session }

func (s routing) list(req *jsonrpc.Request, k listKind) {
	if ch := s.chain(); ch.Hooks(req.Method) {
		go s.interceptList(req, k, ch) // stage_intercept.go: off the read loop
		return
	}
	page, f := s.listPage(req.Method, req.Params, k)
	if f != nil {
		s.replyError(req.ID, f.Code, "%s", f.Message)
		return
	}
	s.reply(req.ID, page)
}

// listPage is the page of the catalogue params.cursor asks for.
func (s routing) listPage(method string, params json.RawMessage, k listKind) (json.RawMessage, *interceptchain.Failure) {
	return s.listPageOf(s.catalogue(), method, params, k)
}

// listPageOf is listPage of cat.
func (s routing) listPageOf(cat *catalogue, method string, params json.RawMessage, k listKind) (json.RawMessage, *interceptchain.Failure) {
	cursor, _ := wire.String(params, "cursor")
	page, err := cat.Page(k, cursor, s.g.opts.PageSize)
	if err != nil {
		return nil, &interceptchain.Failure{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %v", method, err)}
	}
	if s.modern.Load() {
		if page, err = (bridgeOps{s.g}).hintsFor(k).Apply(page); err != nil {
			return nil, &interceptchain.Failure{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s: adding caching hints: %v", method, err)}
		}
	}
	return page, nil
}

// forwardNamed routes tools/call and prompts/get by params.name.
func (s routing) forwardNamed(req *jsonrpc.Request, k listKind) { s.routeNamed(req, k, true) }

// routeNamed is forwardNamed; mayWait: a call of a disconnected server's
// name may wait for it to reconnect (heal.go), once.
func (s routing) routeNamed(req *jsonrpc.Request, k listKind, mayWait bool) {
	name, ok := wire.String(req.Params, "name")
	if !ok {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: params.name must be a string", req.Method)
		return
	}
	it := s.catalogue().Find(k, name)
	if it == nil {
		notFound{s.session}.answer(req, k, name, mayWait)
		return
	}
	if state, ok := bridge.Sealed(req.Params); ok && s.modern.Load() {
		t := bridge.Target{Name: it.Name} // a prompt: its upstream name (bridgingCall.Name)
		if k == kindTools {
			t.Name, t.Approved = it.Exposed, func(req *jsonrpc.Request, answer json.RawMessage) { s.toolCallAnswered(req, it, answer) }
		}
		if it.Up != nil {
			t.Server = it.Up.name
		}
		s.g.bridge.Resume(bridgeSession{s.session}, req, t, state)
		return
	}
	if k == kindTools {
		s.toolCall(req, it)
		return
	}
	params := req.Params
	if it.Name != it.Exposed {
		var err error
		if params, err = wire.SetField(params, "name", wire.AppendString(nil, it.Name)); err != nil {
			s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: %v", req.Method, err)
			return
		}
	}
	info := forwardInfo{kind: k, upName: it.Name, ic: s.chain()}
	sc := policyScope(&s.g.pol, k, it.Up.name, it.Name)
	if sc.Held() {
		info.pg, info.waited = sc.Gen, true
		info.args, _, _ = wire.Field(params, "arguments")
	}
	if info.ic != nil {
		go s.interceptForward(sc, req, it.Up, params, info, "name", it.Name, it.Exposed) // stage_intercept.go
		return
	}
	s.forwardScoped(sc, req, it.Up, params, info)
}

// forwardScoped forwards a call that may hold a scope, and releases the
// scope once the call has been answered. A request of an identity that
// must first authorize the upstream (identity "per_client" without a
// token) is forwarded off the caller's goroutine: starting the
// authorization takes a discovery round trip of up to beginWait, which
// would hold the session's read loop, and every other request of the
// session, as long.
func (s *session) forwardScoped(sc callScope, req *jsonrpc.Request, u *upstream, params json.RawMessage, info forwardInfo) {
	if info.tool == "" && u.needsUserAuthorization(s) {
		go routing{s}.forwardScopedNow(sc, req, u, params, info)
		return
	}
	routing{s}.forwardScopedNow(sc, req, u, params, info)
}

func (s routing) forwardScopedNow(sc callScope, req *jsonrpc.Request, u *upstream, params json.RawMessage, info forwardInfo) {
	done := s.forward(req, u, params, info)
	if sc.Held() {
		go sc.ReleaseAfter(done)
	}
}

// resourceOf routes a request by its params.uri: the URI and the upstream
// that serves it, or ok false when the request was answered with why not.
func (s routing) resourceOf(req *jsonrpc.Request) (uri string, u *upstream, ok bool) {
	if uri, ok = wire.String(req.Params, "uri"); !ok {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: params.uri must be a string", req.Method)
		return "", nil, false
	}
	if u = s.catalogue().Resource(uri); u == nil {
		s.write(s.ctx, bridge.ResourceNotFound(req.ID, uri))
		return "", nil, false
	}
	return uri, u, true
}

// forwardURI routes resources/read by params.uri.
func (s routing) forwardURI(req *jsonrpc.Request) {
	uri, u, ok := s.resourceOf(req)
	if !ok {
		return
	}
	if state, ok := bridge.Sealed(req.Params); ok && s.modern.Load() {
		s.g.bridge.Resume(bridgeSession{s.session}, req, bridge.Target{Name: uri}, state)
		return
	}
	info := forwardInfo{kind: kindResources, upName: uri, ic: s.chain()}
	sc := policyScope(&s.g.pol, kindResources, u.name, uri)
	info.pg, info.waited = sc.Gen, sc.Held()
	if info.ic != nil {
		go s.interceptForward(sc, req, u, req.Params, info, "uri", uri, uri) // stage_intercept.go
		return
	}
	s.forwardScoped(sc, req, u, req.Params, info)
}

func (s routing) subscribe(req *jsonrpc.Request) {
	uri, u, ok := s.resourceOf(req)
	if !ok {
		return
	}
	if ch := s.chain(); ch.Hooks(req.Method) {
		go s.interceptSubscribe(req, u, uri, ch) // stage_intercept.go: off the read loop
		return
	}
	s.subscribeTo(req, u, uri, nil)
}

// subscribeTo subscribes the session to uri of u; its answer (the
// upstream's, or the gateway's own) passes ic's response phase when ic is
// set.
func (s routing) subscribeTo(req *jsonrpc.Request, u *upstream, uri string, ic *intercept.Chain) {
	if !s.g.route.subscribe(s.session, uri) && !u.perClient() {
		// The upstream already sends updates for uri.
		s.subscribed(req, u.name, uri, ic, func() { s.g.route.unsubscribe(s.session, uri) })
		return
	}
	if u.speaks2026() {
		go u.subscribe2026(s.session, req, uri, ic)
		return
	}
	s.forward(req, u, req.Params, forwardInfo{kind: kindResources, upName: uri, ic: ic})
}

func (s routing) unsubscribe(req *jsonrpc.Request) {
	uri, ok := wire.String(req.Params, "uri")
	if !ok {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: params.uri must be a string", req.Method)
		return
	}
	u := s.catalogue().Resource(uri)
	if u == nil || (!s.g.route.unsubscribe(s.session, uri) && !u.perClient()) {
		s.reply(req.ID, json.RawMessage(`{}`))
		return
	}
	if u.speaks2026() {
		go u.unsubscribe2026(s.session, req, uri)
		return
	}
	s.forward(req, u, req.Params, forwardInfo{})
}

// complete routes completion/complete by the prompt or resource template it
// completes for.
func (s routing) complete(req *jsonrpc.Request) {
	ref, _, _ := wire.Field(req.Params, "ref")
	typ, _ := wire.String(ref, "type")
	cat := s.catalogue()
	switch typ {
	case "ref/prompt":
		name, _ := wire.String(ref, "name")
		it := cat.Find(kindPrompts, name)
		if it == nil {
			s.replyError(req.ID, jsonrpc.CodeInvalidParams, "unknown prompt %q", name)
			return
		}
		params := req.Params
		if it.Name != it.Exposed {
			newRef, err := wire.SetField(ref, "name", wire.AppendString(nil, it.Name))
			if err == nil {
				params, err = wire.SetField(params, "ref", newRef)
			}
			if err != nil {
				s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: %v", req.Method, err)
				return
			}
		}
		s.forward(req, it.Up, params, forwardInfo{})
	case "ref/resource":
		uri, _ := wire.String(ref, "uri")
		u := (*upstream)(nil)
		if it := cat.Find(kindTemplates, uri); it != nil {
			u = it.Up
		} else {
			u = cat.Resource(uri)
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

// relatedCall returns the forwarded call an upstream message belongs to: the
// one the transport says it arrived with, or else the newest call in flight
// when all the calls in flight are of one session. sessions is the number
// of sessions with calls in flight; when it is more than one and the
// transport did not relate the message, the call is nil: guessing could
// hand one client's request to another.
func (l *link) relatedCall(msg jsonrpc.Message) (c *call, sessions int) {
	if rid, ok := transports.RelatedTo(msg); ok {
		if id, ok := idInt(rid); ok {
			if c := l.peek(id); c != nil && c.sess != nil {
				return c, 1
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return relay.Newest(l.pending, func(c *call) (*session, time.Time, bool) { return c.sess, c.start, c.sess != nil })
}

// requestTarget returns the downstream session a server→client request of
// l is for, and the client request it relates to (noID: none), or why it
// cannot tell: a per-client link's owner; else the session whose call it
// belongs to; else, with no call in flight, the one client connected.
func (l *link) requestTarget(req *jsonrpc.Request) (*session, jsonrpc.ID, string) {
	c, sessions := l.relatedCall(req)
	switch {
	case c != nil:
		return c.sess, c.origID, ""
	case l.owner != nil:
		return l.owner, noID, ""
	case sessions > 1:
		return nil, noID, relay.Unrelated(sessions, 0)
	}
	s, n := l.u.g.route.onlySession()
	if s != nil {
		return s, noID, ""
	}
	return nil, noID, relay.Unrelated(0, n)
}

// serverRequest handles a request from the upstream server: ping is answered
// here; sampling, elicitation and roots go to the downstream session whose
// call is in flight, and are refused when that cannot be told.
func (l *link) serverRequest(req *jsonrpc.Request) {
	if req.Method == "ping" {
		l.respond(req.ID, json.RawMessage(`{}`), nil)
		return
	}
	if l.bridgeRequest(req) {
		return // asked by input_required (bridge.go)
	}
	s, rel, why := l.requestTarget(req)
	if ts, trel, params, ok := l.taskTarget(req); ok { // a task's request goes to its owner (tasks.go)
		if s != ts || trel.IsValid() {
			rel = trel
		}
		s, why = ts, ""
		req = &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params}
	}
	if s == nil {
		l.refuse(req, why)
		return
	}
	l.serverCalls.Serve(l.ctx, req.ID, func(ctx context.Context) {
		res, rerr := s.interceptedRequest(ctx, l.u.name, rel, req.Method, req.Params) // stage_intercept.go
		l.respond(req.ID, res, rerr)
	})
}

// refuse answers a server→client request that belongs to no one client
// with an error saying why, and logs it.
func (l *link) refuse(req *jsonrpc.Request, why string) {
	rerr, attrs := relay.Refusal(req.Method, l.u.name, why, l.u.perClient())
	l.u.log.Warn("refusing a server→client request: cannot tell which client it belongs to", attrs...)
	l.respond(req.ID, nil, rerr)
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
		if c, _ := l.relatedCall(n); c != nil {
			c.sess.log(c.origID, n.Params)
			return
		}
		if l.owner != nil {
			l.owner.log(noID, n.Params)
			return
		}
		g.route.broadcastLog(n.Params)
	case "notifications/resources/updated":
		uri, _ := wire.String(n.Params, "uri")
		if l.owner == nil {
			g.route.resourceUpdated(bridge.WithoutSubscriptionID(n.Params), uri)
		} else if g.route.subscribedTo(l.owner, uri) {
			l.owner.notify(noID, n.Method, bridge.WithoutSubscriptionID(n.Params))
		}
	case "notifications/subscriptions/acknowledged":
		l.resListens.Acknowledged(n.Params)
	case "notifications/tools/list_changed":
		g.route.relists.Go(func() { g.route.relist(l, []listKind{kindTools}) })
	case "notifications/prompts/list_changed":
		g.route.relists.Go(func() { g.route.relist(l, []listKind{kindPrompts}) })
	case "notifications/resources/list_changed":
		g.route.relists.Go(func() { g.route.relist(l, []listKind{kindResources, kindTemplates}) })
	case "notifications/tasks/status", "notifications/tasks":
		g.route.tasks.Notification(taskOps{g}, l.taskKey(), n, l.u.log)
	case "notifications/cancelled":
		id, ok := relay.CancelledID(n.Params)
		if !ok {
			return
		}
		l.serverCalls.Cancel(id)
	default:
		l.u.log.Debug("dropping upstream notification", "method", n.Method)
	}
}
