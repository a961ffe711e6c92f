package oauth

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// flight is one authorization in progress: go-sdk's Authorize runs in its
// own goroutine (it outlives the request that started it, bounded by
// Options.PendingTTL) and waits in fetch for the redirect to come back.
type flight struct {
	h        *Handler
	urlReady chan struct{} // closed once url is known
	result   chan callbackResult
	done     chan struct{} // closed when the flight ended; err is set
	cancel   context.CancelFunc
	err      error
	moot     atomic.Bool // cancelled: a token came from the fleet (fleet.go)

	mu      sync.Mutex
	url     string
	state   string
	expires time.Time
}

type callbackResult struct {
	code, state, iss string
	err              error
}

type flightKey struct{}

// join returns the flight in progress or starts one from the failed
// request and its answer.
func (h *Handler) join(req *http.Request, resp *http.Response, stepUp bool) *flight {
	// go-sdk reads only the URL of the request and the status and headers
	// of the answer; the body is the transport's.
	r := &http.Request{Method: req.Method, URL: req.URL, Header: http.Header{}}
	rr := &http.Response{StatusCode: resp.StatusCode, Header: resp.Header.Clone(), Body: io.NopCloser(strings.NewReader("")), Request: r}
	drain(resp)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.flight != nil {
		return h.flight
	}
	f := &flight{h: h, urlReady: make(chan struct{}), result: make(chan callbackResult, 1), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), flightKey{}, f), h.m.opts.PendingTTL)
	f.cancel = cancel
	h.flight, h.stepping = f, stepUp
	go f.run(ctx, r, rr)
	return f
}

func (f *flight) run(ctx context.Context, req *http.Request, resp *http.Response) {
	err := f.h.inner.Authorize(ctx, req, resp)
	f.cancel()
	h := f.h
	f.mu.Lock()
	state := f.state
	f.mu.Unlock()
	h.m.forget(state, f)
	h.mu.Lock()
	if h.flight == f {
		h.flight, h.stepping = nil, false
	}
	f.err = err
	if err == nil {
		h.needs, h.lastErr = false, ""
		close(h.authorized)
		h.authorized = make(chan struct{})
	}
	moot := err != nil && f.moot.Load()
	if err != nil && !moot {
		h.lastErr = "authorization failed: " + f.reason()
	}
	h.mu.Unlock()
	close(f.done)
	if moot {
		h.m.log.Info("pending upstream authorization dropped: a token came from the fleet", "server_name", h.server, "identity", h.identity)
	} else if err != nil {
		h.m.log.Warn("upstream authorization failed", "server_name", h.server, "identity", h.identity, "err", f.reason())
	} else {
		h.m.log.Info("upstream authorized", "server_name", h.server, "identity", h.identity)
	}
}

// reason is the flight's failure as it may be shown.
func (f *flight) reason() string {
	if f.err == nil {
		return ""
	}
	return describe(f.err)
}

// fetch is go-sdk's AuthorizationCodeFetcher: it publishes the URL as
// pending and waits for the redirect.
func (h *Handler) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	f, _ := ctx.Value(flightKey{}).(*flight)
	if f == nil {
		return nil, fmt.Errorf("server %q: authorization outside a flight", h.server)
	}
	u, err := url.Parse(args.URL)
	if err != nil {
		return nil, fmt.Errorf("authorization URL: %w", err)
	}
	state := u.Query().Get("state")
	deadline, _ := ctx.Deadline()
	// Registered (and, in a fleet, its redirects routed here) before the
	// URL shows anywhere.
	h.m.register(state, f)
	f.mu.Lock()
	f.url, f.state, f.expires = args.URL, state, deadline
	f.mu.Unlock()
	h.m.listenLoopback(h.redirect)
	close(f.urlReady)
	who := "an operator"
	if h.identity != "" {
		who = "the identity's user" // asked by the gateway (per_client)
	}
	h.m.log.Info("upstream authorization pending: "+who+" must open the URL", "server_name", h.server, "identity", h.identity, "url", args.URL)
	select {
	case r := <-f.result:
		if r.err != nil {
			return nil, r.err
		}
		return &auth.AuthorizationResult{Code: r.code, State: r.state, Iss: r.iss}, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no answer to the authorization of server %q before it expired", h.server)
	}
}

// pendingURL is the URL a person must open, while one is waiting.
func (f *flight) pendingURL() (string, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.url, f.expires
}

// cancelFlight ends the authorization in progress.
func (h *Handler) cancelFlight() {
	h.mu.Lock()
	f := h.flight
	h.mu.Unlock()
	if f != nil {
		f.cancel()
		<-f.done
	}
}

// probe asks the server, without a token, for its challenge.
func (h *Handler) probe(ctx context.Context) (*http.Request, *http.Response, error) {
	target := h.sc.URL
	method, body := http.MethodPost, []byte(`{"jsonrpc":"2.0","id":0,"method":"ping"}`)
	switch h.sc.Type {
	case "sse":
		method, body = http.MethodGet, nil
	case "websocket":
		method, body = http.MethodGet, nil
		target = "http" + strings.TrimPrefix(target, "ws")
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("server %q: %w", h.server, err)
	}
	for k, v := range h.sc.Headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := h.m.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("asking server %q for its authorization challenge: %w", h.server, err)
	}
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		drain(resp)
		return nil, nil, fmt.Errorf("server %q answered HTTP %d without asking for authorization", h.server, resp.StatusCode)
	}
	return req, resp, nil
}

func splitScopes(s string) []string { return strings.Fields(s) }
