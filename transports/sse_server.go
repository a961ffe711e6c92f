package transports

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// SSEServerOptions configures an [SSEServer].
type SSEServerOptions struct {
	// Logger receives warnings and debug messages; nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes caps the size of a POST body; larger bodies get 413 and
	// a JSON-RPC error body. Zero or negative means 4 MiB.
	MaxBodyBytes int64
	// KeepAlive is how long an event stream may stay silent before a
	// ": keepalive" comment is written. Zero means 25 s; negative disables
	// keepalives.
	KeepAlive time.Duration
	// AllowedOrigins lists Origin header values accepted besides loopback
	// origins (for loopback hosts) and same-origin requests. "*" accepts any
	// Origin. The rules are those of [StreamableServerOptions].
	AllowedOrigins []string
	// AllowedHosts lists Host header values (with or without port) accepted
	// on a loopback listener besides loopback names. "*" accepts any Host.
	AllowedHosts []string
}

// SSEServer serves the HTTP+SSE transport of MCP revision 2024-11-05 at one
// endpoint (e.g. /sse) and turns each client session into a [Connection].
//
// A GET (Accept: text/event-stream) opens a session: the stream starts with
// an "endpoint" event whose data is a relative URI (the last segment of the
// GET's path with ?sessionId=<id>), and then carries every message written
// to the Connection as a "message" event. The session ends, and Read
// returns io.EOF, when the GET ends. A POST to the endpoint URI delivers one
// message and is answered 202 Accepted; an unknown session gets 404, a body
// that is not one JSON-RPC message gets 400 with a JSON-RPC error body, an
// oversized body 413.
type SSEServer struct {
	accept    func(Connection)
	log       *slog.Logger
	maxBody   int64
	keepAlive time.Duration
	guard     sseSrvGuard
	closed    atomic.Bool

	mu       sync.Mutex
	sessions map[string]*sseSrvSession
}

const (
	sseSrvDefaultMaxBody   = 4 << 20
	sseSrvDefaultKeepAlive = 25 * time.Second
	// sseSrvMaxQueue bounds the messages waiting to be written to one
	// event stream; a client that does not keep up loses its session.
	sseSrvMaxQueue = 1024
	// sseSrvIncomingQueue is the capacity of the queue between the POST
	// handlers and Read.
	sseSrvIncomingQueue = 64
	// sseSrvWriteTimeout bounds one write to the event stream.
	sseSrvWriteTimeout = 30 * time.Second
	// sseSrvMaxPooledBuf is the largest encode buffer returned to the pool.
	sseSrvMaxPooledBuf = 64 << 10
)

var (
	sseSrvKeepAlive = []byte(": keepalive\n\n")
	sseSrvAllow     = []string{"GET, POST"}
	sseSrvBufPool   = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}
)

// NewSSEServer returns a handler for one HTTP+SSE endpoint; mount it at the
// same path for GET and POST. accept (not nil) is called synchronously in
// the GET handler with the Connection of every new session, before the
// endpoint event is sent; the caller reads from it until Read returns
// io.EOF.
func NewSSEServer(accept func(Connection), opts SSEServerOptions) *SSEServer {
	s := &SSEServer{
		accept:    accept,
		log:       opts.Logger,
		maxBody:   opts.MaxBodyBytes,
		keepAlive: opts.KeepAlive,
		guard:     newSSESrvGuard(opts.AllowedOrigins, opts.AllowedHosts),
		sessions:  make(map[string]*sseSrvSession),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = sseSrvDefaultMaxBody
	}
	if s.keepAlive == 0 {
		s.keepAlive = sseSrvDefaultKeepAlive
	}
	return s
}

// Close ends every session (their event streams end and their Read returns
// io.EOF); later requests get 503.
func (s *SSEServer) Close() error {
	s.closed.Store(true)
	s.mu.Lock()
	all := make([]*sseSrvSession, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	for _, sess := range all {
		sess.close()
	}
	return nil
}

// ServeHTTP implements [http.Handler].
func (s *SSEServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := s.guard.check(r); msg != "" {
		srvWriteError(w, http.StatusForbidden, jsonrpc.ID{}, srvCodeServerError, msg, nil)
		return
	}
	if s.closed.Load() {
		srvWriteError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, srvCodeServerError, "server is shutting down", nil)
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.serveGET(w, r)
	case http.MethodPost:
		s.servePOST(w, r)
	default:
		w.Header()["Allow"] = sseSrvAllow
		srvWriteError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, srvCodeServerError,
			fmt.Sprintf("method %s not allowed; use GET to open an event stream, POST to send a message", r.Method), nil)
	}
}

func (s *SSEServer) servePOST(w http.ResponseWriter, r *http.Request) {
	id, ok := sseSrvSessionParam(r.URL.RawQuery)
	if !ok {
		srvWriteError(w, http.StatusBadRequest, jsonrpc.ID{}, srvCodeServerError,
			"Bad Request: missing sessionId query parameter (POST to the URI of the endpoint event)", nil)
		return
	}
	if !srvIsJSONType(r.Header.Get("Content-Type")) {
		srvWriteError(w, http.StatusUnsupportedMediaType, jsonrpc.ID{}, srvCodeServerError,
			"Content-Type must be application/json", nil)
		return
	}
	s.mu.Lock()
	sess := s.sessions[id]
	s.mu.Unlock()
	if sess == nil {
		srvWriteError(w, http.StatusNotFound, jsonrpc.ID{}, srvCodeServerError, "session not found", nil)
		return
	}
	body, err := srvReadBody(r, s.maxBody)
	if err != nil {
		if errors.Is(err, errSrvTooLarge) {
			srvWriteError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("request body exceeds %d bytes", s.maxBody), nil)
			return
		}
		srvWriteError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError,
			fmt.Sprintf("reading request body: %v", err), nil)
		return
	}
	msg, status, code, reason := srvDecode(body)
	if msg == nil {
		srvWriteError(w, status, jsonrpc.ID{}, code, reason, nil)
		return
	}
	select {
	case sess.in <- msg:
		w.WriteHeader(http.StatusAccepted)
	case <-sess.done:
		srvWriteError(w, http.StatusNotFound, jsonrpc.ID{}, srvCodeServerError, "session closed", nil)
	case <-r.Context().Done():
	}
}

// sseSrvSessionParam returns the sessionId (or, as the go-sdk spells it,
// sessionid) parameter of a raw query.
func sseSrvSessionParam(q string) (string, bool) {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != "sessionId" && k != "sessionid" {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			u, err := url.QueryUnescape(v)
			if err != nil {
				return "", false
			}
			v = u
		}
		return v, v != ""
	}
	return "", false
}

// sseSrvEndpoint returns the URI of a session's POST endpoint relative to
// the GET's URI: its last path segment with the session query, so that it
// resolves to the same path however the server is mounted or proxied.
func sseSrvEndpoint(r *http.Request, id string) string {
	p := r.URL.EscapedPath()
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && u.Path != "" {
		p = u.EscapedPath() // the path the client sent, before any StripPrefix
	}
	seg := p[strings.LastIndexByte(p, '/')+1:]
	if seg == "" || strings.Contains(seg, ":") {
		seg = "./" + seg
	}
	return seg + "?sessionId=" + id
}

func (s *SSEServer) serveGET(w http.ResponseWriter, r *http.Request) {
	if _, sseOK := srvAccepts(r.Header["Accept"]); !sseOK {
		srvWriteError(w, http.StatusNotAcceptable, jsonrpc.ID{}, srvCodeServerError,
			"Accept must allow text/event-stream", nil)
		return
	}
	sess := &sseSrvSession{
		srv:  s,
		id:   rand.Text(),
		in:   make(chan jsonrpc.Message, sseSrvIncomingQueue),
		out:  make(chan *[]byte, sseSrvMaxQueue),
		done: make(chan struct{}),
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		srvWriteError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, srvCodeServerError, "server is shutting down", nil)
		return
	}
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	defer sess.close()
	s.log.Debug("SSE session opened", "session", sess.id, "remote", r.RemoteAddr)

	h := w.Header()
	h["Content-Type"] = srvCTSSE
	h["Cache-Control"] = srvNoCache
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()

	sess.peer = PeerFromContext(r.Context())
	s.accept(sess)

	_ = rc.SetWriteDeadline(time.Now().Add(sseSrvWriteTimeout))
	if err := writeSSEEvent(w, "endpoint", "", []byte(sseSrvEndpoint(r, sess.id))); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	sess.pump(r.Context(), w, rc)
}

// sseSrvSession is one HTTP+SSE session; it is the [Connection] handed to
// accept.
type sseSrvSession struct {
	peer any // who opened it; see Peer
	srv  *SSEServer
	id   string
	in   chan jsonrpc.Message // POSTed messages for Read
	out  chan *[]byte         // encoded messages for the event stream
	done chan struct{}
	once sync.Once
}

// SessionID returns the session's id, the sessionId of its endpoint URI.
func (sess *sseSrvSession) SessionID() string { return sess.id }

// Read returns the next message the client POSTed, in the order the POSTs
// were accepted, or io.EOF once the session has ended.
func (sess *sseSrvSession) Read(ctx context.Context) (jsonrpc.Message, error) {
	return readInbox(ctx, sess.in, sess.done)
}

// Write queues msg for the event stream without waiting for the client. A
// client that lets more than 1024 messages pile up loses its session.
func (sess *sseSrvSession) Write(_ context.Context, msg jsonrpc.Message) error {
	select {
	case <-sess.done:
		return fmt.Errorf("SSE session %s: %w", sess.id, ErrClosed)
	default:
	}
	bp := sseSrvBufPool.Get().(*[]byte)
	b, err := wire.Append((*bp)[:0], msg)
	if err != nil {
		sseSrvPutBuf(bp)
		return fmt.Errorf("SSE session %s: encoding message: %w", sess.id, err)
	}
	*bp = b
	select {
	case sess.out <- bp:
		return nil
	default:
	}
	sseSrvPutBuf(bp)
	sess.srv.log.Warn("SSE client too slow: closing its session", "session", sess.id, "queued", sseSrvMaxQueue)
	sess.close()
	return fmt.Errorf("SSE session %s: client too slow (%d messages queued): %w", sess.id, sseSrvMaxQueue, ErrClosed)
}

// Close ends the session: the event stream ends and Read returns io.EOF.
func (sess *sseSrvSession) Close() error {
	sess.close()
	return nil
}

func (sess *sseSrvSession) close() {
	sess.once.Do(func() {
		s := sess.srv
		s.mu.Lock()
		if s.sessions[sess.id] == sess {
			delete(s.sessions, sess.id)
		}
		s.mu.Unlock()
		close(sess.done)
		s.log.Debug("SSE session closed", "session", sess.id)
	})
}

func sseSrvPutBuf(bp *[]byte) {
	if cap(*bp) > sseSrvMaxPooledBuf {
		return
	}
	*bp = (*bp)[:0]
	sseSrvBufPool.Put(bp)
}

// pump writes queued messages and keepalives to the event stream until the
// client goes away, a write fails or the session ends.
func (sess *sseSrvSession) pump(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController) {
	var (
		ka  *time.Timer
		kaC <-chan time.Time
	)
	if d := sess.srv.keepAlive; d > 0 {
		ka = time.NewTimer(d)
		defer ka.Stop()
		kaC = ka.C
	}
	for {
		select {
		case bp := <-sess.out:
			_ = rc.SetWriteDeadline(time.Now().Add(sseSrvWriteTimeout))
			err := writeSSEEvent(w, "message", "", *bp)
			sseSrvPutBuf(bp)
			// Write what else is queued before flushing once.
			for more := true; more && err == nil; {
				select {
				case bp := <-sess.out:
					err = writeSSEEvent(w, "message", "", *bp)
					sseSrvPutBuf(bp)
				default:
					more = false
				}
			}
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				sess.srv.log.Debug("SSE stream write failed", "session", sess.id, "error", err)
				return
			}
		case <-kaC:
			_ = rc.SetWriteDeadline(time.Now().Add(sseSrvWriteTimeout))
			_, err := w.Write(sseSrvKeepAlive)
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-sess.done:
			return
		}
		if ka != nil {
			ka.Reset(sess.srv.keepAlive)
		}
	}
}

// sseSrvGuard implements DNS-rebinding protection for the SSE and
// WebSocket servers. It duplicates the rules of StreamableServer.checkOrigin
// (which needs a StreamableServer), using the same helpers.
type sseSrvGuard struct {
	origins   map[string]bool
	hosts     map[string]bool
	anyOrigin bool
	anyHost   bool
}

func newSSESrvGuard(origins, hosts []string) sseSrvGuard {
	g := sseSrvGuard{
		origins: make(map[string]bool, len(origins)),
		hosts:   make(map[string]bool, len(hosts)),
	}
	for _, o := range origins {
		if o == "*" {
			g.anyOrigin = true
		}
		g.origins[strings.ToLower(strings.TrimRight(o, "/"))] = true
	}
	for _, h := range hosts {
		if h == "*" {
			g.anyHost = true
		}
		g.hosts[strings.ToLower(h)] = true
	}
	return g
}

// check returns a reason when the request must be rejected with 403: a
// non-loopback Host on a loopback listener (unless allowed), or an Origin
// that is neither allowed, nor same-origin, nor loopback for a loopback
// Host.
func (g *sseSrvGuard) check(r *http.Request) string {
	hostname := srvHostname(r.Host)
	loopbackHost := srvIsLoopbackName(hostname)
	if !loopbackHost && !g.anyHost && srvLoopbackListener(r) &&
		!g.hosts[strings.ToLower(r.Host)] && !g.hosts[strings.ToLower(hostname)] {
		return fmt.Sprintf("Forbidden: Host %q is not allowed on a loopback listener", r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" || g.anyOrigin || g.origins[strings.ToLower(strings.TrimRight(origin, "/"))] {
		return ""
	}
	u, err := url.Parse(origin)
	if err == nil && u.Host != "" {
		if loopbackHost && srvIsLoopbackName(u.Hostname()) {
			return ""
		}
		if !loopbackHost && strings.EqualFold(u.Host, r.Host) {
			return ""
		}
	}
	return fmt.Sprintf("Forbidden: Origin %q is not allowed", origin)
}

// PeerInfo returns who opened the connection (see Peer).
func (s *sseSrvSession) PeerInfo() any { return s.peer }
