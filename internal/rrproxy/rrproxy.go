// Package rrproxy is a strict round-robin HTTP reverse proxy: request n
// goes to backend n mod len(backends), whatever session it belongs to. It
// stands in for a non-sticky load balancer in front of a fleet, in tests
// and in `go tool task fleet`, so that consecutive requests of one MCP
// session always land on different replicas. Responses stream (SSE is
// flushed as it comes).
//
// With SkipDown set, a backend the proxy cannot connect to is skipped, as
// a load balancer's health check would: see Proxy.SkipDown.
package rrproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// maxSkipBody bounds the request body the proxy keeps to send it again to
// the next backend when SkipDown is set.
const maxSkipBody = 16 << 20

// Proxy is the round-robin handler. It is safe for concurrent use.
type Proxy struct {
	backends []*url.URL
	next     atomic.Uint64
	rp       *httputil.ReverseProxy
	// Pick, when set, replaces round robin: it returns the index of the
	// backend for r (tests use it to aim at one replica).
	Pick func(r *http.Request, n int) int
	// SkipDown, when set, makes a request whose backend refuses the
	// connection (or cannot be dialled at all) go to the next backend in
	// turn, and so on until one connects or every backend was tried (then
	// 502). Only a failed dial is retried: the backend never saw the
	// request, so sending it elsewhere cannot run it twice; a backend that
	// fails after taking the request (dies mid-answer) fails that request.
	// The rotation itself stays strict: the next request goes to the
	// backend after the one the previous request was assigned, dead or
	// not. Request bodies are read whole first (at most 16 MiB; larger
	// ones get 413), to be sent again.
	SkipDown bool
}

// New returns a proxy over the backends (base URLs such as
// http://127.0.0.1:8081).
func New(backends ...string) (*Proxy, error) {
	if len(backends) == 0 {
		return nil, fmt.Errorf("rrproxy: no backends")
	}
	p := &Proxy{}
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("rrproxy: backend %q is not a URL", b)
		}
		p.backends = append(p.backends, u)
	}
	// Keep connections to the backends, as a load balancer does (the
	// default transport keeps 2 per host: more concurrent requests than
	// that would open a new connection each).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 256
	p.rp = &httputil.ReverseProxy{
		Transport:     tr,
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			a := pr.In.Context().Value(attemptKey{}).(*attempt)
			pr.SetURL(p.backends[a.i])
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		ErrorHandler: p.failed,
	}
	return p, nil
}

// attempt is one inbound request on its way to a backend.
type attempt struct {
	in    *http.Request
	body  []byte // the body read whole (SkipDown), nil otherwise
	i     int    // the backend it goes to
	tries int    // backends tried before this one
}

type attemptKey struct{}

// ServeHTTP forwards r to the next backend in turn.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int((p.next.Add(1) - 1) % uint64(len(p.backends)))
	if p.Pick != nil {
		i = p.Pick(r, len(p.backends))
	}
	a := &attempt{in: r, i: i}
	if p.SkipDown && r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxSkipBody+1))
		if err != nil {
			http.Error(w, "rrproxy: reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > maxSkipBody {
			http.Error(w, "rrproxy: request body over 16 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		a.body = body
	}
	p.forward(w, a)
}

// forward sends a to its backend; the X-Edge-Backend response header
// names the backend's index.
func (p *Proxy) forward(w http.ResponseWriter, a *attempt) {
	w.Header().Set("X-Edge-Backend", fmt.Sprint(a.i))
	r := a.in.WithContext(context.WithValue(a.in.Context(), attemptKey{}, a))
	if a.body != nil {
		r.Body = io.NopCloser(bytes.NewReader(a.body))
		r.ContentLength = int64(len(a.body))
	}
	p.rp.ServeHTTP(w, r)
}

// failed is the reverse proxy's error handler: with SkipDown, a request
// whose backend could not be dialled goes to the next one; otherwise 502.
func (p *Proxy) failed(w http.ResponseWriter, out *http.Request, err error) {
	a := out.Context().Value(attemptKey{}).(*attempt)
	if p.SkipDown && dialFailed(err) && a.tries+1 < len(p.backends) {
		a.tries++
		a.i = (a.i + 1) % len(p.backends)
		p.forward(w, a)
		return
	}
	if errors.Is(err, context.Canceled) {
		w.WriteHeader(499) // the client went away; nobody reads this
		return
	}
	http.Error(w, fmt.Sprintf("rrproxy: backend %d: %v", a.i, err), http.StatusBadGateway)
}

// dialFailed reports whether err is a failure to connect: the request
// was not sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Count is how many requests the proxy has forwarded.
func (p *Proxy) Count() uint64 { return p.next.Load() }
