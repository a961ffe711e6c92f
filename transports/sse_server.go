package transports

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// SSEServerOptions configures an [SSEServer].
type SSEServerOptions struct {
	// Logger receives warnings and debug messages; nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes caps the size of a POST body; larger bodies get 413 and
	// a JSON-RPC error body. Zero or negative means 4 MiB.
	MaxBodyBytes int64
	// BodyReadTimeout bounds the reading of one POST body; a body not
	// received in time gets 408 and its connection is closed. Zero means
	// the BodyReadTimeout of the [HTTPLimits] of the [NewHTTPServer] that
	// serves the request, or 30 s under any other server; negative means
	// no limit. It never applies to the response streams.
	BodyReadTimeout time.Duration
	// KeepAlive is how long an event stream may stay silent before a
	// ": keepalive" comment is written. Zero means 25 s; negative disables
	// keepalives.
	KeepAlive time.Duration
	// AllowedOrigins lists Origin header values accepted besides loopback
	// origins (for loopback hosts) and same-origin requests. "*" accepts any
	// Origin. The rules are those of [Guard].
	AllowedOrigins []string
	// AllowedHosts lists Host header values (with or without port) accepted
	// on a loopback listener besides loopback names. "*" accepts any Host.
	AllowedHosts []string
	// Budget, when set, returns the client-memory account each open
	// session (its GET stream) is charged to, a fixed estimate, from the
	// peer of [PeerFromContext]; a session over it is refused with 429.
	Budget func(peer any) *budget.Account
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
//
// Concurrency and lifetime: an SSEServer is safe for concurrent use; its
// options are fixed by [NewSSEServer]. Every request first passes the
// server's [Guard]. A session lives as long as its GET: when the client
// goes away, the gateway closes the Connection or [SSEServer.Close] is
// called, the stream ends, Read returns io.EOF and later POSTs get 404 (503
// after Close). Write never blocks on the client: it queues at most 1024
// messages and then closes the session.
type SSEServer struct {
	serverBase
	sessions sessionTable[*sseSession]
}

const (
	// sseMaxQueue bounds the messages waiting to be written to one
	// event stream; a client that does not keep up loses its session.
	sseMaxQueue = 1024
)

var sseAllow = []string{"GET, POST"}

// NewSSEServer returns a handler for one HTTP+SSE endpoint; mount it at the
// same path for GET and POST. accept (not nil) is called synchronously in
// the GET handler with the Connection of every new session, before the
// endpoint event is sent; the caller reads from it until Read returns
// io.EOF.
func NewSSEServer(accept func(Connection), opts SSEServerOptions) *SSEServer {
	s := &SSEServer{serverBase: newServerBase(accept, opts.Logger, opts.MaxBodyBytes, opts.KeepAlive,
		GuardOptions{AllowedOrigins: opts.AllowedOrigins, AllowedHosts: opts.AllowedHosts})}
	s.bodyTimeout = opts.BodyReadTimeout
	s.streams = opts.Budget
	return s
}

// Close ends every session (their event streams end and their Read returns
// io.EOF); later requests get 503.
func (s *SSEServer) Close() error {
	for _, sess := range s.sessions.shutdown() {
		sess.close()
	}
	return nil
}

// ServeHTTP implements [http.Handler].
func (s *SSEServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.admit(w, r, s.sessions.isClosed()) {
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.serveGET(w, r)
	case http.MethodPost:
		s.servePOST(w, r)
	default:
		w.Header()["Allow"] = sseAllow
		writeJSONRPCError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, codeServerError,
			fmt.Sprintf("method %s not allowed; use GET to open an event stream, POST to send a message", r.Method), nil)
	}
}

func (s *SSEServer) servePOST(w http.ResponseWriter, r *http.Request) {
	id, ok := sseSessionParam(r.URL.RawQuery)
	if !ok {
		writeJSONRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, codeServerError,
			"Bad Request: missing sessionId query parameter (POST to the URI of the endpoint event)", nil)
		return
	}
	if !requireJSON(w, r) {
		return
	}
	sess, ok := s.sessions.get(id)
	if !ok {
		writeJSONRPCError(w, http.StatusNotFound, jsonrpc.ID{}, codeServerError, "session not found", nil)
		return
	}
	msg := s.readPOSTMessage(w, r)
	if msg == nil {
		return
	}
	switch sess.deliver(r.Context(), msg) {
	case nil:
		w.WriteHeader(http.StatusAccepted)
	case errSessionClosed:
		writeJSONRPCError(w, http.StatusNotFound, jsonrpc.ID{}, codeServerError, "session closed", nil)
	default:
		// The client is gone; there is nobody to answer.
	}
}

// sseSessionParam returns the sessionId (or, as the go-sdk spells it,
// sessionid) parameter of a raw query.
func sseSessionParam(q string) (string, bool) {
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

// sseEndpoint returns the URI of a session's POST endpoint relative to
// the GET's URI: its last path segment with the session query, so that it
// resolves to the same path however the server is mounted or proxied.
func sseEndpoint(r *http.Request, id string) string {
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
	if _, sseOK := acceptsTypes(r.Header["Accept"]); !sseOK {
		writeJSONRPCError(w, http.StatusNotAcceptable, jsonrpc.ID{}, codeServerError,
			"Accept must allow text/event-stream", nil)
		return
	}
	release := holdStream(w, PeerFromContext(r.Context()), s.streams)
	if release == nil {
		return
	}
	defer release()
	sess := &sseSession{
		srv: s,
		out: make(chan *[]byte, sseMaxQueue),
	}
	sess.init(PeerFromContext(r.Context()))
	if !s.sessions.add(sess.id, sess) {
		writeJSONRPCError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, codeServerError, "server is shutting down", nil)
		return
	}
	defer sess.close()
	s.log.Debug("SSE session opened", "session", sess.id, "remote", r.RemoteAddr)

	h := w.Header()
	h["Content-Type"] = ctEventStream
	h["Cache-Control"] = noCache
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()

	s.accept(sess)

	_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if err := writeSSEEvent(w, "endpoint", "", []byte(sseEndpoint(r, sess.id))); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	sess.pump(r.Context(), w, rc)
}

// sseSession is one HTTP+SSE session; it is the [Connection] handed to
// accept. Its id is the sessionId of its endpoint URI; Read returns the
// messages the client POSTed, in the order the POSTs were accepted.
//
// Read must not be called concurrently with itself; Write and Close may be
// called concurrently with anything, and Close more than once. Close, the
// end of the GET and [SSEServer.Close] end the session: the event stream
// ends, Read returns io.EOF and Write fails with [ErrClosed].
type sseSession struct {
	serverSession
	srv *SSEServer
	out chan *[]byte // encoded messages for the event stream
}

// Write queues msg for the event stream without waiting for the client. A
// client that lets more than 1024 messages pile up loses its session.
func (sess *sseSession) Write(_ context.Context, msg jsonrpc.Message) error {
	select {
	case <-sess.done:
		return fmt.Errorf("SSE session %s: %w", sess.id, ErrClosed)
	default:
	}
	bp, err := encodePooled(msg)
	if err != nil {
		return fmt.Errorf("SSE session %s: encoding message: %w", sess.id, err)
	}
	select {
	case sess.out <- bp:
		return nil
	default:
	}
	putEncodeBuf(bp)
	sess.srv.log.Warn("SSE client too slow: closing its session", "session", sess.id, "queued", sseMaxQueue)
	sess.close()
	return fmt.Errorf("SSE session %s: client too slow (%d messages queued): %w", sess.id, sseMaxQueue, ErrClosed)
}

// Close ends the session: the event stream ends and Read returns io.EOF.
func (sess *sseSession) Close() error {
	sess.close()
	return nil
}

func (sess *sseSession) close() {
	if sess.end(io.EOF, func() { sess.srv.sessions.remove(sess.id, sess) }) {
		sess.srv.log.Debug("SSE session closed", "session", sess.id)
	}
}

// pump writes queued messages and keepalives to the event stream until the
// client goes away, a write fails or the session ends.
func (sess *sseSession) pump(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController) {
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
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			err := writeSSEEvent(w, "message", "", *bp)
			putEncodeBuf(bp)
			// Write what else is queued before flushing once.
			for more := true; more && err == nil; {
				select {
				case bp := <-sess.out:
					err = writeSSEEvent(w, "message", "", *bp)
					putEncodeBuf(bp)
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
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			_, err := w.Write(sseKeepAlive)
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
