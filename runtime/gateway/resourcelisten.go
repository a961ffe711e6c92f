package gateway

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// A session's subscription to a resource of a 2026-07-28 upstream is a
// subscriptions/listen per URI that the link holds open (runtime/bridge's
// listens.go, the link's bridge.Listens).

// subscribeResource subscribes the link to uri's updates: resources/subscribe
// on a 2025 link, a subscriptions/listen on a 2026-07-28 one.
func (l *link) subscribeResource(ctx context.Context, uri string) error {
	if !l.v2026.Load() {
		_, err := l.call(ctx, "resources/subscribe", uriParams(uri))
		return err
	}
	return l.resListens.Subscribe(ctx, l.ctx, l.call, l.u.log, uri)
}

// unsubscribeResource ends the link's subscription to uri: resources/
// unsubscribe on a 2025 link (best effort, in the background), the end of
// the listen on a 2026-07-28 one.
func (l *link) unsubscribeResource(uri string) {
	if !l.v2026.Load() {
		go l.call(l.ctx, "resources/unsubscribe", uriParams(uri)) //nolint:errcheck // best effort
		return
	}
	l.resListens.Unsubscribe(uri)
}

// speaks2026 reports whether u's links speak 2026-07-28 (the shared
// link's probe decides for per-client links too).
func (u *upstream) speaks2026() bool {
	if !u.perClient() {
		l := u.current()
		return l != nil && l.v2026.Load()
	}
	return u.versions.Speaks2026()
}

// subscribe2026 answers the resources/subscribe req of s for uri of u, a
// 2026-07-28 upstream, once the listen for it on the session's link (the
// shared one, or its own for a per_client upstream) is acknowledged.
func (u *upstream) subscribe2026(s *session, req *jsonrpc.Request, uri string, ic *intercept.Chain) {
	ctx, cancel := context.WithTimeout(s.ctx, u.cfg.Timeout)
	defer cancel()
	l, err := u.linkFor(s)
	if err == nil {
		err = l.subscribeResource(ctx, uri)
	}
	if err != nil {
		s.g.route.unsubscribe(s, uri)
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: subscribing to %s on server %q: %v", uri, u.name, err)
		return
	}
	routing{s}.subscribed(req, u.name, uri, ic, func() {
		if s.g.route.unsubscribe(s, uri) {
			l.unsubscribeResource(uri)
		}
	})
}

// unsubscribe2026 ends the listen for uri on the link of s to u.
func (u *upstream) unsubscribe2026(s *session, req *jsonrpc.Request, uri string) {
	if l, err := u.linkFor(s); err == nil {
		l.unsubscribeResource(uri)
	}
	s.reply(req.ID, json.RawMessage(`{}`))
}
