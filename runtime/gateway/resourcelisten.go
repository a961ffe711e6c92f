package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// A 2025 client's resources/subscribe (and a 2026-07-28 client's
// resourceSubscriptions) reach a 2026-07-28 upstream, which has no
// resources/subscribe, as a subscriptions/listen request per URI that the
// shared link holds open while any session is subscribed: the upstream's
// notifications/resources/updated arrive on that request's stream and the
// router hands them to the subscribed sessions as before. The first
// subscriber waits for the upstream's acknowledgement naming the URI; the
// last one leaving cancels the request. A reconnect drops them with the
// link, as it drops a 2025 upstream's subscriptions.

// resourceListens are the listens a link holds open, by URI.
type resourceListens struct {
	mu sync.Mutex
	m  map[string]*resourceListen
}

// resourceListen is one open subscriptions/listen for a URI.
type resourceListen struct {
	cancel context.CancelFunc
	acked  chan struct{} // closed on the upstream's acknowledgement
	once   sync.Once
}

// subscribeResource subscribes the link to uri's updates: resources/subscribe
// on a 2025 link, a subscriptions/listen on a 2026-07-28 one.
func (l *link) subscribeResource(ctx context.Context, uri string) error {
	if !l.v2026.Load() {
		_, err := l.call(ctx, "resources/subscribe", uriParams(uri))
		return err
	}
	rl, ended, err := l.openResourceListen(uri)
	if err != nil || rl == nil {
		return err
	}
	select {
	case <-rl.acked:
		return nil
	case err := <-ended:
		return fmt.Errorf("subscriptions/listen for %s: %w", uri, err)
	case <-ctx.Done():
		l.unsubscribeResource(uri)
		return fmt.Errorf("subscriptions/listen for %s: no acknowledgement: %w", uri, ctx.Err())
	}
}

// openResourceListen starts the listen for uri unless one is open (then
// rl is nil); ended gets the request's end.
func (l *link) openResourceListen(uri string) (rl *resourceListen, ended <-chan error, err error) {
	params, err := json.Marshal(map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{uri}}})
	if err != nil {
		return nil, nil, fmt.Errorf("subscriptions/listen params: %w", err)
	}
	l.resListens.mu.Lock()
	if l.resListens.m == nil {
		l.resListens.m = map[string]*resourceListen{}
	}
	if _, open := l.resListens.m[uri]; open {
		l.resListens.mu.Unlock()
		return nil, nil, nil
	}
	ctx, cancel := context.WithCancel(l.ctx)
	rl = &resourceListen{cancel: cancel, acked: make(chan struct{})}
	l.resListens.m[uri] = rl
	l.resListens.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := l.call(ctx, "subscriptions/listen", params)
		if err == nil {
			err = fmt.Errorf("the server ended the request")
		}
		l.resListens.mu.Lock()
		if l.resListens.m[uri] == rl {
			delete(l.resListens.m, uri)
		}
		l.resListens.mu.Unlock()
		cancel()
		if ctx.Err() == nil {
			l.u.log.Warn("subscriptions/listen for a resource ended: its updates are not followed", "uri", uri, "err", err)
		}
		done <- err
	}()
	return rl, done, nil
}

// unsubscribeResource ends the link's subscription to uri: resources/
// unsubscribe on a 2025 link (best effort, in the background), the end of
// the listen on a 2026-07-28 one.
func (l *link) unsubscribeResource(uri string) {
	if !l.v2026.Load() {
		go l.call(l.ctx, "resources/unsubscribe", uriParams(uri)) //nolint:errcheck // best effort
		return
	}
	l.resListens.mu.Lock()
	rl := l.resListens.m[uri]
	delete(l.resListens.m, uri)
	l.resListens.mu.Unlock()
	if rl != nil {
		rl.cancel()
	}
}

// resourcesAcknowledged takes an upstream's notifications/subscriptions/
// acknowledged: the listens of the URIs it names are established.
func (l *link) resourcesAcknowledged(params json.RawMessage) {
	n, _, _ := wire.Field(params, "notifications")
	var ack struct {
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	}
	if json.Unmarshal(n, &ack) != nil {
		return
	}
	l.resListens.mu.Lock()
	defer l.resListens.mu.Unlock()
	for _, uri := range ack.ResourceSubscriptions {
		if rl := l.resListens.m[uri]; rl != nil {
			rl.once.Do(func() { close(rl.acked) })
		}
	}
}

// speaks2026 reports whether u's links speak 2026-07-28 (the shared
// link's probe decides for per-client links too).
func (u *upstream) speaks2026() bool {
	if !u.perClient() {
		l := u.current()
		return l != nil && l.v2026.Load()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.probed == protocolVersion2026
}

// subscribe2026 answers a client's resources/subscribe for uri of a
// 2026-07-28 upstream once the listen for it on the session's link (the
// shared one, or its own for a per_client upstream) is acknowledged.
func (s *session) subscribe2026(req *jsonrpc.Request, u *upstream, uri string) {
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
	s.reply(req.ID, json.RawMessage(`{}`))
}

// unsubscribe2026 ends the listen for uri on the session's link to u.
func (s *session) unsubscribe2026(req *jsonrpc.Request, u *upstream, uri string) {
	if l, err := u.linkFor(s); err == nil {
		l.unsubscribeResource(uri)
	}
	s.reply(req.ID, json.RawMessage(`{}`))
}

// withoutSubscriptionID drops the upstream's _meta subscriptionId from a
// notification of its listen: it names that connection's request, not
// anything of the client's (a 2026-07-28 listener gets its own id in its
// place). Other params pass unchanged.
func withoutSubscriptionID(params json.RawMessage) json.RawMessage {
	meta, ok, err := wire.Field(params, "_meta")
	if err != nil || !ok {
		return params
	}
	if _, ok, _ := wire.Field(meta, metaSubscriptionID); !ok {
		return params
	}
	meta, err = wire.DeleteField(meta, metaSubscriptionID)
	if err != nil {
		return params
	}
	out, err := wire.SetField(params, "_meta", meta)
	if err != nil {
		return params
	}
	return out
}
