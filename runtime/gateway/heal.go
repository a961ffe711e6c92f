package gateway

import (
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/runtime/reconnect"
)

// This file heals an upstream quickly while calls want it: a call of a
// disconnected server's tool or prompt asks run for a reconnection attempt
// now (at most one in flight, at most one every reconnect.RetryFloor) and waits for
// it, up to reconnect_wait (at most the call's timeout), before it fails
// with the reason. Servers nobody calls keep the backoff with jitter.

// reconnectWait is how long a call to u waits for a reconnection: its
// reconnect_wait, at most the call's timeout (runtime/reconnect).
func (u *upstream) reconnectWait(timeout time.Duration) time.Duration {
	return reconnect.Wait(u.cfg.ReconnectWait, timeout, u.cfg.Timeout)
}

// retryNamed is notFound's answer for a tool or prompt whose server is
// disconnected: wait for the server to come back, then route the call
// again (once); if it does not, answer that it is unavailable, and why.
// It runs on its own goroutine: the session's read loop does not wait.
func (s *session) retryNamed(req *jsonrpc.Request, k listKind, it *item) {
	timeout := time.Duration(0)
	if k == kindTools {
		timeout = s.g.guard.Load().Settings(it.Up.name, it.Exposed).Timeout
	}
	err := it.Up.keep.Await(s.ctx, it.Up.reconnectWait(timeout), it.Up.done)
	if err != nil {
		notFound{s}.serverUnavailable(req, k, it, err)
		return
	}
	routing{s}.routeNamed(req, k, false)
}
