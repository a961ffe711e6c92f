package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// This file heals an upstream quickly while calls want it: a call of a
// disconnected server's tool or prompt asks run for a reconnection attempt
// now (at most one in flight, at most one every retryFloor) and waits for
// it, up to reconnect_wait (at most the call's timeout), before it fails
// with the reason. Servers nobody calls keep the backoff with jitter.

const (
	// retryFloor is the least time between two connection attempts of one
	// upstream while calls wait for it.
	retryFloor = 250 * time.Millisecond
	// heldLongEnough is how long a connection must have held for the
	// backoff to start over at retry_initial when it fails.
	heldLongEnough = 10 * time.Second
	// defaultReconnectWait is reconnect_wait's default.
	defaultReconnectWait = 2 * time.Second
)

// errStillDown is why a call that waited for its server failed.
var errStillDown = errors.New("still disconnected")

// attemptedLocked tells the calls waiting for u that a connection attempt ended
// (connected or failed). Called with u.mu held.
func (u *upstream) attemptedLocked() {
	if u.attempt != nil {
		close(u.attempt)
	}
	u.attempt = make(chan struct{})
}

// kick asks run for a connection attempt now (a call waits).
func (u *upstream) kick() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// connectedLocked reports whether u serves calls: a live link whose offer is in
// the catalogue.
func (u *upstream) connectedLocked() bool {
	return u.state == StateConnected && u.current() != nil
}

// awaitConnected asks run for a reconnection and waits up to wait for u
// to be connected again. It returns nil once it is, else why not.
func (u *upstream) awaitConnected(ctx context.Context, wait time.Duration) error {
	u.waiting.Add(1)
	defer u.waiting.Add(-1)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		u.mu.Lock()
		ok, state, ch := u.connectedLocked(), u.state, u.attempt
		u.mu.Unlock()
		switch {
		case ok:
			return nil
		case state == StateNeedsAuthorization:
			return errors.New("it needs authorization")
		}
		u.kick()
		select {
		case <-ch:
		case <-u.done:
			return errors.New("it was removed")
		case <-t.C:
			return fmt.Errorf("%w after waiting %s for a reconnection", errStillDown, wait)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reconnectWait is how long a call to u waits for a reconnection: its
// reconnect_wait, at most the call's timeout.
func (u *upstream) reconnectWait(timeout time.Duration) time.Duration {
	w := u.cfg.ReconnectWait
	if w <= 0 {
		w = defaultReconnectWait
	}
	if timeout <= 0 {
		timeout = u.cfg.Timeout
	}
	return min(w, timeout)
}

// retryNamed is notFound's answer for a tool or prompt whose server is
// disconnected: wait for the server to come back, then route the call
// again (once); if it does not, answer that it is unavailable, and why.
// It runs on its own goroutine: the session's read loop does not wait.
func (s *session) retryNamed(req *jsonrpc.Request, k listKind, it *item) {
	timeout := time.Duration(0)
	if k == kindTools {
		timeout = s.g.guard.Load().Settings(it.up.name, it.exposed).Timeout
	}
	err := it.up.awaitConnected(s.ctx, it.up.reconnectWait(timeout))
	if err != nil {
		notFound{s}.serverUnavailable(req, k, it, err)
		return
	}
	routing{s}.routeNamed(req, k, false)
}
