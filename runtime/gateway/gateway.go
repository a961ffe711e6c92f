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
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/console"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
	"github.com/edge-mcp/edge-mcp/runtime/interceptchain"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/internal/schema"
	"github.com/edge-mcp/edge-mcp/internal/telemetry"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/dial"
	"github.com/edge-mcp/edge-mcp/runtime/observe"
	"github.com/edge-mcp/edge-mcp/runtime/pins"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
	"github.com/edge-mcp/edge-mcp/runtime/reconnect"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
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
type HealthOptions = reconnect.Health

// Gateway is one running edge-mcp instance. Create it with New, then Start;
// Close stops it.
type Gateway struct {
	cfgp atomic.Pointer[config.Config] // the running configuration; replaced on reload
	opts Options
	log  *slog.Logger

	route *router // catalogue, upstreams, sessions, subscriptions
	// tail is what the operator console sees as the gateway runs (console.go).
	tail   *console.Tail
	events *eventBus
	// senders write forwarded requests upstream.
	senders *workers
	pol     policyset.Set
	guard   atomic.Pointer[guard] // admission settings of the running config
	// icept is the interceptor chain of the running config (stage_intercept.go); nil without one.
	icept interceptState

	// bridge parks 2025 upstreams' requests for 2026-07-28 clients (bridge.go).
	bridge *bridge.Bridge
	// fleet is this replica's membership of its fleet (runtime/fleet,
	// fleet.go); nil without a cluster section.
	fleet *fleet.Fleet
	// fleetSess carries bridged calls' retries between replicas
	// (bridge_fleet.go); nil outside a fleet.
	fleetSess atomic.Pointer[fleetSessions]

	metrics   *metrics.Metrics  // nil: metrics off
	auditLog  *audit.Logger     // nil: no audit log
	tracer    *telemetry.Tracer // nil: tracing off
	validator *schema.Validator // tool arguments against inputSchema
	pins      *pinning.Store    // tool definitions first seen
	oauth     *oauth.Manager    // upstream OAuth: handlers, tokens, pending authorizations (oauth.go)

	reloadMu sync.Mutex  // serializes reloads
	draining atomic.Bool // Drain was called: no new sessions
	owners   sync.Map    // downstream session id → *sessionOwner
	// skew moves the clock that session token expiry is checked against
	// (tests: a TTL of at least a minute without waiting for it).
	skew atomic.Int64
	// pinGate withholds tools whose definitions changed since pinned
	// (runtime/pins, pins.go).
	pinGate *pins.Gate

	// budget bounds the upstream bytes being read, gateway-wide.
	budget *transports.ByteBudget
	// clientMem bounds what clients make the gateway hold (clientmem.go).
	clientMem *budget.Pool
	// door is the Origin/Host guard of every HTTP surface.
	// virt is the virtual servers of the running configuration.
	virt   atomic.Pointer[virtual.Set]
	door   *transports.Guard
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
	tail := console.NewTail()
	opts.Logger = slog.New(tail.LogHandler(opts.Logger.Handler()))
	g := &Gateway{budget: dial.Budget(cfg.Limits), clientMem: clientMemory(cfg.Limits), tail: tail,
		opts: opts, log: opts.Logger, events: newEventBus(opts.Logger), senders: newWorkers(10 * time.Second),
	}
	g.cfgp.Store(cfg)
	virt, err := virtual.NewSet(cfg.VirtualServers, nil)
	if err != nil {
		return nil, fmt.Errorf("virtual servers: %w", err)
	}
	g.virt.Store(virt)
	fl, err := fleet.New(cfg, g.log)
	if err != nil {
		return nil, err
	}
	g.fleet = fl
	bridge, err := newBridge(g, cfg.Cluster)
	if err != nil {
		return nil, err
	}
	g.bridge = bridge
	if err := oauth.CheckFleetKey(cfg); err != nil {
		return nil, err
	}
	if g.oauth, err = oauth.Open(cfg, cfg.StateDirUnder(g.opts.StateDir), g.log, ""); err != nil {
		return nil, err
	}
	set := &upstreamSet{byName: make(map[string]*upstream, len(cfg.Servers))}
	for _, sc := range cfg.Servers {
		u, err := g.newUpstream(sc)
		if err != nil {
			return nil, err
		}
		set.list = append(set.list, u)
		set.byName[sc.Name] = u
	}
	g.route = newRouter(g.log, opts.PageSize, set, reservedOf(cfg))
	obs, err := observe.Open(cfg, g.log, g.clientMem.Stats, cfg.StateDirUnder(g.opts.StateDir))
	if err != nil {
		return nil, err
	}
	g.metrics, g.auditLog, g.tracer, g.validator, g.pins = obs.Metrics, obs.AuditLog, obs.Tracer, obs.Validator, obs.Pins
	g.pinGate = pins.New(g.pins, g.fleet, func() bool { return g.config().Pinning.Mode != "flag" }, func() { g.route.publish(nil) }, g.log)
	g.route.pin = pinTools(g.pinGate)
	gd, err := newGuard(context.Background(), cfg, opts)
	if err != nil {
		obs.Close()
		return nil, err
	}
	shareLimits(g.fleet, gd, cfg)
	g.guard.Store(gd)
	if err := openPolicies(g, cfg); err != nil {
		gd.Close()
		obs.Close()
		return nil, err
	}
	ics, err := g.newInterceptSet(context.Background(), cfg, g.pol.Current())
	if err != nil {
		g.pol.Close()
		gd.Close()
		obs.Close()
		return nil, err
	}
	g.icept.Store(ics)
	g.metrics.Interceptors(func() *metrics.InterceptorStats { return interceptchain.Metrics(g.InterceptorStatus()) })
	g.events.Observe = policyEvents{g}.observe
	g.events.Wants = func() bool { return g.pol.Hooks().Has(policy.HookEvent) }
	g.door = transports.NewGuard(transports.GuardOptions{AllowedOrigins: cfg.AllowedOrigins, AllowedHosts: cfg.AllowedHosts})
	g.http = transports.NewStreamableServer(g.accept, transports.StreamableServerOptions{
		Logger:          g.log,
		MaxBodyBytes:    cfg.MaxBodyBytes,
		AllowedOrigins:  cfg.AllowedOrigins,
		AllowedHosts:    cfg.AllowedHosts,
		BodyReadTimeout: cfg.Limits.BodyReadTimeout,
		EventStoreSize:  cfg.Limits.ResumeEvents,
		Without2026:     cfg.Protocol2026 != nil && !*cfg.Protocol2026,
		Fleet:           g.fleet.Hooks(),
		EventIDPrefix:   fleet.EventPrefix(cfg),
		Budget:          g.accountOf,
	})
	g.sse = transports.NewSSEServer(g.accept, transports.SSEServerOptions{
		Logger:          g.log,
		MaxBodyBytes:    cfg.MaxBodyBytes,
		AllowedOrigins:  cfg.AllowedOrigins,
		AllowedHosts:    cfg.AllowedHosts,
		BodyReadTimeout: cfg.Limits.BodyReadTimeout,
		Budget:          g.accountOf,
	})
	g.ws = transports.NewWebSocketServer(g.accept, transports.WebSocketServerOptions{
		Logger:             g.log,
		MaxMessageBytes:    max(cfg.MaxBodyBytes, 64<<20),
		MessageReadTimeout: cfg.Limits.BodyReadTimeout,
		AllowedOrigins:     cfg.AllowedOrigins,
		AllowedHosts:       cfg.AllowedHosts,
		Budget:             g.accountOf,
	})
	return g, nil
}

// reservedOf returns the names cfg reserves, by list kind.
func reservedOf(cfg *config.Config) (r [numKinds]map[string]string) {
	r[kindTools] = cfg.Reserved.Tools
	r[kindPrompts] = cfg.Reserved.Prompts
	return r
}

// config returns the running configuration.
func (g *Gateway) config() *config.Config { return g.cfgp.Load() }

// Start connects every upstream in the background and returns at once: the
// gateway serves (an empty catalogue, at first) even when every upstream is
// down.
func (g *Gateway) Start(ctx context.Context) {
	g.ctx, g.cancel = context.WithCancel(ctx)
	if err := g.fleet.Join(g.ctx, fleetHost(g)); err != nil {
		g.log.Error("cluster: serving as a single replica", "err", err)
	}
	for _, u := range g.route.upstreams().list {
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
		for _, u := range g.route.upstreams().list {
			if st := u.keep.State(); st == StateConnecting || st == StateDisconnected {
				ready = false
			}
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

// Drain begins a graceful stop: from now on a request that would open a new
// client session is answered 503 (with Retry-After, so clients and load
// balancers go elsewhere), and Drain waits, until ctx ends, for the calls
// in flight to be answered. Sessions stay open meanwhile; Close ends them.
func (g *Gateway) Drain(ctx context.Context) error {
	g.draining.Store(true)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n := g.inFlight()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d calls still in flight: %w", n, ctx.Err())
		case <-tick.C:
		}
	}
}

// inFlight counts the client calls waiting on an upstream.
func (g *Gateway) inFlight() int {
	n := 0
	for _, u := range g.route.upstreams().list {
		n += u.forwarded()
	}
	return n
}

// Close disconnects every session and upstream and waits for the gateway's
// goroutines to end.
func (g *Gateway) Close() error {
	err := errors.Join(g.http.Close(), g.sse.Close(), g.ws.Close())
	for _, s := range g.route.allSessions() {
		s.conn.Close()
	}
	if g.cancel != nil {
		g.cancel()
	}
	g.wg.Wait()
	g.route.relists.Wait() // their links are closed: each ends at once
	g.fleet.Close()
	g.senders.close()
	g.oauth.Close()
	if set := g.icept.Swap(nil); set != nil {
		err = errors.Join(err, set.Close())
	}
	err = errors.Join(err, g.pol.Close())
	g.guard.Load().Close()
	return errors.Join(err, observe.Observers{AuditLog: g.auditLog, Tracer: g.tracer}.Close())
}

// accept is called by the server transports for every new client session.
// The one request of a 2026-07-28 POST is served at once (serveOne).
func (g *Gateway) accept(conn transports.Connection) {
	if one, ok := conn.(transports.OneRequest); ok {
		g.serveOne(one)
		return
	}
	go g.ServeConn(conn)
}

// serveOne serves a one-request connection (2026-07-28 over streamable
// HTTP) without a read loop: its session is the ordinary one, so admission,
// routing, policies and results take the same path as any session's, but
// the request is dispatched on the caller's goroutine (dispatch does not
// block: slow stages run on their own goroutines, as for a session's read
// loop; subscriptions/listen, which calls upstream first, gets one) and the
// session closes when the connection does.
func (g *Gateway) serveOne(conn transports.OneRequest) {
	s := newSession(g, conn)
	g.metrics.SessionOpened(s.transport)
	g.route.addSession(s)
	conn.OnClose(s.close)
	req := conn.TakeRequest()
	if req == nil {
		conn.Close()
		return
	}
	s.lastActive.Store(time.Now().UnixNano())
	if req.Method == "subscriptions/listen" {
		// It subscribes upstream before it answers: off the POST's
		// goroutine, so the stream is served (and its end noticed) meanwhile.
		go s.handleCall(req)
		return
	}
	s.handleCall(req)
}

// ServeConn serves one downstream client session over conn (for example
// stdin/stdout) and returns when the session ends. Start must have been
// called.
func (g *Gateway) ServeConn(conn transports.Connection) {
	s := newSession(g, conn)
	if sid := conn.SessionID(); sid != "" {
		g.owners.Store(sid, &sessionOwner{name: s.id.Name, expires: g.fleet.TokenExpiry(sid), s: s})
	}
	g.fleet.Track(fleetSession{s})
	g.metrics.SessionOpened(s.transport)
	g.route.addSession(s)
	s.run()
}

func (g *Gateway) removeSession(s *session) {
	if sid := s.conn.SessionID(); sid != "" {
		g.owners.Delete(sid)
	}
	g.fleet.Untrack(fleetSession{s})
	g.metrics.SessionClosed(s.transport)
	for _, uri := range g.route.removeSession(s) {
		if u := g.route.catalogue().Resource(uri); u != nil {
			if l := u.current(); l != nil {
				l.unsubscribeResource(uri) // best effort
			}
		}
	}
}

func uriParams(uri string) json.RawMessage {
	b, _ := json.Marshal(struct {
		URI string `json:"uri"`
	}{uri})
	return b
}

// errNotConnected is the error for calls routed to an upstream that is down.
var errNotConnected = errors.New("not connected")
