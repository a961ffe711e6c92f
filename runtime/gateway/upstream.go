package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/dial"
	"github.com/edge-mcp/edge-mcp/runtime/probe"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is an upstream server's lifecycle: it dials the server's
// transport (streamable HTTP, legacy SSE, WebSocket or stdio), keeps one
// link to it, reconnects with backoff when it fails, and reports its state.

// upstreamProtocolVersion is the version edge-mcp asks upstreams for in
// initialize: when the server refuses server/discover (probe.go), when the
// configuration pins it, and over legacy SSE.
const upstreamProtocolVersion = probe.Version2025

// knownProtocolVersions are the MCP revisions edge-mcp speaks, oldest first.
var knownProtocolVersions = probe.Known

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

	stopRun func()         // ends run; set by Gateway.startUpstream
	done    chan struct{}  // closed when run has returned
	offer   *upstreamLists // what it offers; guarded by the router's mu

	mu         sync.Mutex // guards the fields below
	state      State
	lastErr    string
	retries    int
	nextRetry  time.Time
	lastHealth time.Time
	probed     string // the revision the shared link speaks, once connected (probe.go)
	pinned     string // 2025-11-25 once the server went away on the probe

	// Healing (heal.go): calls that find u disconnected count themselves
	// in waiting, wake run for an attempt now and wait for attempt (closed
	// and replaced, under mu, whenever an attempt ends).
	waiting atomic.Int32
	wake    chan struct{}
	attempt chan struct{}

	refreshMu sync.Mutex // serializes catalogue refreshes of this upstream

	hints [numKinds]atomic.Pointer[bridge.ListHint] // the caching hints of its lists (runtime/bridge)
	// hintRefresh is set while a refresh for an expired hint runs.
	hintRefresh atomic.Bool
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
// session is re-initialized at once. While calls wait for the server
// (heal.go) it is retried at once, at most every retryFloor, and the
// backoff does not grow; once a connection held for heldLongEnough, the
// backoff starts over.
func (u *upstream) run(ctx context.Context) {
	u.clients.Start(ctx)
	defer u.clients.Stop()
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
		if !u.awaitAuthorization(ctx) {
			u.setState(StateDisconnected, nil)
			return
		}
		u.setState(StateConnecting, nil)
		started := time.Now()
		upSince, err := u.serveOnce(ctx)
		wasUp := !upSince.IsZero()
		if ctx.Err() != nil {
			u.setState(StateDisconnected, nil)
			return
		}
		if wasUp && time.Since(upSince) >= heldLongEnough {
			backoff = minBackoff // the connection held: start over
		}
		delay := time.Duration(float64(backoff) * (0.5 + rand.Float64()))
		if wasUp {
			u.g.metrics.UpstreamReconnect(u.name)
		}
		if wasUp && errors.Is(err, transports.ErrSessionExpired) {
			delay = 0 // the server forgot the session: re-initialize now
		}
		demand := u.waiting.Load() > 0
		if demand {
			delay = max(0, time.Until(started.Add(retryFloor))) // calls wait: try again soon
		}
		state := StateFailed
		if _, needs := u.authorizationState(); needs {
			state = StateNeedsAuthorization
		}
		u.g.metrics.UpstreamNeedsAuthorization(u.name, state == StateNeedsAuthorization)
		u.mu.Lock()
		u.state = state
		u.lastErr = err.Error()
		u.retries++
		u.nextRetry = time.Now().Add(delay)
		u.attemptedLocked()
		u.mu.Unlock()
		level := slog.LevelWarn
		if demand && !wasUp {
			level = slog.LevelDebug // every retryFloor while calls wait: the first failure was logged
		}
		msg := "upstream unavailable; retrying"
		if state == StateNeedsAuthorization {
			msg = "upstream needs authorization; retrying"
		}
		u.log.Log(ctx, level, msg, "err", err, "retry_in", delay.Round(time.Millisecond))
		if u.sleep(ctx, delay, started) || demand {
			continue // calls wait: the backoff stays short
		}
		if delay > 0 {
			backoff = min(backoff*2, maxBackoff)
		}
	}
}

// sleep waits delay before the next connection attempt, or less when a
// call wakes it, though never less than retryFloor after the attempt
// that started at started. It reports whether a call woke it.
func (u *upstream) sleep(ctx context.Context, delay time.Duration, started time.Time) (woken bool) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	case <-u.wake:
	}
	if floor := time.Until(started.Add(retryFloor)); floor > 0 {
		t.Reset(floor)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return true
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
// fails or ctx ends. upSince is when the server got connected (zero: it
// did not).
func (u *upstream) serveOnce(ctx context.Context) (upSince time.Time, _ error) {
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
		return time.Time{}, err
	}
	u.mu.Lock()
	transport := u.cfg.Type
	u.mu.Unlock()
	u.cur.Store(l)
	u.g.oauth.Connected(u.name)
	u.g.metrics.UpstreamNeedsAuthorization(u.name, false)
	u.g.metrics.UpstreamUp(u.name, true)
	go l.health(u.health)
	u.g.route.setOffer(u, &offer)
	u.g.events.Emit(slog.LevelInfo, Event{Type: EventServerConnected, Server: u.name, Transport: transport,
		ProtocolVersion: l.protocolVersion, Tools: len(offer[kindTools]), Prompts: len(offer[kindPrompts]),
		Resources: len(offer[kindResources]), Templates: len(offer[kindTemplates])})
	// Connected last: whoever sees the state (WaitReady, /status) also
	// sees the upstream's offer in the catalogue and its event sent.
	u.mu.Lock()
	u.state, u.lastErr, u.retries = StateConnected, "", 0
	u.attemptedLocked()
	u.mu.Unlock()
	upSince = time.Now()

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
	return upSince, reason
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
	if err != nil {
		u.log.Warn("refreshing lists after list_changed", "err", err)
		return
	}
	if u.current() != l {
		return
	}
	u.g.route.updateOffer(u, kinds, &fresh, announce)
}

// errUnreachable marks failures where the server could not be reached at
// all (refused connection, broken stream), as opposed to a slow answer.
var errUnreachable = errors.New("unreachable")

// unreachable marks err with errUnreachable. Its text says "unreachable"
// unless the server did answer, wanting authorization (HTTP 401, or 403
// insufficient_scope): then the message is that, not a word that sends an
// operator looking at the network.
func unreachable(err error) error {
	if oauth.IsNeedsAuthorization(err) {
		return answeredError{err}
	}
	return fmt.Errorf("%w: %w", errUnreachable, err)
}

// answeredError is errUnreachable for the code (errors.Is) with the text of
// the server's answer.
type answeredError struct{ err error }

func (e answeredError) Error() string        { return e.err.Error() }
func (e answeredError) Unwrap() error        { return e.err }
func (e answeredError) Is(target error) bool { return target == errUnreachable }

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
		log: g.log.With("server_name", sc.Name), state: StateDisconnected, done: make(chan struct{}),
		wake: make(chan struct{}, 1), attempt: make(chan struct{}),
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

// transportFor picks the client transport for a configured server: the
// one Options.Transports gives it, else runtime/dial's.
func (g *Gateway) transportFor(sc config.Server) (mcp.Transport, error) {
	if t, ok := g.opts.Transports[sc.Name]; ok {
		return t, nil
	}
	return dial.Transport(sc, dial.Options{Log: g.log, Budget: g.budget, OAuth: g.oauth})
}
