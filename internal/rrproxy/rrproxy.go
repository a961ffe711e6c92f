// Package rrproxy is a strict round-robin HTTP reverse proxy: request n
// goes to backend n mod len(backends), whatever session it belongs to. It
// stands in for a non-sticky load balancer in front of a fleet, in tests
// and in `go tool task fleet`, so that consecutive requests of one MCP
// session always land on different replicas. Responses stream (SSE is
// flushed as it comes).
package rrproxy

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// Proxy is the round-robin handler. It is safe for concurrent use.
type Proxy struct {
	backends []*url.URL
	next     atomic.Uint64
	rp       *httputil.ReverseProxy
	// Pick, when set, replaces round robin: it returns the index of the
	// backend for r (tests use it to aim at one replica).
	Pick func(r *http.Request, n int) int
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
			pr.SetURL(pr.In.Context().Value(backendKey{}).(*url.URL))
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
	}
	return p, nil
}

type backendKey struct{}

// ServeHTTP forwards r to the next backend in turn.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int((p.next.Add(1) - 1) % uint64(len(p.backends)))
	if p.Pick != nil {
		i = p.Pick(r, len(p.backends))
	}
	w.Header().Set("X-Edge-Backend", fmt.Sprint(i))
	ctx := contextWith(r, p.backends[i])
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// Count is how many requests the proxy has forwarded.
func (p *Proxy) Count() uint64 { return p.next.Load() }
