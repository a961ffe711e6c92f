package transports

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [DefaultHTTPLimits].
const (
	// DefaultReadHeaderTimeout bounds the request line and headers: a real
	// client sends them in one or two packets, so 10 s leaves room for a
	// slow link and not for a client that trickles them.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultBodyReadTimeout bounds the read of one POST body: a full
	// 4 MiB body (the default MaxBodyBytes) arrives within it at about
	// 1.1 Mbit/s; ordinary MCP messages take milliseconds.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection that has carried
	// no request for this long; it exceeds the 90 s idle timeout of common
	// client pools (Go's among them), so clients normally close first and
	// never reuse a connection the server is closing.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxConns caps the open connections of one listener. An idle
	// HTTP/1.1 connection costs about 10 KiB (goroutine stack and buffers),
	// so 4096 of them stay around 40 MiB; Go raises the soft file
	// descriptor limit to the hard one at start, which must allow this
	// many plus the upstream connections.
	DefaultMaxConns = 4096
	// DefaultMaxHeaderBytes bounds a request's line and headers: MCP
	// requests carry a few short headers (a bearer token, a session id,
	// the protocol version), so 64 KiB is plenty (Envoy's default is
	// 60 KiB; net/http's would be 1 MiB).
	DefaultMaxHeaderBytes = 64 << 10
)

// HTTPLimits are the limits of an HTTP listener that faces clients that
// may be hostile or merely slow: every phase of a connection that waits on
// the client is bounded, and so is the number of connections.
//
// Long-lived responses (SSE streams, WebSockets) are not cut by any of
// these: there is no whole-request read timeout and no write timeout (the
// server transports bound each write of a stream themselves).
type HTTPLimits struct {
	// ReadHeaderTimeout bounds the reading of a request's line and
	// headers, WebSocket upgrade requests included. Zero means
	// [DefaultReadHeaderTimeout]; negative means no limit.
	ReadHeaderTimeout time.Duration
	// BodyReadTimeout bounds the reading of a request body by the server
	// transports of this package (POST messages), and of one WebSocket
	// message from its first frame: the transports use it when their own
	// option (BodyReadTimeout, MessageReadTimeout) is zero. Zero means
	// [DefaultBodyReadTimeout]; negative means no limit.
	BodyReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection waiting for its next
	// request for this long. Zero means [DefaultIdleTimeout]; negative
	// means no limit.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the size of a request's line and headers
	// (net/http answers 431 over it, and reads at most 4 KiB past it).
	// Zero means [DefaultMaxHeaderBytes]; negative means net/http's
	// default (1 MiB).
	MaxHeaderBytes int
	// MaxConns caps the connections open at once. [NewHTTPServer] cannot
	// apply it: wrap the listener with [LimitListener] (see its example).
	// Zero means [DefaultMaxConns]; negative means no cap.
	MaxConns int
	// MaxConnsPerIP caps the connections open at once from one client
	// address, so that one address (an attacker holding slow connections)
	// cannot take every slot of MaxConns. Behind a proxy or load balancer
	// every client shares its address: raise it to MaxConns there. Zero
	// means a quarter of MaxConns; negative means no cap.
	MaxConnsPerIP int
}

// DefaultHTTPLimits returns the default limits: 10 s and 64 KiB for
// headers, 30 s for a body, 120 s idle, 4096 connections.
func DefaultHTTPLimits() HTTPLimits {
	return HTTPLimits{
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		BodyReadTimeout:   DefaultBodyReadTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		MaxConns:          DefaultMaxConns,
	}
}

// WithDefaults returns l with its zero fields replaced by those of
// [DefaultHTTPLimits]; negative fields (no limit) are kept.
func (l HTTPLimits) WithDefaults() HTTPLimits {
	d := DefaultHTTPLimits()
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if l.BodyReadTimeout == 0 {
		l.BodyReadTimeout = d.BodyReadTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxConns == 0 {
		l.MaxConns = d.MaxConns
	}
	if l.MaxConnsPerIP == 0 && l.MaxConns > 0 {
		l.MaxConnsPerIP = max(l.MaxConns/4, 1)
	}
	return l
}

// Listener wraps ln with the connection caps of l (zero fields take their
// defaults), as [LimitListener] does with MaxConnsPerIP besides.
func (l HTTPLimits) Listener(ln net.Listener) net.Listener {
	l = l.WithDefaults()
	if l.MaxConns <= 0 && l.MaxConnsPerIP <= 0 {
		return ln
	}
	ll := &limitListener{Listener: ln, max: int64(l.MaxConns)}
	if ll.max <= 0 {
		ll.max = math.MaxInt64
	}
	if l.MaxConnsPerIP > 0 {
		ll.perIP, ll.byIP = l.MaxConnsPerIP, make(map[string]int)
	}
	return ll
}

// positive returns d when it is positive and 0 (no limit for net/http)
// otherwise.
func positive(d time.Duration) time.Duration { return max(d, 0) }

// NewHTTPServer returns a server for h with the timeouts of l (zero fields
// take their defaults). Serve it on a listener wrapped by [LimitListener]
// with l.MaxConns, e.g.
//
//	l := transports.DefaultHTTPLimits()
//	srv := transports.NewHTTPServer(mux, l)
//	err := srv.Serve(transports.LimitListener(ln, l.WithDefaults().MaxConns))
//
// The server has no ReadTimeout or WriteTimeout, which would cut SSE and
// WebSocket streams: every request body is bounded by l.BodyReadTimeout
// instead, from the request's start, whether the handler reads it or
// refuses the request first (then the connection is closed rather than
// waiting for the rest); the server transports of this package also read
// it from the request context to bound each WebSocket message. The caller may set further
// fields (TLSConfig, ErrorLog, ...) before serving; the server is then an
// ordinary *http.Server, safe for concurrent use as such.
func NewHTTPServer(h http.Handler, l HTTPLimits) *http.Server {
	l = l.WithDefaults()
	body := l.BodyReadTimeout
	return &http.Server{
		Handler:           boundBody(h, body),
		ReadHeaderTimeout: positive(l.ReadHeaderTimeout),
		// A negative IdleTimeout would fall back to ReadTimeout (none): no
		// limit, as documented.
		IdleTimeout:    positive(l.IdleTimeout),
		MaxHeaderBytes: max(l.MaxHeaderBytes, 0),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, bodyTimeoutKey{}, body)
		},
	}
}

// boundBody bounds the read of every request body by timeout, from the
// request's start, whatever h does with it. A handler that refuses a
// request before reading its body (401, 403, 404, 405, 415) leaves the
// body to net/http, which reads what is left (up to 256 KiB) before it
// writes the reply and again when it finishes the request, with no
// deadline: a client trickling a small body held the connection and its
// goroutine for as long as it liked. Here the body's deadline is set when
// the request starts, cleared once the body was read to its end (so that
// it cannot cut a response stream), and moved to now when h returns
// without reading it all: net/http's reads of the rest fail at once
// unless it has already arrived, and the connection is closed after the
// reply. Requests without a body (GET streams, WebSocket upgrades) are
// left alone.
func boundBody(h http.Handler, timeout time.Duration) http.Handler {
	if timeout <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
			h.ServeHTTP(w, r)
			return
		}
		b := &boundedBody{ReadCloser: r.Body, left: r.ContentLength, rc: rc}
		r.Body = b
		h.ServeHTTP(w, r)
		if !b.read.Load() {
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// boundedBody is a request body under boundBody: it clears the deadline
// once the body was read to its end.
type boundedBody struct {
	io.ReadCloser
	left int64 // bytes still announced; negative: unknown (chunked)
	rc   *http.ResponseController
	read atomic.Bool // read to its end
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
	}
	if (err == io.EOF || b.left == 0) && !b.read.Swap(true) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// bodyTimeoutKey carries HTTPLimits.BodyReadTimeout in request contexts.
type bodyTimeoutKey struct{}

// bodyReadTimeout returns the body read timeout for r: own when it is not
// zero, else the one NewHTTPServer put in the request's context, else
// DefaultBodyReadTimeout. A negative result means no limit.
func bodyReadTimeout(r *http.Request, own time.Duration) time.Duration {
	if own != 0 {
		return own
	}
	if d, ok := r.Context().Value(bodyTimeoutKey{}).(time.Duration); ok && d != 0 {
		return d
	}
	return DefaultBodyReadTimeout
}

// LimitListener returns a listener that keeps at most max connections
// accepted from ln open at once; max <= 0 returns ln itself.
//
// A connection accepted while max are open is closed at once, without a
// byte written, and Accept goes on with the next one: clients over the cap
// see their connection reset or closed straight away and may retry, rather
// than waiting unseen in the kernel's backlog behind connections that may
// never finish (and filling it, which would stall every client). A slot is
// freed when a connection's Close is first called; net/http closes every
// connection it served, hijacked ones (WebSockets) when their handler
// closes them.
//
// The listener is safe for concurrent use; closing it closes ln, and does
// not close the connections already accepted.
func LimitListener(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: int64(max)}
}

// limitListener is the listener of LimitListener and HTTPLimits.Listener.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64

	perIP int // 0: no cap per address
	mu    sync.Mutex
	byIP  map[string]int // open connections by client address
}

// Accept returns the next connection while fewer than max are open (and
// fewer than perIP from its address), closing those that arrive over a
// cap.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := l.takeIP(c.RemoteAddr())
		if ip != "" || l.perIP == 0 {
			if l.open.Add(1) <= l.max {
				return &limitConn{Conn: c, l: l, ip: ip}, nil
			}
			l.open.Add(-1)
			l.releaseIP(ip)
		}
		_ = c.Close()
	}
}

// takeIP counts a connection from addr against its address's cap and
// returns the address, or "" when the cap is off or reached.
func (l *limitListener) takeIP(addr net.Addr) string {
	if l.perIP == 0 {
		return ""
	}
	ip := addr.String()
	if h, _, err := net.SplitHostPort(ip); err == nil {
		ip = h
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIP[ip] >= l.perIP {
		return ""
	}
	l.byIP[ip]++
	return ip
}

func (l *limitListener) releaseIP(ip string) {
	if ip == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
}

// limitConn gives its slots back on its first Close.
type limitConn struct {
	net.Conn
	l    *limitListener
	ip   string
	once sync.Once
}

// CloseWrite half-closes a TCP or Unix connection, which net/http does
// before closing one so that the client reads the last response rather
// than a reset.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.releaseIP(c.ip)
	})
	return err
}
