// Package dial makes the client transport of each configured upstream
// server (streamable HTTP, legacy SSE, WebSocket, stdio) with its headers,
// timeouts, byte budget and OAuth handler, and the per-identity copy of a
// transport for servers with "identity": "per_client". A transport is made
// once per upstream (and per identity) and holds no connection until the
// gateway connects it; everything here is safe for concurrent use.
package dial

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
	"github.com/edge-mcp/edge-mcp/transports"
)

// Options are what the transports of one gateway share.
type Options struct {
	Log    *slog.Logger
	Budget *transports.ByteBudget // upstream bytes being read (Budget)
	OAuth  *oauth.Manager         // upstream OAuth handlers; nil: none
}

// Transport returns the client transport of a configured server.
func Transport(sc config.Server, o Options) (mcp.Transport, error) {
	header := http.Header{}
	for k, v := range sc.Headers {
		header.Set(k, v)
	}
	if sc.BearerToken != "" {
		header.Set("Authorization", "Bearer "+sc.BearerToken)
	}
	switch sc.Type {
	case "streamable-http":
		return &transports.StreamableClientTransport{URL: sc.URL, Header: header, Logger: o.Log.With("server_name", sc.Name), Budget: o.Budget,
			OAuthHandler: o.OAuth.UpstreamHandler(sc)}, nil
	case "sse":
		return &mcp.SSEClientTransport{Endpoint: sc.URL, HTTPClient: transports.WithOAuth(sseClient(sc, header), o.OAuth.UpstreamHandler(sc))}, nil
	case "websocket":
		return &transports.WebSocketClientTransport{URL: sc.URL, Header: header, Logger: o.Log.With("server_name", sc.Name), Budget: o.Budget,
			OAuthHandler: o.OAuth.UpstreamHandler(sc)}, nil
	case "stdio":
		env := os.Environ()
		for k, v := range sc.Env {
			env = append(env, k+"="+v)
		}
		return &transports.CommandTransport{Command: sc.Command, Args: sc.Args, Env: env, Dir: sc.Cwd,
			Name: sc.Name, Logger: o.Log, Budget: o.Budget}, nil
	default:
		return nil, fmt.Errorf("transport type %q is not supported yet", sc.Type)
	}
}

// Budget is the gateway-wide budget of upstream bytes being read:
// limits.upstream_bytes_in_flight, else a quarter of the Go memory limit
// when one is set, else 256 MiB. A message that cannot get its bytes fails
// its call with an error naming the budget (legacy SSE upstreams, read by
// the go-sdk's client, are not counted).
func Budget(l config.Limits) *transports.ByteBudget {
	n := l.UpstreamBytesInFlight
	if n == 0 {
		n = 256 << 20
		if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
			n = max(lim/4, 16<<20)
		}
	}
	return transports.NewByteBudget(n)
}

// sseClient is the HTTP client of a legacy SSE upstream: the configured
// headers on every request, "timeout" bounding the connection and the wait
// for response headers, and "sse_read_timeout" bounding how long the event
// stream may stay silent before it is cut (and the upstream reconnected).
func sseClient(sc config.Server, header http.Header) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: sc.Timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = sc.Timeout
	return &http.Client{Transport: headerRoundTripper{header: header, next: tr, readTimeout: sc.SSEReadTimeout}}
}

// headerRoundTripper adds configured headers to every upstream request and,
// when readTimeout is set, cuts event streams silent for longer than that.
type headerRoundTripper struct {
	header      http.Header
	next        http.RoundTripper
	readTimeout time.Duration
}

func (h headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	resp, err := h.next.RoundTrip(r)
	if err == nil && h.readTimeout > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = newIdleBody(resp.Body, h.readTimeout)
	}
	return resp, err
}

// idleBody closes a response body that delivers nothing for longer than
// timeout, so a stream whose server went silent fails instead of hanging.
type idleBody struct {
	io.ReadCloser
	timer   *time.Timer
	timeout time.Duration
	expired atomic.Bool
}

func newIdleBody(rc io.ReadCloser, timeout time.Duration) *idleBody {
	b := &idleBody{ReadCloser: rc, timeout: timeout}
	b.timer = time.AfterFunc(timeout, func() {
		b.expired.Store(true)
		rc.Close()
	})
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.timer.Reset(b.timeout)
	}
	if err != nil && b.expired.Load() {
		err = fmt.Errorf("event stream silent for %s (sse_read_timeout): %w", b.timeout, err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}

// ForIdentity is sc's transport t with the handler of identity in
// place of the shared one.
func ForIdentity(m *oauth.Manager, sc config.Server, t mcp.Transport, identity string) mcp.Transport {
	h := m.Handler(sc.Name, identity)
	if h == nil {
		return t
	}
	switch tt := t.(type) {
	case *transports.StreamableClientTransport:
		c := *tt
		c.OAuthHandler = h
		return &c
	case *transports.WebSocketClientTransport:
		c := *tt
		c.OAuthHandler = h
		return &c
	case *mcp.SSEClientTransport:
		header := http.Header{}
		for k, v := range sc.Headers {
			header.Set(k, v)
		}
		return &mcp.SSEClientTransport{Endpoint: tt.Endpoint, HTTPClient: transports.WithOAuth(sseClient(sc, header), h)}
	}
	return t
}
