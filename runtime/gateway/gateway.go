// Package gateway is the core of edge-mcp: it keeps one connection to every
// configured upstream MCP server, merges what they offer into one catalogue,
// and serves that catalogue to any number of downstream client sessions,
// forwarding each request to the server that owns it.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/internal/schema"
	"github.com/edge-mcp/edge-mcp/internal/telemetry"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/transports"
)

// Version is the edge-mcp version reported to peers.
var Version = "0.1.0-dev"

// Options are the run-time knobs of a Gateway that are not part of the
// operator's config file.
type Options struct {
	// Logger receives the gateway's logs; nil discards them.
	Logger *slog.Logger
	// PageSize is the number of items per page of the downstream list
	// results; 0 means 1000.
	PageSize int
	// Transports overrides how named upstreams are reached (for in-process
	// servers such as the built-in demo, and tests).
	Transports map[string]mcp.Transport
	// Health configures the upstream health checks; zero fields take the
	// defaults.
	Health HealthOptions
	// PolicyCacheDir holds compiled policy modules across restarts; empty
	// means <user cache dir>/edge-mcp/wasm.
	PolicyCacheDir string
	// StateDir holds uploaded modules and run-time attachments when the
	// config has no admin.state_dir; empty means none (uploads are refused).
	StateDir string
	// RecordDir, when set, receives the (redacted) input of every policy
	// hook call, one file each, for edge-mcp policy test to replay.
	RecordDir string
	// AuditHook, when set, receives every admin audit record (tests).
	AuditHook func(AuditAdmin)
}

// HealthOptions configure how connected upstreams are checked with MCP ping.
type HealthOptions struct {
	Interval time.Duration // between pings; default 30 s
	Timeout  time.Duration // for one ping; default 10 s
	Misses   int           // consecutive unanswered pings that fail a server; default 3
}

// Gateway is one running edge-mcp instance. Create it with New, then Start;
// Close stops it.
type Gateway struct {
	cfgp atomic.Pointer[config.Config] // the running configuration; replaced on reload
	opts Options
	log  *slog.Logger

	ups      atomic.Pointer[upstreamSet] // replaced whole on reload
	reserved [numKinds]map[string]string

	cat    atomic.Pointer[catalogue]
	events *events
	// senders write forwarded requests upstream.
	senders *workers
	pol     policies
	guard   atomic.Pointer[guard] // admission settings of the running config

	metrics   *metrics.Metrics  // nil: metrics off
	auditLog  *audit.Logger     // nil: no audit log
	tracer    *telemetry.Tracer // nil: tracing off
	validator *schema.Validator // tool arguments against inputSchema
	pins      *pinning.Store    // tool definitions first seen

	reloadMu sync.Mutex // serializes reloads
	owners   sync.Map   // downstream session id → identity name that opened it
	// pinLogged remembers which changed tool definitions were logged.
	pinLogged sync.Map

	mu       sync.Mutex // guards the fields below and upstream.offer
	gen      uint64
	sessions map[*session]struct{}
	subs     map[string]map[*session]struct{} // resource URI → subscribed sessions

	http   *transports.StreamableServer
	sse    *transports.SSEServer
	ws     *transports.WebSocketServer
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New validates cfg against opts and prepares a gateway; nothing is
// connected until Start.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PageSize == 0 {
		opts.PageSize = 1000
	}
	if opts.Health.Interval <= 0 {
		opts.Health.Interval = 30 * time.Second
	}
	if opts.Health.Timeout <= 0 {
		opts.Health.Timeout = 10 * time.Second
	}
	if opts.Health.Misses <= 0 {
		opts.Health.Misses = 3
	}
	g := &Gateway{
		opts: opts, log: opts.Logger, events: &events{log: opts.Logger}, senders: newWorkers(10 * time.Second),
		sessions: make(map[*session]struct{}),
		subs:     make(map[string]map[*session]struct{}),
	}
	g.cfgp.Store(cfg)
	g.reserved[kindTools] = cfg.Reserved.Tools
	g.reserved[kindPrompts] = cfg.Reserved.Prompts
	set := &upstreamSet{byName: make(map[string]*upstream, len(cfg.Servers))}
	for _, sc := range cfg.Servers {
		u, err := g.newUpstream(sc)
		if err != nil {
			return nil, err
		}
		set.list = append(set.list, u)
		set.byName[sc.Name] = u
	}
	g.ups.Store(set)
	if err := g.openObservability(cfg); err != nil {
		return nil, err
	}
	gd, err := newGuard(context.Background(), cfg, opts)
	if err != nil {
		g.closeObservability()
		return nil, err
	}
	g.guard.Store(gd)
	if err := g.openPolicies(cfg); err != nil {
		gd.close()
		g.closeObservability()
		return nil, err
	}
	g.events.observe = g.observe
	g.events.wants = func() bool { return g.pol.hooks().Has(policy.HookEvent) }
	g.cat.Store(buildCatalogue(0, set.list, make([]*upstreamLists, len(set.list)), g.reserved, g.opts.PageSize, g.log))
	g.http = transports.NewStreamableServer(g.accept, transports.StreamableServerOptions{
		Logger:         g.log,
		MaxBodyBytes:   cfg.MaxBodyBytes,
		AllowedOrigins: cfg.AllowedOrigins,
		AllowedHosts:   cfg.AllowedHosts,
	})
	g.sse = transports.NewSSEServer(g.accept, transports.SSEServerOptions{
		Logger:         g.log,
		MaxBodyBytes:   cfg.MaxBodyBytes,
		AllowedOrigins: cfg.AllowedOrigins,
		AllowedHosts:   cfg.AllowedHosts,
	})
	g.ws = transports.NewWebSocketServer(g.accept, transports.WebSocketServerOptions{
		Logger:          g.log,
		MaxMessageBytes: max(cfg.MaxBodyBytes, 64<<20),
		AllowedOrigins:  cfg.AllowedOrigins,
		AllowedHosts:    cfg.AllowedHosts,
	})
	return g, nil
}

// upstreamSet is the configured upstreams, in config order. It is immutable:
// a reload builds a new set and swaps it in.
type upstreamSet struct {
	list   []*upstream
	byName map[string]*upstream
}

// config returns the running configuration.
func (g *Gateway) config() *config.Config { return g.cfgp.Load() }

// upstreams returns the current set of upstreams.
func (g *Gateway) upstreams() *upstreamSet { return g.ups.Load() }

// newUpstream prepares (but does not start) the upstream of sc.
func (g *Gateway) newUpstream(sc config.Server) (*upstream, error) {
	t, err := g.transportFor(sc)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", sc.Name, err)
	}
	u := &upstream{
		g: g, name: sc.Name, prefix: sc.Prefix, cfg: sc, orig: sc, transport: t,
		log: g.log.With("server_name", sc.Name), state: StateDisconnected, done: make(chan struct{}),
	}
	if u.cfg.Timeout <= 0 {
		u.cfg.Timeout = 60 * time.Second
	}
	u.health = g.opts.Health
	if sc.HealthInterval > 0 {
		u.health.Interval = sc.HealthInterval
	}
	if sc.HealthTimeout > 0 {
		u.health.Timeout = sc.HealthTimeout
	}
	if sc.HealthMisses > 0 {
		u.health.Misses = sc.HealthMisses
	}
	if sc.TypeInferred && sc.Type == "streamable-http" {
		if _, overridden := g.opts.Transports[sc.Name]; !overridden {
			sse := sc
			sse.Type = "sse"
			if u.fallback, err = g.transportFor(sse); err != nil {
				return nil, fmt.Errorf("server %q: %w", sc.Name, err)
			}
		}
	}
	return u, nil
}

// transportFor picks the client transport for a configured server.
func (g *Gateway) transportFor(sc config.Server) (mcp.Transport, error) {
	if t, ok := g.opts.Transports[sc.Name]; ok {
		return t, nil
	}
	header := http.Header{}
	for k, v := range sc.Headers {
		header.Set(k, v)
	}
	if sc.BearerToken != "" {
		header.Set("Authorization", "Bearer "+sc.BearerToken)
	}
	switch sc.Type {
	case "streamable-http":
		return &transports.StreamableClientTransport{URL: sc.URL, Header: header, Logger: g.log.With("server_name", sc.Name)}, nil
	case "sse":
		return &mcp.SSEClientTransport{Endpoint: sc.URL, HTTPClient: sseHTTPClient(sc, header)}, nil
	case "websocket":
		return &transports.WebSocketClientTransport{URL: sc.URL, Header: header, Logger: g.log.With("server_name", sc.Name)}, nil
	case "stdio":
		env := os.Environ()
		for k, v := range sc.Env {
			env = append(env, k+"="+v)
		}
		return &transports.CommandTransport{Command: sc.Command, Args: sc.Args, Env: env, Dir: sc.Cwd,
			Name: sc.Name, Logger: g.log}, nil
	default:
		return nil, fmt.Errorf("transport type %q is not supported yet", sc.Type)
	}
}

// sseHTTPClient is the HTTP client of a legacy SSE upstream: the configured
// headers on every request, "timeout" bounding the connection and the wait
// for response headers, and "sse_read_timeout" bounding how long the event
// stream may stay silent before it is cut (and the upstream reconnected).
func sseHTTPClient(sc config.Server, header http.Header) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: sc.Timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = sc.Timeout
	return &http.Client{Transport: headerRoundTripper{header: header, next: tr, readTimeout: sc.SSEReadTimeout}}
}

// headerRoundTripper adds configured headers to every upstream request and,
// when readTimeout is set, cuts event streams silent for longer than that.
type headerRoundTripper struct {
	header      http.Header
	next        http.RoundTripper
	readTimeout time.Duration
}

func (h headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	resp, err := h.next.RoundTrip(r)
	if err == nil && h.readTimeout > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = newIdleBody(resp.Body, h.readTimeout)
	}
	return resp, err
}

// idleBody closes a response body that delivers nothing for longer than
// timeout, so a stream whose server went silent fails instead of hanging.
type idleBody struct {
	io.ReadCloser
	timer   *time.Timer
	timeout time.Duration
	expired atomic.Bool
}

func newIdleBody(rc io.ReadCloser, timeout time.Duration) *idleBody {
	b := &idleBody{ReadCloser: rc, timeout: timeout}
	b.timer = time.AfterFunc(timeout, func() {
		b.expired.Store(true)
		rc.Close()
	})
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.timer.Reset(b.timeout)
	}
	if err != nil && b.expired.Load() {
		err = fmt.Errorf("event stream silent for %s (sse_read_timeout): %w", b.timeout, err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}

// Start connects every upstream in the background and returns at once: the
// gateway serves (an empty catalogue, at first) even when every upstream is
// down.
func (g *Gateway) Start(ctx context.Context) {
	g.ctx, g.cancel = context.WithCancel(ctx)
	for _, u := range g.upstreams().list {
		g.startUpstream(u)
	}
}

// startUpstream runs u until the gateway closes or u is stopped.
func (g *Gateway) startUpstream(u *upstream) {
	ctx, cancel := context.WithCancel(g.ctx)
	u.stopRun = cancel
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer close(u.done)
		u.run(ctx)
	}()
}

// WaitReady blocks until every upstream has connected or failed at least
// once, or ctx ends.
func (g *Gateway) WaitReady(ctx context.Context) error {
	for {
		ready := true
		for _, u := range g.upstreams().list {
			u.mu.Lock()
			if u.state == StateConnecting || u.state == StateDisconnected {
				ready = false
			}
			u.mu.Unlock()
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Close disconnects every session and upstream and waits for the gateway's
// goroutines to end.
func (g *Gateway) Close() error {
	err := errors.Join(g.http.Close(), g.sse.Close(), g.ws.Close())
	g.mu.Lock()
	sessions := make([]*session, 0, len(g.sessions))
	for s := range g.sessions {
		sessions = append(sessions, s)
	}
	g.mu.Unlock()
	for _, s := range sessions {
		s.conn.Close()
	}
	if g.cancel != nil {
		g.cancel()
	}
	g.wg.Wait()
	g.senders.close()
	err = errors.Join(err, g.pol.close())
	g.guard.Load().close()
	return errors.Join(err, g.closeObservability())
}

// catalogue returns the current snapshot.
func (g *Gateway) catalogue() *catalogue { return g.cat.Load() }

// setOffer replaces everything upstream u offers (nil: it is gone) and
// publishes a new catalogue snapshot.
func (g *Gateway) setOffer(u *upstream, offer *upstreamLists) {
	g.mu.Lock()
	u.offer = offer
	g.publishLocked()
}

// updateOffer replaces the lists named by kinds of upstream u.
func (g *Gateway) updateOffer(u *upstream, kinds []listKind, fresh *upstreamLists) {
	g.mu.Lock()
	next := &upstreamLists{}
	if cur := u.offer; cur != nil {
		*next = *cur
	}
	for _, k := range kinds {
		next[k] = fresh[k]
	}
	u.offer = next
	g.publishLocked()
}

// publishLocked builds and swaps in a new snapshot, then tells every
// initialized session which lists changed. It unlocks g.mu.
func (g *Gateway) publishLocked() {
	g.gen++
	old := g.cat.Load()
	ups := g.upstreams().list
	offers := make([]*upstreamLists, len(ups))
	for i, u := range ups {
		offers[i] = g.pinOffer(u, u.offer)
	}
	next := buildCatalogue(g.gen, ups, offers, g.reserved, g.opts.PageSize, g.log)
	g.cat.Store(next)
	sessions := make([]*session, 0, len(g.sessions))
	for s := range g.sessions {
		sessions = append(sessions, s)
	}
	g.mu.Unlock()

	var changed []string
	for _, k := range []listKind{kindTools, kindPrompts} {
		if !sameList(old, next, k) {
			changed = append(changed, listKinds[k].changed)
		}
	}
	if !sameList(old, next, kindResources) || !sameList(old, next, kindTemplates) {
		changed = append(changed, listKinds[kindResources].changed)
	}
	for _, s := range sessions {
		for _, m := range changed {
			s.listChanged(m)
		}
	}
}

// accept is called by the server transports for every new client session.
func (g *Gateway) accept(conn transports.Connection) { go g.ServeConn(conn) }

// ServeConn serves one downstream client session over conn (for example
// stdin/stdout) and returns when the session ends. Start must have been
// called.
func (g *Gateway) ServeConn(conn transports.Connection) {
	s := newSession(g, conn)
	if sid := conn.SessionID(); sid != "" {
		g.owners.Store(sid, s.id.Name)
	}
	g.metrics.SessionOpened(s.transport)
	g.mu.Lock()
	g.sessions[s] = struct{}{}
	g.mu.Unlock()
	s.run()
}

func (g *Gateway) removeSession(s *session) {
	if sid := s.conn.SessionID(); sid != "" {
		g.owners.Delete(sid)
	}
	g.metrics.SessionClosed(s.transport)
	g.mu.Lock()
	delete(g.sessions, s)
	var unsub []string
	for uri, set := range g.subs {
		if _, ok := set[s]; ok {
			delete(set, s)
			if len(set) == 0 {
				delete(g.subs, uri)
				unsub = append(unsub, uri)
			}
		}
	}
	g.mu.Unlock()
	for _, uri := range unsub {
		if u := g.catalogue().resource(uri); u != nil {
			if l := u.current(); l != nil {
				go l.call(l.ctx, "resources/unsubscribe", uriParams(uri)) //nolint:errcheck // best effort
			}
		}
	}
}

// anySession returns the most recently active initialized session, for
// upstream requests that belong to no call in flight.
func (g *Gateway) anySession() *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	var best *session
	for s := range g.sessions {
		if !s.initialized.Load() {
			continue
		}
		if best == nil || s.lastActive.Load() > best.lastActive.Load() {
			best = s
		}
	}
	return best
}

// broadcastLog sends a log message that belongs to no call to every session
// whose level admits it.
func (g *Gateway) broadcastLog(params json.RawMessage) {
	g.mu.Lock()
	sessions := make([]*session, 0, len(g.sessions))
	for s := range g.sessions {
		sessions = append(sessions, s)
	}
	g.mu.Unlock()
	for _, s := range sessions {
		s.log(noID, params)
	}
}

// subscribe records that s wants updates for uri and reports whether it is
// the first subscriber (so the upstream must be told).
func (g *Gateway) subscribe(s *session, uri string) (first bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	set := g.subs[uri]
	if set == nil {
		set = make(map[*session]struct{})
		g.subs[uri] = set
	}
	first = len(set) == 0
	set[s] = struct{}{}
	return first
}

// unsubscribe removes s from uri's subscribers and reports whether it was
// the last one.
func (g *Gateway) unsubscribe(s *session, uri string) (last bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	set := g.subs[uri]
	if _, ok := set[s]; !ok {
		return false
	}
	delete(set, s)
	if len(set) == 0 {
		delete(g.subs, uri)
		return true
	}
	return false
}

// resourceUpdated forwards notifications/resources/updated to the sessions
// subscribed to uri.
func (g *Gateway) resourceUpdated(u *upstream, uri string, params json.RawMessage) {
	g.mu.Lock()
	var targets []*session
	for s := range g.subs[uri] {
		targets = append(targets, s)
	}
	g.mu.Unlock()
	for _, s := range targets {
		s.notify(noID, "notifications/resources/updated", params)
	}
}

func uriParams(uri string) json.RawMessage {
	b, _ := json.Marshal(struct {
		URI string `json:"uri"`
	}{uri})
	return b
}

// ServerStatus is one upstream's entry in the status document.
type ServerStatus struct {
	Name            string    `json:"name"`
	Transport       string    `json:"transport"`
	State           State     `json:"state"`
	ProtocolVersion string    `json:"protocol_version,omitempty"`
	Tools           int       `json:"tools"`
	Prompts         int       `json:"prompts"`
	Resources       int       `json:"resources"`
	Templates       int       `json:"resource_templates"`
	LastHealthCheck time.Time `json:"last_health_check,omitzero"`
	Retries         int       `json:"retries"`
	NextRetry       time.Time `json:"next_retry,omitzero"`
	LastError       string    `json:"last_error,omitempty"`
}

// Status reports every upstream, in config order.
func (g *Gateway) Status() []ServerStatus {
	ups := g.upstreams().list
	g.mu.Lock()
	offers := make([]*upstreamLists, len(ups))
	for i, u := range ups {
		offers[i] = u.offer
	}
	g.mu.Unlock()
	out := make([]ServerStatus, 0, len(ups))
	for i, u := range ups {
		u.mu.Lock()
		st := ServerStatus{Name: u.name, Transport: u.cfg.Type, State: u.state, Retries: u.retries, LastError: u.lastErr, LastHealthCheck: u.lastHealth}
		if u.state == StateFailed {
			st.NextRetry = u.nextRetry
		}
		u.mu.Unlock()
		if l := u.current(); l != nil {
			st.ProtocolVersion = l.protocolVersion
		}
		if o := offers[i]; o != nil {
			st.Tools, st.Prompts, st.Resources, st.Templates = len(o[kindTools]), len(o[kindPrompts]), len(o[kindResources]), len(o[kindTemplates])
		}
		out = append(out, st)
	}
	return out
}

// PolicyStatus is one policy module's entry in the status document.
type PolicyStatus struct {
	Name       string `json:"name"`
	Digest     string `json:"digest"`
	ABIVersion string `json:"abi_version"`
	Healthy    bool   `json:"healthy"`
	Calls      uint64 `json:"calls"`
	Failures   uint64 `json:"failures"`
	Instances  int64  `json:"instances"`
	LastError  string `json:"last_error,omitempty"`
}

// PolicyStatus reports every attached policy module, in chain order.
func (g *Gateway) PolicyStatus() []PolicyStatus {
	var out []PolicyStatus
	for _, st := range g.pol.stats() {
		out = append(out, PolicyStatus{Name: st.Name, Digest: st.Digest, ABIVersion: st.ABIVersion, Healthy: st.Healthy,
			Calls: st.Calls, Failures: st.Failures, Instances: st.Instances, LastError: st.LastError})
	}
	return out
}

func (g *Gateway) serveStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Servers  []ServerStatus `json:"servers"`
		Policies []PolicyStatus `json:"policies,omitempty"`
	}{g.Status(), g.PolicyStatus()})
}

// errNotConnected is the error for calls routed to an upstream that is down.
var errNotConnected = errors.New("not connected")
