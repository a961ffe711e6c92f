package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

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

// Listens are the listens a 2026-07-28 link holds open, by URI. The zero
// value is ready to use; it is safe for concurrent use and lives as long
// as its link.
type Listens struct {
	mu sync.Mutex
	m  map[string]*resourceListen
}

// resourceListen is one open subscriptions/listen for a URI.
type resourceListen struct {
	cancel context.CancelFunc
	acked  chan struct{} // closed on the upstream's acknowledgement
	once   sync.Once
}

// Caller sends a request on a link and waits for its answer.
type Caller func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)

// Subscribe makes sure a listen for uri is open on the link (whose
// context is lctx and whose requests call sends), and waits for its
// acknowledgement at most until ctx ends.
func (ls *Listens) Subscribe(ctx, lctx context.Context, call Caller, log *slog.Logger, uri string) error {
	rl, ended, err := ls.open(lctx, call, log, uri)
	if err != nil || rl == nil {
		return err
	}
	select {
	case <-rl.acked:
		return nil
	case err := <-ended:
		return fmt.Errorf("subscriptions/listen for %s: %w", uri, err)
	case <-ctx.Done():
		ls.Unsubscribe(uri)
		return fmt.Errorf("subscriptions/listen for %s: no acknowledgement: %w", uri, ctx.Err())
	}
}

// open starts the listen for uri unless one is open (then rl is nil);
// ended gets the request's end.
func (ls *Listens) open(lctx context.Context, call Caller, log *slog.Logger, uri string) (rl *resourceListen, ended <-chan error, err error) {
	params, err := json.Marshal(map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{uri}}})
	if err != nil {
		return nil, nil, fmt.Errorf("subscriptions/listen params: %w", err)
	}
	ls.mu.Lock()
	if ls.m == nil {
		ls.m = map[string]*resourceListen{}
	}
	if _, open := ls.m[uri]; open {
		ls.mu.Unlock()
		return nil, nil, nil
	}
	ctx, cancel := context.WithCancel(lctx)
	rl = &resourceListen{cancel: cancel, acked: make(chan struct{})}
	ls.m[uri] = rl
	ls.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := call(ctx, "subscriptions/listen", params)
		if err == nil {
			err = fmt.Errorf("the server ended the request")
		}
		ls.mu.Lock()
		if ls.m[uri] == rl {
			delete(ls.m, uri)
		}
		ls.mu.Unlock()
		cancel()
		if ctx.Err() == nil {
			log.Warn("subscriptions/listen for a resource ended: its updates are not followed", "uri", uri, "err", err)
		}
		done <- err
	}()
	return rl, done, nil
}

// Unsubscribe ends the listen for uri.
func (ls *Listens) Unsubscribe(uri string) {
	ls.mu.Lock()
	rl := ls.m[uri]
	delete(ls.m, uri)
	ls.mu.Unlock()
	if rl != nil {
		rl.cancel()
	}
}

// Acknowledged takes an upstream's notifications/subscriptions/
// acknowledged: the listens of the URIs it names are established.
func (ls *Listens) Acknowledged(params json.RawMessage) {
	n, _, _ := wire.Field(params, "notifications")
	var ack struct {
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	}
	if json.Unmarshal(n, &ack) != nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, uri := range ack.ResourceSubscriptions {
		if rl := ls.m[uri]; rl != nil {
			rl.once.Do(func() { close(rl.acked) })
		}
	}
}
