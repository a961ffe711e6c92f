package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/dial"
	"github.com/edge-mcp/edge-mcp/runtime/probe"
	"github.com/edge-mcp/edge-mcp/runtime/reconnect"
)

// This file is an upstream server's lifecycle: it dials the server's
// transport (streamable HTTP, legacy SSE, WebSocket or stdio), keeps one
// link to it, reconnects with backoff when it fails, and reports its state.

// upstreamProtocolVersion is the version edge-mcp asks upstreams for in
// initialize: when the server refuses server/discover (probe.go), when the
// configuration pins it, and over legacy SSE.
const upstreamProtocolVersion = probe.Version2025

// State is the connection state of an upstream.
type State = reconnect.State

// Upstream states.
const (
	StateDisconnected = reconnect.Disconnected
	StateConnecting   = reconnect.Connecting
	StateConnected    = reconnect.Connected
	StateFailed       = reconnect.Failed
)

// upstream is one configured MCP server. It keeps one connection (a link) at
// a time, shared by every downstream session, and replaces it when it fails;
// with "session": "per_client", the shared link serves the catalogue and
// each downstream session's calls go over a link of its own (clients.go).
type upstream struct {
	g         *Gateway
	name      string
	prefix    string
	cfg       config.Server
	orig      config.Server // cfg as configured, to tell whether a reload changed it
	transport mcp.Transport // changed (under mu) only by the fallback, in run
	fallback  mcp.Transport // legacy SSE, tried when streamable HTTP fails for a URL without a type
	health    HealthOptions
	log       *slog.Logger

	cur atomic.Pointer[link]
	// clients are the per-client links when cfg.Session is per_client.
	clients clientLinks

	stopRun func()        // ends run; set by Gateway.startUpstream
	done    chan struct{} // closed when run has returned

	// keep keeps it connected: attempts, backoff, calls waiting for it,
	// its state (runtime/reconnect).
	keep *reconnect.Keeper

	// versions remembers the revisions its links spoke (probe.go).
	versions probe.Memory

	mu sync.Mutex // guards transport, fallback and cfg.Type (the fallback changes them)

	refreshMu sync.Mutex // serializes catalogue refreshes of this upstream

	hints [numKinds]atomic.Pointer[bridge.ListHint] // the caching hints of its lists (runtime/bridge)
	// hintRefresh is set while a refresh for an expired hint runs.
	hintRefresh atomic.Bool
}

// current returns the live link, or nil when the upstream is not connected.
func (u *upstream) current() *link { return u.cur.Load() }

// run keeps the upstream connected until ctx ends (reconnect.Keeper.Run),
// its per-client links open meanwhile.
func (u *upstream) run(ctx context.Context) {
	u.clients.Start(ctx)
	defer u.clients.Stop()
	u.keep.Run(ctx)
}

// keeper implements reconnect.Server for an upstream.
type keeper struct{ *upstream }

func (k keeper) Authorize(ctx context.Context) bool { return k.awaitAuthorization(ctx) }
func (k keeper) Serve(ctx context.Context) error    { return k.serveOnce(ctx) }
func (k keeper) Live() bool                         { return k.current() != nil }

// Failed counts a failed attempt and reports whether the upstream wants
// authorization.
func (k keeper) Failed(wasUp bool) bool {
	if wasUp {
		k.g.metrics.UpstreamReconnect(k.name)
	}
	_, needs := k.authorizationState()
	k.g.metrics.UpstreamNeedsAuthorization(k.name, needs)
	return needs
}

// open connects over t in revision mode, sets up the link and discovers.
func (u *upstream) open(ctx context.Context, t mcp.Transport, mode string) (*link, upstreamLists, error) {
	l, err := u.connect(ctx, t, nil, mode)
	if err != nil {
		return nil, upstreamLists{}, err
	}
	listCtx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	offer, err := l.discover(listCtx, allKinds)
	if err != nil {
		l.close(err)
		<-l.done
		return nil, offer, err
	}
	return l, offer, nil
}

// serveOnce connects, initializes and discovers, then serves until the link
// fails or ctx ends.
func (u *upstream) serveOnce(ctx context.Context) error {
	l, offer, err := u.open(ctx, u.transport, u.versionMode(nil))
	if err != nil && u.fallback != nil && errors.Is(err, errUnreachable) && !oauth.IsNeedsAuthorization(err) && ctx.Err() == nil {
		// A URL without a type: the server may speak only the legacy
		// HTTP+SSE transport (2024-11-05).
		u.log.Info("streamable HTTP failed; trying legacy HTTP+SSE", "err", err)
		if sl, soffer, serr := u.open(ctx, u.fallback, upstreamProtocolVersion); serr == nil {
			u.mu.Lock()
			u.transport, u.fallback = u.fallback, nil // under mu: per-client links read transport
			u.cfg.Type = "sse"
			u.mu.Unlock()
			l, offer, err = sl, soffer, nil
		}
	}
	if err != nil {
		return err
	}
	u.mu.Lock()
	transport := u.cfg.Type
	u.mu.Unlock()
	u.cur.Store(l)
	u.g.oauth.Connected(u.name)
	u.g.metrics.UpstreamNeedsAuthorization(u.name, false)
	u.g.metrics.UpstreamUp(u.name, true)
	go u.keep.Watch(l.ctx, u.health, pinger{l}, l.probeNow)
	u.g.route.setOffer(u, &offer)
	u.g.events.Emit(slog.LevelInfo, Event{Type: EventServerConnected, Server: u.name, Transport: transport,
		ProtocolVersion: l.protocolVersion, Tools: len(offer[kindTools]), Prompts: len(offer[kindPrompts]),
		Resources: len(offer[kindResources]), Templates: len(offer[kindTemplates])})
	// Connected last: whoever sees the state (WaitReady, /status) also
	// sees the upstream's offer in the catalogue and its event sent.
	u.keep.Connected()

	select {
	case <-l.done:
	case <-ctx.Done():
	}
	u.cur.CompareAndSwap(l, nil)
	u.g.metrics.UpstreamUp(u.name, false)
	reason := l.failure()
	l.close(reason)
	<-l.done // closing the connection ends the read loop: it must not outlive the gateway
	u.g.route.setOffer(u, nil)
	level := slog.LevelWarn
	if ctx.Err() != nil {
		level = slog.LevelInfo // shutting down
	}
	u.g.events.Emit(level, Event{Type: EventServerDisconnected, Server: u.name, Transport: transport,
		Reason: reason.Error(), HadSession: l.conn.SessionID() != ""})
	return reason
}

var allKinds = []listKind{kindTools, kindPrompts, kindResources, kindTemplates}

// refresh re-reads the lists named by kinds after a list_changed
// notification and publishes the new offer. The catalogue comes from the
// shared link: a per-client link's notification is ignored.
//
// announce: tell the sessions those lists changed even when they read the
// same (the upstream said they changed).
func (u *upstream) refresh(l *link, kinds []listKind, announce bool) {
	if l.owner != nil {
		return
	}
	u.refreshMu.Lock()
	defer u.refreshMu.Unlock()
	ctx, cancel := context.WithTimeout(l.ctx, u.cfg.Timeout)
	defer cancel()
	fresh, err := l.discover(ctx, kinds)
	if err != nil && l.ctx.Err() == nil { // a closed link's lists are nobody's concern
		u.log.Warn("refreshing lists after list_changed", "err", err)
	}
	if err != nil {
		return
	}
	if u.current() != l {
		return
	}
	u.g.route.updateOffer(u, kinds, &fresh, announce)
}

// errUnreachable marks failures where the server could not be reached at
// all (refused connection, broken stream), as opposed to a slow answer.
var errUnreachable = reconnect.ErrUnreachable

// unreachable marks err with errUnreachable. Its text says "unreachable"
// unless the server did answer, wanting authorization (HTTP 401, or 403
// insufficient_scope): then the message is that, not a word that sends an
// operator looking at the network.
func unreachable(err error) error {
	if oauth.IsNeedsAuthorization(err) {
		return reconnect.Answered{Err: err}
	}
	return fmt.Errorf("%w: %w", errUnreachable, err)
}

// capability of each list kind.
var kindCapability = [numKinds]string{kindTools: "tools", kindPrompts: "prompts", kindResources: "resources", kindTemplates: "resources"}

// newUpstream prepares (but does not start) the upstream of sc.
func (g *Gateway) newUpstream(sc config.Server) (*upstream, error) {
	t, err := g.transportFor(sc)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", sc.Name, err)
	}
	u := &upstream{
		g: g, name: sc.Name, prefix: sc.Prefix, cfg: sc, orig: sc, transport: t,
		log: g.log.With("server_name", sc.Name), done: make(chan struct{}),
	}
	u.keep = reconnect.New(keeper{u}, u.log, sc.RetryInitial, sc.RetryMax)
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

// transportFor picks the client transport for a configured server: the
// one Options.Transports gives it, else runtime/dial's.
func (g *Gateway) transportFor(sc config.Server) (mcp.Transport, error) {
	if t, ok := g.opts.Transports[sc.Name]; ok {
		return t, nil
	}
	return dial.Transport(sc, dial.Options{Log: g.log, Budget: g.budget, OAuth: g.oauth})
}
