package reconnect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/transports"
)

// State is the connection state of an upstream.
type State string

// Upstream states.
const (
	Disconnected State = "disconnected"
	Connecting   State = "connecting"
	Connected    State = "connected"
	Failed       State = "failed"
	// NeedsAuthorization: the upstream wants a token the gateway does not
	// have (first login, a token that expired and cannot be refreshed, or
	// a 401 challenge from a server without an "oauth" section).
	NeedsAuthorization State = "needs_authorization"
)

const (
	// RetryFloor is the least time between two connection attempts of one
	// upstream while calls wait for it.
	RetryFloor = 250 * time.Millisecond
	// HeldLongEnough is how long a connection must have held for the
	// backoff to start over at retry_initial when it fails.
	HeldLongEnough = 10 * time.Second
	// DefaultWait is reconnect_wait's default.
	DefaultWait = 2 * time.Second
)

// ErrStillDown is why a call that waited for its server failed.
var ErrStillDown = errors.New("still disconnected")

// Server is what a Keeper keeps connected; the gateway implements it for
// each upstream. Run calls its methods on Run's goroutine.
type Server interface {
	// Authorize holds the attempt while the server waits for a person to
	// authorize it, and reports whether it may be dialed (false: the
	// context ended).
	Authorize(ctx context.Context) bool
	// Serve connects and serves until the connection ends or ctx does,
	// and returns why it ended. Once connected it calls Keeper.Connected.
	Serve(ctx context.Context) error
	// Failed is told that an attempt failed (wasUp: after it had
	// connected) and reports whether the server wants authorization.
	Failed(wasUp bool) (needsAuthorization bool)
	// Live reports whether the server has a live connection now.
	Live() bool
}

// Keeper keeps one Server connected and holds its connection state.
type Keeper struct {
	srv      Server
	log      *slog.Logger
	min, max time.Duration

	mu         sync.Mutex // guards the fields below
	state      State
	lastErr    string
	retries    int
	nextRetry  time.Time
	lastHealth time.Time
	upSince    time.Time // when the current attempt connected; zero: it did not

	// Healing: calls that find the server disconnected count themselves
	// in waiting, wake Run for an attempt now and wait for attempt (closed
	// and replaced, under mu, whenever an attempt ends).
	waiting atomic.Int32
	wake    chan struct{}
	attempt chan struct{}
}

// New makes the Keeper of srv, disconnected. The backoff starts at
// initial (default 1 s) and doubles up to most (default 5 min).
func New(srv Server, log *slog.Logger, initial, most time.Duration) *Keeper {
	if initial <= 0 {
		initial = time.Second
	}
	if most <= 0 {
		most = 5 * time.Minute
	}
	return &Keeper{srv: srv, log: log, min: initial, max: max(most, initial), state: Disconnected,
		wake: make(chan struct{}, 1), attempt: make(chan struct{})}
}

// Status is the connection state /status shows.
type Status struct {
	State      State
	Retries    int
	LastErr    string
	NextRetry  time.Time // zero unless Failed
	LastHealth time.Time
}

// Status reports the connection state.
func (k *Keeper) Status() Status {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := Status{State: k.state, Retries: k.retries, LastErr: k.lastErr, LastHealth: k.lastHealth}
	if k.state == Failed {
		st.NextRetry = k.nextRetry
	}
	return st
}

// State is the connection state.
func (k *Keeper) State() State {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state
}

// Retry is the connection state, the next reconnection attempt (zero when
// none is scheduled) and the last error.
func (k *Keeper) Retry() (State, time.Time, string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	state := k.state
	if state == Connected && !k.srv.Live() {
		state = Disconnected // the link just failed; Run has not noted it yet
	}
	return state, k.nextRetry, k.lastErr
}

// Set sets the state, and the last error when err is not nil.
func (k *Keeper) Set(s State, err error) {
	k.mu.Lock()
	k.state = s
	if err != nil {
		k.lastErr = err.Error()
	}
	k.mu.Unlock()
}

// Connected records that the server is connected now: Serve calls it once
// whoever sees the state may also see what the server offers.
func (k *Keeper) Connected() {
	k.mu.Lock()
	k.state, k.lastErr, k.retries = Connected, "", 0
	k.upSince = time.Now()
	k.attemptedLocked()
	k.mu.Unlock()
}

// checked records a health check.
func (k *Keeper) checked() {
	k.mu.Lock()
	k.lastHealth = time.Now()
	k.mu.Unlock()
}

// Run keeps the server connected until ctx ends, retrying with
// exponential backoff and ±50% jitter. An expired session is
// re-initialized at once. While calls wait for the server (Await) it is
// retried at once, at most every RetryFloor, and the backoff does not
// grow; once a connection held for HeldLongEnough, the backoff starts
// over.
func (k *Keeper) Run(ctx context.Context) {
	backoff := k.min
	for ctx.Err() == nil {
		if !k.srv.Authorize(ctx) {
			k.Set(Disconnected, nil)
			return
		}
		k.mu.Lock()
		k.state, k.upSince = Connecting, time.Time{}
		k.mu.Unlock()
		started := time.Now()
		err := k.srv.Serve(ctx)
		k.mu.Lock()
		upSince := k.upSince
		k.mu.Unlock()
		wasUp := !upSince.IsZero()
		if ctx.Err() != nil {
			k.Set(Disconnected, nil)
			return
		}
		if wasUp && time.Since(upSince) >= HeldLongEnough {
			backoff = k.min // the connection held: start over
		}
		delay := time.Duration(float64(backoff) * (0.5 + rand.Float64()))
		if wasUp && errors.Is(err, transports.ErrSessionExpired) {
			delay = 0 // the server forgot the session: re-initialize now
		}
		demand := k.waiting.Load() > 0
		if demand {
			delay = max(0, time.Until(started.Add(RetryFloor))) // calls wait: try again soon
		}
		state := Failed
		if k.srv.Failed(wasUp) {
			state = NeedsAuthorization
		}
		k.mu.Lock()
		k.state = state
		k.lastErr = err.Error()
		k.retries++
		k.nextRetry = time.Now().Add(delay)
		k.attemptedLocked()
		k.mu.Unlock()
		level := slog.LevelWarn
		if demand && !wasUp {
			level = slog.LevelDebug // every RetryFloor while calls wait: the first failure was logged
		}
		msg := "upstream unavailable; retrying"
		if state == NeedsAuthorization {
			msg = "upstream needs authorization; retrying"
		}
		k.log.Log(ctx, level, msg, "err", err, "retry_in", delay.Round(time.Millisecond))
		if k.sleep(ctx, delay, started) || demand {
			continue // calls wait: the backoff stays short
		}
		if delay > 0 {
			backoff = min(backoff*2, k.max)
		}
	}
}

// sleep waits delay before the next connection attempt, or less when a
// call wakes it, though never less than RetryFloor after the attempt
// that started at started. It reports whether a call woke it.
func (k *Keeper) sleep(ctx context.Context, delay time.Duration, started time.Time) (woken bool) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	case <-k.wake:
	}
	if floor := time.Until(started.Add(RetryFloor)); floor > 0 {
		t.Reset(floor)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return true
}

// attemptedLocked tells the calls waiting that a connection attempt ended
// (connected or failed). Called with mu held.
func (k *Keeper) attemptedLocked() {
	if k.attempt != nil {
		close(k.attempt)
	}
	k.attempt = make(chan struct{})
}

// kick asks Run for a connection attempt now (a call waits).
func (k *Keeper) kick() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Await asks Run for a reconnection and waits up to wait for the server
// to be connected again, or until removed is closed (the upstream is gone
// for good). It returns nil once it is connected, else why not.
func (k *Keeper) Await(ctx context.Context, wait time.Duration, removed <-chan struct{}) error {
	k.waiting.Add(1)
	defer k.waiting.Add(-1)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		k.mu.Lock()
		ok, state, ch := k.state == Connected && k.srv.Live(), k.state, k.attempt
		k.mu.Unlock()
		switch {
		case ok:
			return nil
		case state == NeedsAuthorization:
			return errors.New("it needs authorization")
		}
		k.kick()
		select {
		case <-ch:
		case <-removed:
			return errors.New("it was removed")
		case <-t.C:
			return fmt.Errorf("%w after waiting %s for a reconnection", ErrStillDown, wait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Wait is how long a call waits for a reconnection: reconnectWait
// (default DefaultWait), at most the call's timeout (when zero: the
// server's).
func Wait(reconnectWait, timeout, serverTimeout time.Duration) time.Duration {
	if reconnectWait <= 0 {
		reconnectWait = DefaultWait
	}
	if timeout <= 0 {
		timeout = serverTimeout
	}
	return min(reconnectWait, timeout)
}
