package transports

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// StreamableServerOptions configures a [StreamableServer].
type StreamableServerOptions struct {
	// Logger receives warnings (dropped messages, failed streams) and debug
	// details. Nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes caps the size of a POST body; larger bodies get 413 and a
	// JSON-RPC error body. Zero or negative means 4 MiB.
	MaxBodyBytes int64
	// AllowedOrigins lists Origin header values accepted besides loopback
	// origins (for loopback hosts) and same-origin requests. "*" accepts any
	// Origin.
	AllowedOrigins []string
	// AllowedHosts lists Host header values (with or without port) accepted
	// on a loopback listener besides loopback names. "*" accepts any Host.
	AllowedHosts []string
	// KeepAlive is how long an SSE stream, or a POST still waiting for its
	// response, may stay silent before a ": keepalive" comment is written.
	// Zero means 25 s; negative disables keepalives.
	KeepAlive time.Duration
	// IdleTimeout closes a session that has had no HTTP request in flight for
	// this long. Zero means 30 min; negative disables reaping.
	IdleTimeout time.Duration
}

// StreamableServer serves MCP streamable HTTP (protocol revisions 2025-03-26
// to 2025-11-25) at one endpoint and turns each client session into a
// [Connection].
//
// Messages the gateway writes are routed like this: a response goes to the
// POST that carried its request; a request or notification written with a
// context from [WithRelated] goes to that request's POST while it is open,
// and otherwise to the session's standalone GET stream (queued, bounded, while
// no GET is open). A POST whose first outgoing message is its response is
// answered with a plain application/json body; otherwise it becomes a
// text/event-stream that ends after the response.
//
// Stream resumption (Last-Event-ID) and JSON-RPC batches are not supported.
type StreamableServer struct {
	accept         func(Connection)
	log            *slog.Logger
	maxBody        int64
	keepAlive      time.Duration
	idle           time.Duration
	allowedOrigins map[string]bool
	allowedHosts   map[string]bool
	anyOrigin      bool
	anyHost        bool
	epoch          time.Time
	closed         atomic.Bool

	mu       sync.Mutex
	sessions map[string]*srvSession
}

const (
	srvDefaultMaxBody   = 4 << 20
	srvDefaultKeepAlive = 25 * time.Second
	srvDefaultIdle      = 30 * time.Minute
	// srvMaxStreamQueue bounds the messages waiting to be written on one
	// stream; a stream whose client does not keep up is failed.
	srvMaxStreamQueue = 1024
	// srvMaxBacklog bounds the messages kept for the standalone stream while
	// no GET is open; the oldest are dropped.
	srvMaxBacklog = 256
	// srvIncomingQueue is the capacity of the queue between the HTTP
	// handlers and Read.
	srvIncomingQueue = 64
	// srvWriteTimeout bounds one write of queued SSE events to a client.
	srvWriteTimeout = 30 * time.Second
	// srvCancelTimeout bounds how long a handler waits to hand a synthesized
	// cancellation to a reader that does not read.
	srvCancelTimeout = 5 * time.Second
	// srvMaxPooledBuf is the largest encode buffer returned to the pool.
	srvMaxPooledBuf = 64 << 10

	srvHeaderSession  = "Mcp-Session-Id"
	srvHeaderProtocol = "Mcp-Protocol-Version"

	// srvCodeServerError is the JSON-RPC code of transport-level rejections.
	srvCodeServerError = -32000
	// srvCodeUnsupportedVersion is the 2026-07-28 UnsupportedProtocolVersion
	// code; older clients treat it as any error, newer ones fall back.
	srvCodeUnsupportedVersion = -32022
)

var (
	srvVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

	srvCTJSON   = []string{"application/json"}
	srvCTSSE    = []string{"text/event-stream"}
	srvNoCache  = []string{"no-cache"}
	srvAllowHdr = []string{"GET, POST, DELETE"}

	srvEventStart = []byte("event: message\ndata: ")
	srvDataCont   = []byte("\ndata: ")
	srvEventEnd   = []byte("\n\n")
	srvKeepAlive  = []byte(": keepalive\n\n")
	srvOpened     = []byte(": stream opened\n\n")

	srvBufPool    = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}
	srvStreamPool = sync.Pool{New: func() any { return &srvStream{notify: make(chan struct{}, 1)} }}
)

// NewStreamableServer returns a handler for one MCP endpoint. accept (not
// nil) is called synchronously in the HTTP handler with the Connection of
// every new session, before the session's initialize request is delivered;
// the caller reads from it until Read returns io.EOF.
func NewStreamableServer(accept func(Connection), opts StreamableServerOptions) *StreamableServer {
	s := &StreamableServer{
		accept:         accept,
		log:            opts.Logger,
		maxBody:        opts.MaxBodyBytes,
		keepAlive:      opts.KeepAlive,
		idle:           opts.IdleTimeout,
		allowedOrigins: make(map[string]bool, len(opts.AllowedOrigins)),
		allowedHosts:   make(map[string]bool, len(opts.AllowedHosts)),
		epoch:          time.Now(),
		sessions:       make(map[string]*srvSession),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = srvDefaultMaxBody
	}
	if s.keepAlive == 0 {
		s.keepAlive = srvDefaultKeepAlive
	}
	if s.idle == 0 {
		s.idle = srvDefaultIdle
	}
	for _, o := range opts.AllowedOrigins {
		if o == "*" {
			s.anyOrigin = true
		}
		s.allowedOrigins[strings.ToLower(strings.TrimRight(o, "/"))] = true
	}
	for _, h := range opts.AllowedHosts {
		if h == "*" {
			s.anyHost = true
		}
		s.allowedHosts[strings.ToLower(h)] = true
	}
	return s
}

// Close closes every session (their Connections' Read returns io.EOF and
// their pending HTTP handlers return); later requests get 503.
func (s *StreamableServer) Close() error {
	s.closed.Store(true)
	s.mu.Lock()
	all := make([]*srvSession, 0, len(s.sessions))
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
func (s *StreamableServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := s.checkOrigin(r); msg != "" {
		srvWriteError(w, http.StatusForbidden, jsonrpc.ID{}, srvCodeServerError, msg, nil)
		return
	}
	if s.closed.Load() {
		srvWriteError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, srvCodeServerError, "server is shutting down", nil)
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.servePOST(w, r)
	case http.MethodGet:
		s.serveGET(w, r)
	case http.MethodDelete:
		s.serveDELETE(w, r)
	default:
		w.Header()["Allow"] = srvAllowHdr
		srvWriteError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, srvCodeServerError,
			fmt.Sprintf("method %s not allowed; use GET, POST or DELETE", r.Method), nil)
	}
}

// checkOrigin implements DNS-rebinding protection. It returns a reason when
// the request must be rejected.
func (s *StreamableServer) checkOrigin(r *http.Request) string {
	hostname := srvHostname(r.Host)
	loopbackHost := srvIsLoopbackName(hostname)
	if !loopbackHost && !s.anyHost && srvLoopbackListener(r) &&
		!s.allowedHosts[strings.ToLower(r.Host)] && !s.allowedHosts[strings.ToLower(hostname)] {
		return fmt.Sprintf("Forbidden: Host %q is not allowed on a loopback listener", r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" || s.anyOrigin || s.allowedOrigins[strings.ToLower(strings.TrimRight(origin, "/"))] {
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

// srvLoopbackListener reports whether the request arrived on a loopback
// address.
func srvLoopbackListener(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || addr == nil {
		return false
	}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// srvHostname returns the host part of a Host header value, without port or
// IPv6 brackets.
func srvHostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

func srvIsLoopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkVersion validates a present MCP-Protocol-Version header and returns
// the error data to send when it is unsupported.
func srvCheckVersion(r *http.Request) (string, []byte) {
	v := r.Header[srvHeaderProtocol]
	if len(v) == 0 {
		return "", nil
	}
	for _, ok := range srvVersions {
		if v[0] == ok {
			return "", nil
		}
	}
	data, _ := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{srvVersions, v[0]})
	return fmt.Sprintf("unsupported %s %q (supported: %s)", srvHeaderProtocol, v[0], strings.Join(srvVersions, ", ")), data
}

func (s *StreamableServer) servePOST(w http.ResponseWriter, r *http.Request) {
	if !srvIsJSONType(r.Header.Get("Content-Type")) {
		srvWriteError(w, http.StatusUnsupportedMediaType, jsonrpc.ID{}, srvCodeServerError,
			"Content-Type must be application/json", nil)
		return
	}
	if jsonOK, sseOK := srvAccepts(r.Header["Accept"]); !jsonOK || !sseOK {
		srvWriteError(w, http.StatusNotAcceptable, jsonrpc.ID{}, srvCodeServerError,
			"Accept must allow both application/json and text/event-stream", nil)
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
	req, isReq := msg.(*jsonrpc.Request)
	var reqID jsonrpc.ID
	if isReq {
		reqID = req.ID
	}
	if reason, data := srvCheckVersion(r); reason != "" {
		srvWriteError(w, http.StatusBadRequest, reqID, srvCodeUnsupportedVersion, reason, data)
		return
	}

	var sess *srvSession
	created := false
	if sid := r.Header[srvHeaderSession]; len(sid) > 0 && sid[0] != "" {
		if sess = s.lookup(sid[0]); sess == nil {
			srvWriteError(w, http.StatusNotFound, reqID, srvCodeServerError, "session not found", nil)
			return
		}
	} else {
		if !isReq || !req.IsCall() || req.Method != "initialize" {
			srvWriteError(w, http.StatusBadRequest, reqID, srvCodeServerError,
				"Bad Request: missing "+srvHeaderSession+" header (only an initialize request may start a session)", nil)
			return
		}
		if sess = s.newSession(); sess == nil {
			srvWriteError(w, http.StatusServiceUnavailable, reqID, srvCodeServerError, "server is shutting down", nil)
			return
		}
		created = true
		sess.peer = PeerFromContext(r.Context())
		s.accept(sess)
	}
	sess.enter()
	defer sess.leave()

	if isReq && req.IsCall() {
		sess.serveCall(w, r, req, created)
		return
	}
	// A notification or a response: deliver it and acknowledge.
	switch sess.deliver(r.Context(), msg) {
	case nil:
		w.WriteHeader(http.StatusAccepted)
	case errSrvSessionClosed:
		srvWriteError(w, sess.closedStatus(), jsonrpc.ID{}, srvCodeServerError, "session terminated", nil)
	default:
		// The client is gone; there is nobody to answer.
	}
}

// srvDecode decodes one JSON-RPC message. On failure msg is nil and status,
// code and reason describe the error response.
func srvDecode(body []byte) (msg jsonrpc.Message, status int, code int64, reason string) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "empty request body"
	}
	if trimmed[0] == '[' {
		return nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			"JSON-RPC batches are not supported: send one message per POST"
	}
	msg, err := wire.Decode(body)
	if err == nil {
		return msg, 0, 0, ""
	}
	if !json.Valid(body) {
		return nil, http.StatusBadRequest, jsonrpc.CodeParseError, fmt.Sprintf("parse error: %v", err)
	}
	return nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid JSON-RPC message: %v", err)
}

func (s *StreamableServer) serveGET(w http.ResponseWriter, r *http.Request) {
	if _, sseOK := srvAccepts(r.Header["Accept"]); !sseOK {
		srvWriteError(w, http.StatusNotAcceptable, jsonrpc.ID{}, srvCodeServerError,
			"Accept must allow text/event-stream", nil)
		return
	}
	sess, ok := s.sessionFor(w, r)
	if !ok {
		return
	}
	sess.enter()
	defer sess.leave()
	sess.serveStandalone(w, r)
}

func (s *StreamableServer) serveDELETE(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.sessionFor(w, r)
	if !ok {
		return
	}
	sess.close()
	w.WriteHeader(http.StatusNoContent)
}

// sessionFor validates the protocol version and session header of a GET or
// DELETE and returns the session, or writes an error.
func (s *StreamableServer) sessionFor(w http.ResponseWriter, r *http.Request) (*srvSession, bool) {
	if reason, data := srvCheckVersion(r); reason != "" {
		srvWriteError(w, http.StatusBadRequest, jsonrpc.ID{}, srvCodeUnsupportedVersion, reason, data)
		return nil, false
	}
	sid := r.Header[srvHeaderSession]
	if len(sid) == 0 || sid[0] == "" {
		srvWriteError(w, http.StatusBadRequest, jsonrpc.ID{}, srvCodeServerError,
			fmt.Sprintf("Bad Request: %s requires an %s header", r.Method, srvHeaderSession), nil)
		return nil, false
	}
	sess := s.lookup(sid[0])
	if sess == nil {
		srvWriteError(w, http.StatusNotFound, jsonrpc.ID{}, srvCodeServerError, "session not found", nil)
		return nil, false
	}
	return sess, true
}

func (s *StreamableServer) lookup(id string) *srvSession {
	s.mu.Lock()
	sess := s.sessions[id]
	s.mu.Unlock()
	return sess
}

// newSession registers a new session, or returns nil when the server is
// closed.
func (s *StreamableServer) newSession() *srvSession {
	sess := &srvSession{
		srv:   s,
		id:    rand.Text(),
		in:    make(chan jsonrpc.Message, srvIncomingQueue),
		done:  make(chan struct{}),
		calls: make(map[jsonrpc.ID]*srvStream),
	}
	sess.touch()
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil
	}
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	if s.idle > 0 {
		sess.mu.Lock()
		if !sess.closed {
			sess.timer = time.AfterFunc(s.idle, sess.idleCheck)
		}
		sess.mu.Unlock()
	}
	s.log.Debug("streamable session opened", "session", sess.id)
	return sess
}

var (
	errSrvTooLarge      = errors.New("request body too large")
	errSrvSessionClosed = errors.New("session closed")
)

// srvReadBody reads the whole body, at most max bytes, allocating it once
// when the length is known. The returned slice is owned by the caller.
func srvReadBody(r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, errSrvTooLarge
	}
	if r.ContentLength >= 0 {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, fmt.Errorf("reading %d bytes: %w", len(b), err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading chunked body: %w", err)
	}
	if int64(len(b)) > max {
		return nil, errSrvTooLarge
	}
	return b, nil
}

// srvAccepts reports whether the Accept header values allow JSON and SSE.
func srvAccepts(values []string) (jsonOK, sseOK bool) {
	for _, v := range values {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			tok, _, _ = strings.Cut(tok, ";")
			tok = strings.TrimSpace(tok)
			switch {
			case tok == "*/*":
				jsonOK, sseOK = true, true
			case strings.EqualFold(tok, "application/json"), strings.EqualFold(tok, "application/*"):
				jsonOK = true
			case strings.EqualFold(tok, "text/event-stream"), strings.EqualFold(tok, "text/*"):
				sseOK = true
			}
		}
	}
	return jsonOK, sseOK
}

// srvPrefersSSE reports whether the Accept header values list
// text/event-stream before application/json (the client's order of
// preference when no q-values distinguish them).
func srvPrefersSSE(values []string) bool {
	for _, v := range values {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			tok, _, _ = strings.Cut(tok, ";")
			switch tok = strings.TrimSpace(tok); {
			case strings.EqualFold(tok, "text/event-stream"):
				return true
			case strings.EqualFold(tok, "application/json"):
				return false
			}
		}
	}
	return false
}

func srvIsJSONType(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(ct), "application/json")
}

// srvWriteError writes a JSON-RPC error response with the given HTTP status.
// An invalid id is written as null.
func srvWriteError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, message string, data []byte) {
	b := make([]byte, 0, 96+len(message)+len(data))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = srvAppendID(b, id)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, code, 10)
	b = append(b, `,"message":`...)
	m, _ := json.Marshal(message)
	b = append(b, m...)
	if len(data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	b = append(b, "}}"...)
	h := w.Header()
	h["Content-Type"] = srvCTJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func srvAppendID(b []byte, id jsonrpc.ID) []byte {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.AppendInt(b, v, 10)
	case string:
		s, _ := json.Marshal(v)
		return append(b, s...)
	default:
		return append(b, "null"...)
	}
}

// srvSession is one client session; it is the [Connection] handed to accept.
type srvSession struct {
	peer any // who opened it; see Peer
	srv  *StreamableServer
	id   string
	in   chan jsonrpc.Message
	done chan struct{}
	once sync.Once
	refs atomic.Int32 // HTTP requests in flight
	last atomic.Int64 // time of the last request end, since srv.epoch

	mu         sync.Mutex
	closed     bool
	timer      *time.Timer
	calls      map[jsonrpc.ID]*srvStream // open POST streams by request id
	standalone *srvStream                // the open GET stream, if any
	backlog    []*[]byte                 // standalone messages while no GET is open
}

// srvStream is the queue of encoded messages waiting to be written to one
// HTTP response. Its fields other than notify and ka are guarded by the
// session's mu; only the handler goroutine writes to the response.
type srvStream struct {
	id      jsonrpc.ID
	isInit  bool
	q       []*[]byte
	spare   []*[]byte
	final   bool // the response is queued; the stream ends after it
	errResp bool // the queued response is an error
	failed  bool // the queue overflowed
	notify  chan struct{}
	ka      *time.Timer
}

func (st *srvStream) signal() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

func srvGetStream() *srvStream { return srvStreamPool.Get().(*srvStream) }

// srvPutStream recycles a stream that no session references any more.
func srvPutStream(st *srvStream) {
	for i, b := range st.q {
		srvPutBuf(b)
		st.q[i] = nil
	}
	st.q = st.q[:0]
	st.id, st.isInit, st.final, st.errResp, st.failed = jsonrpc.ID{}, false, false, false, false
	select {
	case <-st.notify:
	default:
	}
	if st.ka != nil {
		st.ka.Stop()
	}
	srvStreamPool.Put(st)
}

func srvPutBuf(bp *[]byte) {
	if cap(*bp) > srvMaxPooledBuf {
		return
	}
	*bp = (*bp)[:0]
	srvBufPool.Put(bp)
}

// SessionID returns the session's Mcp-Session-Id.
func (sess *srvSession) SessionID() string { return sess.id }

// Read returns the next message the client sent, in arrival order, or
// io.EOF once the session is closed.
func (sess *srvSession) Read(ctx context.Context) (jsonrpc.Message, error) {
	return readInbox(ctx, sess.in, sess.done)
}

// readInbox is the Read of the server sessions: the next delivered message,
// io.EOF once done is closed (even when messages are still queued), or the
// context's error.
func readInbox(ctx context.Context, in <-chan jsonrpc.Message, done <-chan struct{}) (jsonrpc.Message, error) {
	select {
	case <-done:
		return nil, io.EOF
	default:
	}
	select {
	case msg := <-in:
		return msg, nil
	case <-done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write queues msg for the client without waiting for it. A response goes to
// the POST of its request and is dropped (returning nil) when that POST has
// ended; a request or notification goes to the POST of the request named by
// [RelatedFromContext] while it is open, else to the standalone stream.
func (sess *srvSession) Write(ctx context.Context, msg jsonrpc.Message) error {
	bp := srvBufPool.Get().(*[]byte)
	b, err := wire.Append((*bp)[:0], msg)
	if err != nil {
		srvPutBuf(bp)
		return fmt.Errorf("streamable session %s: encoding message: %w", sess.id, err)
	}
	*bp = b

	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		srvPutBuf(bp)
		return fmt.Errorf("streamable session %s: %w", sess.id, ErrClosed)
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		st := sess.calls[m.ID]
		if st == nil {
			sess.mu.Unlock()
			srvPutBuf(bp)
			sess.srv.log.Debug("dropping response for a request whose HTTP stream has ended",
				"session", sess.id, "id", m.ID.Raw())
			return nil
		}
		delete(sess.calls, m.ID)
		st.final = true
		st.errResp = m.Error != nil
		st.q = append(st.q, bp) // the final message may exceed the bound by one
		st.signal()
	default:
		var st *srvStream
		if id, ok := RelatedFromContext(ctx); ok {
			st = sess.calls[id]
		}
		if st == nil {
			st = sess.standalone
		}
		var failedID jsonrpc.ID
		failed, dropped := false, 0
		if st != nil && len(st.q) >= srvMaxStreamQueue {
			failed, failedID = true, st.id
			sess.failLocked(st)
			st = nil
		}
		if st == nil {
			dropped = sess.backlogLocked(bp)
		} else {
			st.q = append(st.q, bp)
			st.signal()
		}
		sess.mu.Unlock()
		if failed {
			sess.srv.log.Warn("streamable client too slow: failing its stream",
				"session", sess.id, "request", failedID.Raw(), "queued", srvMaxStreamQueue)
		}
		if dropped > 0 {
			sess.srv.log.Warn("standalone stream backlog full: dropped oldest messages",
				"session", sess.id, "dropped", dropped)
		}
		return nil
	}
	sess.mu.Unlock()
	return nil
}

// failLocked detaches an overflowing stream: its handler ends the response.
// A POST stream's pending request is then cancelled towards the gateway.
func (sess *srvSession) failLocked(st *srvStream) {
	st.failed = true
	if st == sess.standalone {
		sess.standalone = nil
	} else if sess.calls[st.id] == st {
		delete(sess.calls, st.id)
	}
	st.signal()
}

// backlogLocked keeps standalone messages until a GET stream opens, dropping
// the oldest beyond srvMaxBacklog. It returns how many it dropped.
func (sess *srvSession) backlogLocked(bps ...*[]byte) int {
	sess.backlog = append(sess.backlog, bps...)
	over := len(sess.backlog) - srvMaxBacklog
	if over <= 0 {
		return 0
	}
	for _, b := range sess.backlog[:over] {
		srvPutBuf(b)
	}
	n := copy(sess.backlog, sess.backlog[over:])
	clear(sess.backlog[n:])
	sess.backlog = sess.backlog[:n]
	return over
}

// Close ends the session: pending handlers return and Read returns io.EOF.
func (sess *srvSession) Close() error {
	sess.close()
	return nil
}

func (sess *srvSession) close() {
	sess.once.Do(func() {
		s := sess.srv
		s.mu.Lock()
		if s.sessions[sess.id] == sess {
			delete(s.sessions, sess.id)
		}
		s.mu.Unlock()
		sess.mu.Lock()
		sess.closed = true
		backlog := sess.backlog
		sess.backlog = nil
		if sess.timer != nil {
			sess.timer.Stop()
		}
		sess.mu.Unlock()
		for _, b := range backlog {
			srvPutBuf(b)
		}
		close(sess.done)
		s.log.Debug("streamable session closed", "session", sess.id)
	})
}

func (sess *srvSession) closedStatus() int {
	if sess.srv.closed.Load() {
		return http.StatusServiceUnavailable
	}
	return http.StatusNotFound
}

func (sess *srvSession) touch() { sess.last.Store(int64(time.Since(sess.srv.epoch))) }

func (sess *srvSession) enter() { sess.refs.Add(1) }

func (sess *srvSession) leave() {
	sess.touch()
	sess.refs.Add(-1)
}

// idleCheck runs on the idle timer: it closes the session when no request is
// in flight and none ended within the idle timeout, and re-arms otherwise.
func (sess *srvSession) idleCheck() {
	idle := sess.srv.idle
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		return
	}
	if sess.refs.Load() > 0 {
		sess.timer.Reset(idle)
		sess.mu.Unlock()
		return
	}
	since := time.Since(sess.srv.epoch) - time.Duration(sess.last.Load())
	if since < idle {
		sess.timer.Reset(idle - since)
		sess.mu.Unlock()
		return
	}
	sess.mu.Unlock()
	sess.srv.log.Info("closing idle streamable session", "session", sess.id, "idle", since)
	sess.close()
}

// deliver hands msg to Read. It returns errSrvSessionClosed or the request
// context's error when msg could not be delivered.
func (sess *srvSession) deliver(ctx context.Context, msg jsonrpc.Message) error {
	select {
	case sess.in <- msg:
		return nil
	case <-sess.done:
		return errSrvSessionClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// srvEnd tells why a stream's handler stopped.
type srvEnd int

const (
	srvEndNone     srvEnd = iota // still running
	srvEndResponse               // the response was written
	srvEndClient                 // the client went away or a write failed
	srvEndSession                // the session was closed
	srvEndFailed                 // the stream overflowed
)

// srvOut writes one HTTP response, deciding lazily between a single JSON
// body and an event stream.
type srvOut struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	sessionID string // sent as Mcp-Session-Id with the headers, when set
	started   bool
	sse       bool
	// preferSSE is set when the client's Accept header names
	// text/event-stream before application/json: then even a lone
	// response travels as an event stream.
	preferSSE bool
}

func (o *srvOut) startSSE() {
	h := o.w.Header()
	h["Content-Type"] = srvCTSSE
	h["Cache-Control"] = srvNoCache
	if o.sessionID != "" {
		h[srvHeaderSession] = []string{o.sessionID}
	}
	o.w.WriteHeader(http.StatusOK)
	o.started, o.sse = true, true
	o.rc = http.NewResponseController(o.w)
}

// writeBatch writes queued messages; final means the last one is the
// response that ends the stream.
func (o *srvOut) writeBatch(batch []*[]byte, final bool) error {
	if len(batch) == 0 {
		return nil
	}
	if !o.started && final && len(batch) == 1 && !o.preferSSE {
		// Fast path: the response came first, answer with plain JSON.
		b := *batch[0]
		h := o.w.Header()
		h["Content-Type"] = srvCTJSON
		if len(b) > 2048 {
			// Smaller bodies get a Content-Length from net/http itself.
			h["Content-Length"] = []string{strconv.Itoa(len(b))}
		}
		if o.sessionID != "" {
			h[srvHeaderSession] = []string{o.sessionID}
		}
		o.w.WriteHeader(http.StatusOK)
		o.started = true
		_, err := o.w.Write(b)
		return err
	}
	if !o.started {
		o.startSSE()
	}
	_ = o.rc.SetWriteDeadline(time.Now().Add(srvWriteTimeout))
	for _, bp := range batch {
		if err := srvWriteEvent(o.w, *bp); err != nil {
			return err
		}
	}
	return o.rc.Flush()
}

func (o *srvOut) keepAlive() error {
	if !o.started {
		o.startSSE()
	}
	_ = o.rc.SetWriteDeadline(time.Now().Add(srvWriteTimeout))
	if _, err := o.w.Write(srvKeepAlive); err != nil {
		return err
	}
	return o.rc.Flush()
}

// finish clears the write deadline so it cannot affect the next request on
// a kept-alive connection.
func (o *srvOut) finish() {
	if o.rc != nil {
		_ = o.rc.SetWriteDeadline(time.Time{})
	}
}

// srvWriteEvent writes data as one SSE "message" event; line breaks in data
// (legal JSON whitespace) continue on further data lines.
func srvWriteEvent(w io.Writer, data []byte) error {
	if _, err := w.Write(srvEventStart); err != nil {
		return err
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		if _, err := w.Write(data[:i]); err != nil {
			return err
		}
		j := i + 1
		if data[i] == '\r' && j < len(data) && data[j] == '\n' {
			j++
		}
		data = data[j:]
		if _, err := w.Write(srvDataCont); err != nil {
			return err
		}
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err := w.Write(srvEventEnd)
	return err
}

// pump writes the messages queued on st until the response has been
// written, the stream fails, the client goes away or the session closes.
func (sess *srvSession) pump(ctx context.Context, o *srvOut, st *srvStream) srvEnd {
	batch := st.spare
	defer func() { st.spare = batch[:0] }()
	var kaC <-chan time.Time
	if ka := sess.srv.keepAlive; ka > 0 {
		if st.ka == nil {
			st.ka = time.NewTimer(ka)
		} else {
			st.ka.Reset(ka)
		}
		kaC = st.ka.C
	}
	for {
		stop := srvEndNone
		select {
		case <-st.notify:
		case <-ctx.Done():
			stop = srvEndClient
		case <-sess.done:
			stop = srvEndSession
		case <-kaC:
			if err := o.keepAlive(); err != nil {
				return srvEndClient
			}
			st.ka.Reset(sess.srv.keepAlive)
			continue
		}
		sess.mu.Lock()
		batch, st.q = st.q, batch[:0]
		final, failed := st.final, st.failed
		sess.mu.Unlock()

		var err error
		if stop != srvEndClient {
			err = o.writeBatch(batch, final)
		}
		for i, b := range batch {
			srvPutBuf(b)
			batch[i] = nil
		}
		batch = batch[:0]
		switch {
		case stop == srvEndClient || err != nil:
			return srvEndClient
		case final:
			return srvEndResponse
		case failed:
			return srvEndFailed
		case stop != srvEndNone:
			return stop
		}
		if kaC != nil {
			st.ka.Reset(sess.srv.keepAlive)
		}
	}
}

// serveCall serves a POST carrying a request: it registers the request's
// stream, delivers the request and writes what the gateway sends back.
func (sess *srvSession) serveCall(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request, created bool) {
	st := srvGetStream()
	st.id = req.ID
	st.isInit = req.Method == "initialize"
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		srvPutStream(st)
		srvWriteError(w, sess.closedStatus(), req.ID, srvCodeServerError, "session terminated", nil)
		return
	}
	if _, dup := sess.calls[req.ID]; dup {
		sess.mu.Unlock()
		srvPutStream(st)
		srvWriteError(w, http.StatusBadRequest, req.ID, jsonrpc.CodeInvalidRequest,
			"duplicate in-flight request id", nil)
		return
	}
	sess.calls[req.ID] = st
	sess.mu.Unlock()

	o := srvOut{w: w, preferSSE: srvPrefersSSE(r.Header["Accept"])}
	if created {
		o.sessionID = sess.id
	}
	ctx := r.Context()
	end, delivered := srvEndClient, false
	switch err := sess.deliver(ctx, req); {
	case err == nil:
		delivered = true
		end = sess.pump(ctx, &o, st)
	case errors.Is(err, errSrvSessionClosed):
		end = srvEndSession
	}
	o.finish()

	sess.mu.Lock()
	if sess.calls[st.id] == st {
		delete(sess.calls, st.id)
	}
	answered := st.final
	initOK := st.final && !st.errResp
	sess.mu.Unlock()
	isInit := st.isInit
	srvPutStream(st)

	switch end {
	case srvEndSession:
		if !o.started {
			srvWriteError(w, sess.closedStatus(), req.ID, srvCodeServerError, "session terminated", nil)
		}
	case srvEndFailed:
		if !o.started {
			srvWriteError(w, http.StatusServiceUnavailable, req.ID, jsonrpc.CodeInternalError,
				"response stream overflowed", nil)
		}
	}
	if (end == srvEndClient || end == srvEndFailed) && delivered && !answered && !isInit {
		sess.cancelUpstream(req.ID)
	}
	if created && (end != srvEndResponse || !initOK) {
		// The client cannot use a session whose initialize failed.
		sess.close()
	}
}

// cancelUpstream delivers a synthesized notifications/cancelled for a
// request whose client went away before its response was written.
func (sess *srvSession) cancelUpstream(id jsonrpc.ID) {
	params := make([]byte, 0, 64)
	params = append(params, `{"requestId":`...)
	params = srvAppendID(params, id)
	params = append(params, `,"reason":"client disconnected"}`...)
	msg := &jsonrpc.Request{Method: "notifications/cancelled", Params: params}
	select {
	case sess.in <- msg:
		return
	case <-sess.done:
		return
	default:
	}
	t := time.NewTimer(srvCancelTimeout)
	defer t.Stop()
	select {
	case sess.in <- msg:
	case <-sess.done:
	case <-t.C:
		sess.srv.log.Warn("dropping synthesized cancellation: the session is not being read",
			"session", sess.id, "request", id.Raw())
	}
}

// serveStandalone serves the session's GET stream.
func (sess *srvSession) serveStandalone(w http.ResponseWriter, r *http.Request) {
	st := srvGetStream()
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		srvPutStream(st)
		srvWriteError(w, sess.closedStatus(), jsonrpc.ID{}, srvCodeServerError, "session terminated", nil)
		return
	}
	if sess.standalone != nil {
		sess.mu.Unlock()
		srvPutStream(st)
		srvWriteError(w, http.StatusConflict, jsonrpc.ID{}, srvCodeServerError,
			"a standalone SSE stream is already open for this session", nil)
		return
	}
	sess.standalone = st
	st.q = append(st.q, sess.backlog...)
	clear(sess.backlog)
	sess.backlog = sess.backlog[:0]
	if len(st.q) > 0 {
		st.signal()
	}
	sess.mu.Unlock()

	o := srvOut{w: w}
	o.startSSE()
	_ = o.rc.SetWriteDeadline(time.Now().Add(srvWriteTimeout))
	_, err := w.Write(srvOpened)
	if err == nil {
		err = o.rc.Flush()
	}
	if err == nil {
		sess.pump(r.Context(), &o, st)
	}
	o.finish()

	// Keep what could not be written for the next GET.
	sess.mu.Lock()
	if sess.standalone == st {
		sess.standalone = nil
	}
	dropped := 0
	if !sess.closed && len(st.q) > 0 {
		// The unwritten messages are older than those queued since.
		newer := sess.backlog
		sess.backlog = st.q
		st.q = nil
		dropped = sess.backlogLocked(newer...)
	}
	sess.mu.Unlock()
	srvPutStream(st)
	if dropped > 0 {
		sess.srv.log.Warn("standalone stream backlog full: dropped oldest messages",
			"session", sess.id, "dropped", dropped)
	}
}

// PeerInfo returns who opened the connection (see Peer).
func (s *srvSession) PeerInfo() any { return s.peer }
