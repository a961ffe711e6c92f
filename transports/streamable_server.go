package transports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// StreamableServerOptions configures a [StreamableServer].
type StreamableServerOptions struct {
	// Logger receives warnings (dropped messages, failed streams) and debug
	// details. Nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes caps the size of a POST body; larger bodies get 413 and a
	// JSON-RPC error body. Zero or negative means 4 MiB.
	MaxBodyBytes int64
	// BodyReadTimeout bounds the reading of one POST body; a body not
	// received in time gets 408 and its connection is closed. Zero means
	// the BodyReadTimeout of the [HTTPLimits] of the [NewHTTPServer] that
	// serves the request, or 30 s under any other server; negative means
	// no limit. It never applies to the response streams.
	BodyReadTimeout time.Duration
	// Without2026 turns the 2026-07-28 revision off: its POSTs are refused
	// as an unsupported version (-32022), as before the revision, so that
	// clients fall back to a 2025 session.
	Without2026 bool
	// AllowedOrigins lists Origin header values accepted besides loopback
	// origins (for loopback hosts) and same-origin requests. "*" accepts any
	// Origin. The rules are those of [Guard].
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
	// EventStoreSize is the number of recent events, counted in messages,
	// each session keeps for stream resumption (Last-Event-ID); whatever the
	// size, a session keeps at most 4 MiB of event data, dropping the
	// oldest first. Zero means 256; negative disables event ids and
	// resumption.
	EventStoreSize int
	// Fleet, when set, shares the server's sessions with the other
	// replicas of a fleet (see [StreamableFleet]).
	Fleet StreamableFleet
	// EventIDPrefix starts every SSE event id this server writes; a
	// Last-Event-ID without it is not this server's (another replica's of
	// a fleet): the stream starts fresh, as for an id no longer stored.
	// It must not contain CR, LF or NUL.
	EventIDPrefix string
	// Budget, when set, returns the budget account a new session's event
	// store charges, from the peer of [PeerFromContext] (nil: none); the
	// session releases it when it ends. Over the account's budget a
	// session drops its oldest events first, and a client resuming from
	// an event no longer kept gets a fresh stream. Each open GET stream
	// is charged to it too, a fixed estimate, and one over it is refused
	// with 429.
	Budget func(peer any) *budget.Account
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
// Resumption: unless EventStoreSize is negative, every event written on
// an event stream carries an SSE id "<stream>-<seq>" (stream 0 is the
// standalone stream, each POST stream has its own number; seq counts the
// session's events) and is kept in the session's bounded event store. A GET
// with a Last-Event-ID gets the events of that id's stream written after it,
// in order and under their original ids, then the stream goes on live: the
// standalone stream continues, and a POST stream whose response was not yet
// written continues on that GET until the response, as the 2025-11-25
// specification's "Resumability and Redelivery" describes. A malformed
// Last-Event-ID gets 400. When events the client missed are no longer stored
// (the store is bounded), or the id is not one of this session's, the
// stream starts fresh (but an id of another fleet replica goes first to
// the Fleet's [FleetResumer], which relays that replica's POST stream): it first carries notifications/tools/list_changed,
// prompts/list_changed and resources/list_changed, so that the client
// re-lists, then whatever of the stream is still stored. Event streams of
// clients that announce protocol 2025-11-25 start with a priming event (an
// id, a "retry:" field and empty data, SEP-1699). When such a client drops a
// POST stream before its response, the request is not cancelled: the stream
// is kept (at most 64 per session) until a GET resumes it, the client sends
// notifications/cancelled for it or the session ends. Other clients' dropped
// POST streams cancel their request, as before. The store is guarded by the
// session's lock, lives as long as the session and is dropped with it.
//
// JSON-RPC batches are not supported.
//
// Concurrency and lifetime: a StreamableServer is safe for concurrent use
// and serves any number of requests at once; its options are fixed by
// [NewStreamableServer]. Every request first passes the server's [Guard].
// A session lives from its initialize POST until the client DELETEs it, it
// stays idle for the IdleTimeout, the gateway closes its Connection or
// [StreamableServer.Close] is called; then its Read returns io.EOF, its
// pending handlers return and later requests naming it get 404 (503 after
// Close). Write never blocks on the client: messages are queued per stream
// (bounded; a stream whose client does not keep up is failed).
type StreamableServer struct {
	serverBase
	no2026   bool // Without2026
	idle     time.Duration
	epoch    time.Time
	storeLen int // EventStoreSize
	sessions sessionTable[*streamableSession]
	fleet    StreamableFleet
	// eventPrefix is EventIDPrefix.
	eventPrefix string
	budget      func(peer any) *budget.Account
}

const (
	defaultIdleTimeout = 30 * time.Minute
	// maxStreamQueue bounds the messages waiting to be written on one
	// stream; a stream whose client does not keep up is failed.
	maxStreamQueue = 1024
	// maxBacklog bounds the messages kept for the standalone stream while
	// no GET is open; the oldest are dropped.
	maxBacklog = 256
	// cancelTimeout bounds how long a handler waits to hand a synthesized
	// cancellation to a reader that does not read.
	cancelTimeout = 5 * time.Second

	// codeUnsupportedVersion is the 2026-07-28 UnsupportedProtocolVersion
	// code; older clients treat it as any error, newer ones fall back.
	codeUnsupportedVersion = -32022
)

var (
	supportedVersions = []string{Protocol2026, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

	streamableAllow = []string{"GET, POST, DELETE"}

	sseOpened = []byte(": stream opened\n\n")
)

// NewStreamableServer returns a handler for one MCP endpoint. accept (not
// nil) is called synchronously in the HTTP handler with the Connection of
// every new session, before the session's initialize request is delivered;
// the caller reads from it until Read returns io.EOF.
func NewStreamableServer(accept func(Connection), opts StreamableServerOptions) *StreamableServer {
	s := &StreamableServer{
		serverBase: newServerBase(accept, opts.Logger, opts.MaxBodyBytes, opts.KeepAlive,
			GuardOptions{AllowedOrigins: opts.AllowedOrigins, AllowedHosts: opts.AllowedHosts}),
		idle:     opts.IdleTimeout,
		epoch:    time.Now(),
		storeLen: opts.EventStoreSize,
		no2026:   opts.Without2026,
		fleet:    opts.Fleet,
		budget:   opts.Budget,
		eventPrefix: strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' || r == 0 {
				return -1
			}
			return r
		}, opts.EventIDPrefix),
	}
	s.bodyTimeout = opts.BodyReadTimeout
	s.streams = opts.Budget
	if s.idle == 0 {
		s.idle = defaultIdleTimeout
	}
	return s
}

// Close closes every session (their Connections' Read returns io.EOF and
// their pending HTTP handlers return); later requests get 503.
func (s *StreamableServer) Close() error {
	for _, sess := range s.sessions.shutdown() {
		sess.close()
	}
	return nil
}

// ServeHTTP implements [http.Handler].
func (s *StreamableServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.admit(w, r, s.sessions.isClosed()) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.servePOST(w, r)
	case http.MethodGet, http.MethodDelete:
		if v := r.Header[hdrProtocolVersion]; len(v) > 0 && v[0] == Protocol2026 && !s.no2026 {
			// The revision has no sessions: no GET stream, nothing to delete.
			w.Header()["Allow"] = []string{"POST"}
			writeJSONRPCError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, jsonrpc.CodeMethodNotFound,
				fmt.Sprintf("%s has no %s: protocol %s is sessionless and POST-only", r.Method, hdrSessionID, Protocol2026), nil)
			return
		}
		if r.Method == http.MethodGet {
			s.serveGET(w, r)
		} else {
			s.serveDELETE(w, r)
		}
	default:
		w.Header()["Allow"] = streamableAllow
		writeJSONRPCError(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, codeServerError,
			fmt.Sprintf("method %s not allowed; use GET, POST or DELETE", r.Method), nil)
	}
}

// checkVersion validates a present MCP-Protocol-Version header and returns
// the error data to send when it is unsupported.
func checkProtocolVersion(r *http.Request) (string, []byte) {
	v := r.Header[hdrProtocolVersion]
	if len(v) == 0 {
		return "", nil
	}
	for _, ok := range supportedVersions {
		if v[0] == ok {
			return "", nil
		}
	}
	return unsupportedVersion(v[0])
}

func (s *StreamableServer) servePOST(w http.ResponseWriter, r *http.Request) {
	if !requireJSON(w, r) {
		return
	}
	if jsonOK, sseOK := acceptsTypes(r.Header["Accept"]); !jsonOK || !sseOK {
		writeJSONRPCError(w, http.StatusNotAcceptable, jsonrpc.ID{}, codeServerError,
			"Accept must allow both application/json and text/event-stream", nil)
		return
	}
	msg := s.readPOSTMessage(w, r)
	if msg == nil {
		return
	}
	if isStatelessPOST(r, msg) {
		if s.no2026 {
			var id jsonrpc.ID
			if req, ok := msg.(*jsonrpc.Request); ok {
				id = req.ID
			}
			data, _ := json.Marshal(struct {
				Supported []string `json:"supported"`
				Requested string   `json:"requested"`
			}{supportedVersions[1:], Protocol2026})
			writeJSONRPCError(w, http.StatusBadRequest, id, codeUnsupportedVersion,
				fmt.Sprintf("protocol %s is turned off on this gateway (protocol_2026: false); supported: %s",
					Protocol2026, strings.Join(supportedVersions[1:], ", ")), data)
			return
		}
		s.serveStateless(w, r, msg)
		return
	}
	req, isReq := msg.(*jsonrpc.Request)
	var reqID jsonrpc.ID
	if isReq {
		reqID = req.ID
	}
	if reason, data := checkProtocolVersion(r); reason != "" {
		writeJSONRPCError(w, http.StatusBadRequest, reqID, codeUnsupportedVersion, reason, data)
		return
	}

	var sess *streamableSession
	created := false
	if sid := r.Header[hdrSessionID]; len(sid) > 0 && sid[0] != "" {
		if sess = s.lookupOrAdopt(r, sid[0]); sess == nil {
			writeJSONRPCError(w, http.StatusNotFound, reqID, codeServerError, "session not found", nil)
			return
		}
	} else {
		if !isReq || !req.IsCall() || req.Method != "initialize" {
			writeJSONRPCError(w, http.StatusBadRequest, reqID, codeServerError,
				"Bad Request: missing "+hdrSessionID+" header (only an initialize request may start a session)", nil)
			return
		}
		peer, id := PeerFromContext(r.Context()), ""
		if s.fleet != nil {
			id = s.fleet.SessionID(peer, req)
		}
		if sess, _ = s.openSession(id, peer); sess == nil {
			writeJSONRPCError(w, http.StatusServiceUnavailable, reqID, codeServerError, "server is shutting down", nil)
			return
		}
		created = true
		s.accept(sess)
	}
	sess.enter()
	defer sess.leave()

	if isReq && req.IsCall() {
		sess.serveCall(w, r, req, created)
		return
	}
	// A notification or a response: deliver it and acknowledge.
	if isReq && req.Method == "notifications/cancelled" {
		sess.forgetCancelled(req.Params)
	}
	switch sess.deliver(r.Context(), msg) {
	case nil:
		w.WriteHeader(http.StatusAccepted)
	case errSessionClosed:
		writeJSONRPCError(w, sess.closedStatus(), jsonrpc.ID{}, codeServerError, "session terminated", nil)
	default:
		// The client is gone; there is nobody to answer.
	}
}

func (s *StreamableServer) serveGET(w http.ResponseWriter, r *http.Request) {
	if _, sseOK := acceptsTypes(r.Header["Accept"]); !sseOK {
		writeJSONRPCError(w, http.StatusNotAcceptable, jsonrpc.ID{}, codeServerError,
			"Accept must allow text/event-stream", nil)
		return
	}
	sess, ok := s.sessionFor(w, r)
	if !ok {
		return
	}
	from, ok := sess.resumePointOf(w, r)
	if !ok {
		return
	}
	release := holdStream(w, sess.PeerInfo(), s.streams)
	if release == nil {
		return
	}
	defer release()
	sess.enter()
	defer sess.leave()
	if from != nil && from.stream != 0 {
		sess.serveResumedCall(w, r, from)
		return
	}
	if from != nil && from.foreign != "" {
		if fr, ok := s.fleet.(FleetResumer); ok && fr.ResumeElsewhere(w, r, sess.id, from.foreign) {
			return
		}
	}
	sess.serveStandalone(w, r, from)
}

func (s *StreamableServer) serveDELETE(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.sessionFor(w, r)
	if !ok {
		return
	}
	sess.close()
	if s.fleet != nil {
		s.fleet.Deleted(sess.id)
	}
	w.WriteHeader(http.StatusNoContent)
}

// sessionFor validates the protocol version and session header of a GET or
// DELETE and returns the session, or writes an error.
func (s *StreamableServer) sessionFor(w http.ResponseWriter, r *http.Request) (*streamableSession, bool) {
	if reason, data := checkProtocolVersion(r); reason != "" {
		writeJSONRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, codeUnsupportedVersion, reason, data)
		return nil, false
	}
	sid := r.Header[hdrSessionID]
	if len(sid) == 0 || sid[0] == "" {
		writeJSONRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, codeServerError,
			fmt.Sprintf("Bad Request: %s requires an %s header", r.Method, hdrSessionID), nil)
		return nil, false
	}
	sess := s.lookupOrAdopt(r, sid[0])
	if sess == nil {
		writeJSONRPCError(w, http.StatusNotFound, jsonrpc.ID{}, codeServerError, "session not found", nil)
		return nil, false
	}
	return sess, true
}

func (s *StreamableServer) lookup(id string) *streamableSession {
	sess, _ := s.sessions.get(id)
	return sess
}

// lookupOrAdopt finds session id, or adopts it from the fleet.
func (s *StreamableServer) lookupOrAdopt(r *http.Request, id string) *streamableSession {
	if sess := s.lookup(id); sess != nil {
		return sess
	}
	return s.adopt(r, id)
}

// openSession registers a new session under id ("": a random one), or
// returns nil when the server is closed. When a session of that id is
// registered already, it returns that one and fresh is false.
func (s *StreamableServer) openSession(id string, peer any) (sess *streamableSession, fresh bool) {
	sess = &streamableSession{
		srv:      s,
		calls:    make(map[jsonrpc.ID]*responseStream),
		store:    newEventStore(s.storeLen, nil),
		nextNum:  1,
		detached: make(map[uint64]*responseStream),
	}
	sess.init(peer)
	if id != "" {
		sess.id = id
	}
	if s.budget != nil && sess.store != nil {
		sess.store.acct, sess.store.mu = s.budget(peer), &sess.mu
	}
	sess.touch()
	if cur, added := s.sessions.addNew(sess.id, sess); !added {
		if sess.store != nil {
			sess.store.acct.Release()
		}
		return cur, false
	}
	if sess.store != nil {
		sess.store.acct.Register(sess.store)
	}
	if s.idle > 0 {
		sess.mu.Lock()
		if !sess.closed {
			sess.timer = time.AfterFunc(s.idle, sess.idleCheck)
		}
		sess.mu.Unlock()
	}
	s.log.Debug("streamable session opened", "session", sess.id)
	return sess, true
}

// streamableSession is one client session; it is the [Connection] handed
// to accept. Its id is the Mcp-Session-Id.
//
// Read must not be called concurrently with itself; Write and Close may be
// called concurrently with anything, and Close more than once. Close, a
// DELETE from the client, the idle timeout and [StreamableServer.Close] end
// the session: Read then returns io.EOF, pending HTTP handlers return and
// Write fails with [ErrClosed].
type streamableSession struct {
	serverSession
	srv  *StreamableServer
	refs atomic.Int32 // HTTP requests in flight
	last atomic.Int64 // time of the last request end, since srv.epoch

	mu         sync.Mutex
	closed     bool
	timer      *time.Timer
	calls      map[jsonrpc.ID]*responseStream // open POST streams by request id
	standalone *responseStream                // the open GET stream, if any
	backlog    []*[]byte                      // standalone messages while no GET is open
	store      *eventStore                    // nil when resumption is off
	seq        uint64                         // seq of the newest event id
	nextNum    uint64                         // number of the next POST stream
	detached   map[uint64]*responseStream     // POST streams awaiting a resuming GET
}

// responseStream is the queue of encoded messages waiting to be written to one
// HTTP response. Its fields other than notify and ka are guarded by the
// session's mu; only the handler goroutine writes to the response.
type responseStream struct {
	id      jsonrpc.ID
	num     uint64 // stream number in event ids; 0 for the standalone stream
	isInit  bool
	primed  bool // a priming event was written: the client may resume
	q       []*[]byte
	spare   []*[]byte
	final   bool // the response is queued; the stream ends after it
	errResp bool // the queued response is an error
	failed  bool // the queue overflowed
	notify  chan struct{}
	ka      *time.Timer
}

func (st *responseStream) signal() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

func newStream() *responseStream { return &responseStream{notify: make(chan struct{}, 1)} }

// Write queues msg for the client without waiting for it. A response goes to
// the POST of its request and is dropped (returning nil) when that POST has
// ended; a request or notification goes to the POST of the request named by
// [RelatedFromContext] while it is open, else to the standalone stream.
func (sess *streamableSession) Write(ctx context.Context, msg jsonrpc.Message) error {
	bp, err := encodePooled(msg)
	if err != nil {
		return fmt.Errorf("streamable session %s: encoding message: %w", sess.id, err)
	}

	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		putEncodeBuf(bp)
		return fmt.Errorf("streamable session %s: %w", sess.id, ErrClosed)
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		st := sess.calls[m.ID]
		if st == nil {
			sess.mu.Unlock()
			putEncodeBuf(bp)
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
		var st *responseStream
		if id, ok := RelatedFromContext(ctx); ok {
			st = sess.calls[id]
		}
		if st == nil {
			st = sess.standalone
		}
		var failedID jsonrpc.ID
		failed, dropped := false, 0
		if st != nil && len(st.q) >= maxStreamQueue {
			failed, failedID = true, st.id
			sess.failLocked(st)
			st = nil
		}
		if st == nil && sess.srv.fleet != nil {
			sess.mu.Unlock()
			if sess.elsewhere(bp) {
				putEncodeBuf(bp)
				return nil
			}
			sess.mu.Lock()
			if sess.closed {
				sess.mu.Unlock()
				putEncodeBuf(bp)
				return fmt.Errorf("streamable session %s: %w", sess.id, ErrClosed)
			}
			if st = sess.standalone; st != nil && len(st.q) >= maxStreamQueue {
				st = nil
			}
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
				"session", sess.id, "request", failedID.Raw(), "queued", maxStreamQueue)
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
func (sess *streamableSession) failLocked(st *responseStream) {
	st.failed = true
	if st == sess.standalone {
		sess.standalone = nil
	} else if sess.calls[st.id] == st {
		delete(sess.calls, st.id)
	}
	st.signal()
}

// backlogLocked keeps standalone messages until a GET stream opens, dropping
// the oldest beyond maxBacklog. It returns how many it dropped.
func (sess *streamableSession) backlogLocked(bps ...*[]byte) int {
	sess.backlog = append(sess.backlog, bps...)
	over := len(sess.backlog) - maxBacklog
	if over <= 0 {
		return 0
	}
	for _, b := range sess.backlog[:over] {
		putEncodeBuf(b)
	}
	n := copy(sess.backlog, sess.backlog[over:])
	clear(sess.backlog[n:])
	sess.backlog = sess.backlog[:n]
	return over
}

// Close ends the session: pending handlers return and Read returns io.EOF.
func (sess *streamableSession) Close() error {
	sess.close()
	return nil
}

func (sess *streamableSession) close() {
	s := sess.srv
	closed := sess.end(io.EOF, func() {
		s.sessions.remove(sess.id, sess)
		sess.mu.Lock()
		sess.closed = true
		backlog := sess.backlog
		sess.backlog = nil
		for num, st := range sess.detached {
			delete(sess.detached, num)
			if sess.calls[st.id] == st {
				delete(sess.calls, st.id)
			}
		}
		if sess.timer != nil {
			sess.timer.Stop()
		}
		var acct *budget.Account
		if sess.store != nil {
			acct = sess.store.acct
			sess.store.close()
		}
		sess.mu.Unlock()
		if acct != nil {
			acct.Unregister(sess.store)
			acct.Release()
		}
		for _, b := range backlog {
			putEncodeBuf(b)
		}
	})
	if closed {
		s.log.Debug("streamable session closed", "session", sess.id)
	}
}

func (sess *streamableSession) closedStatus() int {
	if sess.srv.sessions.isClosed() {
		return http.StatusServiceUnavailable
	}
	return http.StatusNotFound
}

func (sess *streamableSession) touch() { sess.last.Store(int64(time.Since(sess.srv.epoch))) }

func (sess *streamableSession) enter() { sess.refs.Add(1) }

func (sess *streamableSession) leave() {
	sess.touch()
	sess.refs.Add(-1)
}

// idleCheck runs on the idle timer: it closes the session when no request is
// in flight and none ended within the idle timeout, and re-arms otherwise.
func (sess *streamableSession) idleCheck() {
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

// streamEnd tells why a stream's handler stopped.
type streamEnd int

const (
	streamEndNone     streamEnd = iota // still running
	streamEndResponse                  // the response was written
	streamEndClient                    // the client went away or a write failed
	streamEndSession                   // the session was closed
	streamEndFailed                    // the stream overflowed
)

// streamOut writes one HTTP response, deciding lazily between a single JSON
// body and an event stream.
type streamOut struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	sessionID string // sent as Mcp-Session-Id with the headers, when set
	started   bool
	sse       bool
	// preferSSE is set when the client's Accept header names
	// text/event-stream before application/json: then even a lone
	// response travels as an event stream.
	preferSSE bool
	// sess and st, when set, make the events carry ids and be recorded in
	// the session's event store, if it has one.
	sess *streamableSession
	st   *responseStream
	// prime makes the stream start with a priming event.
	prime bool
	// status, when not zero, replaces 200 for a lone response written as a
	// plain JSON body (2026-07-28 maps some errors to HTTP statuses).
	status int
}

func (o *streamOut) startSSE() {
	h := o.w.Header()
	h["Content-Type"] = ctEventStream
	h["Cache-Control"] = noCache
	if o.sessionID != "" {
		h[hdrSessionID] = []string{o.sessionID}
	}
	o.w.WriteHeader(http.StatusOK)
	o.started, o.sse = true, true
	o.rc = http.NewResponseController(o.w)
	if o.prime && o.sess != nil {
		_ = o.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		_, _ = o.w.Write(o.sess.primingEvent(o.st))
	}
}

// writeBatch writes queued messages; final means the last one is the
// response that ends the stream.
func (o *streamOut) writeBatch(batch []*[]byte, final bool) error {
	if len(batch) == 0 {
		return nil
	}
	if !o.started && final && len(batch) == 1 && !o.preferSSE {
		// Fast path: the response came first, answer with plain JSON.
		b := *batch[0]
		h := o.w.Header()
		h["Content-Type"] = ctJSON
		if len(b) > 2048 {
			// Smaller bodies get a Content-Length from net/http itself.
			h["Content-Length"] = []string{strconv.Itoa(len(b))}
		}
		if o.sessionID != "" {
			h[hdrSessionID] = []string{o.sessionID}
		}
		status := http.StatusOK
		if o.status != 0 {
			status = o.status
		}
		o.w.WriteHeader(status)
		o.started = true
		_, err := o.w.Write(b)
		return err
	}
	if !o.started {
		o.startSSE()
	}
	_ = o.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if err := o.writeEvents(batch); err != nil {
		return err
	}
	return o.rc.Flush()
}

func (o *streamOut) keepAlive() error {
	if !o.started {
		o.startSSE()
	}
	_ = o.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := o.w.Write(sseKeepAlive); err != nil {
		return err
	}
	return o.rc.Flush()
}

// finish clears the write deadline so it cannot affect the next request on
// a kept-alive connection.
func (o *streamOut) finish() {
	if o.rc != nil {
		_ = o.rc.SetWriteDeadline(time.Time{})
	}
}

// pump writes the messages queued on st until the response has been
// written, the stream fails, the client goes away or the session closes.
func (sess *streamableSession) pump(ctx context.Context, o *streamOut, st *responseStream) streamEnd {
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
		stop := streamEndNone
		select {
		case <-st.notify:
		case <-ctx.Done():
			stop = streamEndClient
		case <-sess.done:
			stop = streamEndSession
		case <-kaC:
			if err := o.keepAlive(); err != nil {
				return streamEndClient
			}
			st.ka.Reset(sess.srv.keepAlive)
			continue
		}
		sess.mu.Lock()
		batch, st.q = st.q, batch[:0]
		final, failed := st.final, st.failed
		sess.mu.Unlock()

		if stop == streamEndClient {
			// Not written: keep them for a resuming or the next GET.
			sess.mu.Lock()
			st.q = append(batch, st.q...)
			sess.mu.Unlock()
			batch = nil
			return streamEndClient
		}
		err := o.writeBatch(batch, final)
		for i, b := range batch {
			putEncodeBuf(b)
			batch[i] = nil
		}
		batch = batch[:0]
		switch {
		case err != nil:
			return streamEndClient
		case final:
			return streamEndResponse
		case failed:
			return streamEndFailed
		case stop != streamEndNone:
			return stop
		}
		if kaC != nil {
			st.ka.Reset(sess.srv.keepAlive)
		}
	}
}

// serveCall serves a POST carrying a request: it registers the request's
// stream, delivers the request and writes what the gateway sends back.
func (sess *streamableSession) serveCall(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request, created bool) {
	st := newStream()
	st.id = req.ID
	st.isInit = req.Method == "initialize"
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		writeJSONRPCError(w, sess.closedStatus(), req.ID, codeServerError, "session terminated", nil)
		return
	}
	if _, dup := sess.calls[req.ID]; dup {
		sess.mu.Unlock()
		writeJSONRPCError(w, http.StatusBadRequest, req.ID, jsonrpc.CodeInvalidRequest,
			"duplicate in-flight request id", nil)
		return
	}
	sess.calls[req.ID] = st
	st.num = sess.nextNum
	sess.nextNum++
	sess.mu.Unlock()

	o := streamOut{w: w, preferSSE: prefersSSE(r.Header["Accept"]), sess: sess, st: st,
		prime: sess.store != nil && primes(r, req)}
	if created {
		o.sessionID = sess.id
	}
	ctx := r.Context()
	end, delivered := streamEndClient, false
	switch err := sess.deliver(ctx, req); {
	case err == nil:
		delivered = true
		end = sess.pump(ctx, &o, st)
	case errors.Is(err, errSessionClosed):
		end = streamEndSession
	}
	o.finish()

	sess.mu.Lock()
	answered := st.final
	initOK := st.final && !st.errResp
	isInit := st.isInit
	kept := end == streamEndClient && delivered && !answered && sess.detachLocked(st)
	if !kept && sess.calls[st.id] == st {
		delete(sess.calls, st.id)
	}
	sess.mu.Unlock()
	if kept {
		return
	}

	switch end {
	case streamEndSession:
		if !o.started {
			writeJSONRPCError(w, sess.closedStatus(), req.ID, codeServerError, "session terminated", nil)
		}
	case streamEndFailed:
		if !o.started {
			writeJSONRPCError(w, http.StatusServiceUnavailable, req.ID, jsonrpc.CodeInternalError,
				"response stream overflowed", nil)
		}
	}
	if (end == streamEndClient || end == streamEndFailed) && delivered && !answered && !isInit {
		sess.cancelUpstream(req.ID)
	}
	if created && (end != streamEndResponse || !initOK) {
		// The client cannot use a session whose initialize failed.
		sess.close()
	}
}

// cancelUpstream delivers a synthesized notifications/cancelled for a
// request whose client went away before its response was written.
func (sess *streamableSession) cancelUpstream(id jsonrpc.ID) {
	params := make([]byte, 0, 64)
	params = append(params, `{"requestId":`...)
	params = appendID(params, id)
	params = append(params, `,"reason":"client disconnected"}`...)
	msg := &jsonrpc.Request{Method: "notifications/cancelled", Params: params}
	select {
	case sess.in <- msg:
		return
	case <-sess.done:
		return
	default:
	}
	t := time.NewTimer(cancelTimeout)
	defer t.Stop()
	select {
	case sess.in <- msg:
	case <-sess.done:
	case <-t.C:
		sess.srv.log.Warn("dropping synthesized cancellation: the session is not being read",
			"session", sess.id, "request", id.Raw())
	}
}

// serveStandalone serves the session's GET stream; from, when not nil, is
// the resumption point the client sent.
func (sess *streamableSession) serveStandalone(w http.ResponseWriter, r *http.Request, from *resumePoint) {
	st := newStream()
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		writeJSONRPCError(w, sess.closedStatus(), jsonrpc.ID{}, codeServerError, "session terminated", nil)
		return
	}
	if sess.standalone != nil {
		sess.mu.Unlock()
		writeJSONRPCError(w, http.StatusConflict, jsonrpc.ID{}, codeServerError,
			"a standalone SSE stream is already open for this session", nil)
		return
	}
	sess.standalone = st
	var replay []storedEvent
	gap := false
	if from != nil {
		replay, gap = sess.replayLocked(0, from)
	}
	st.q = append(st.q, sess.backlog...)
	clear(sess.backlog)
	sess.backlog = sess.backlog[:0]
	if len(st.q) > 0 {
		st.signal()
	}
	sess.mu.Unlock()
	if f := sess.srv.fleet; f != nil {
		f.Standalone(sess.id, true)
		defer f.Standalone(sess.id, false)
	}

	o := streamOut{w: w, sess: sess, st: st, prime: sess.store != nil && primes(r, nil)}
	o.startSSE()
	_ = o.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err := w.Write(sseOpened)
	if err == nil && from != nil {
		err = o.writeResumed(replay, gap)
	}
	if err == nil {
		err = o.rc.Flush()
	}
	if err == nil && sess.pump(r.Context(), &o, st) == streamEndFailed && sess.store != nil {
		// Ended early: what was not written waits in the backlog, and the
		// client may resume; tell it when to reconnect.
		if _, err := w.Write(sseRetry); err == nil {
			_ = o.rc.Flush()
		}
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
	if dropped > 0 {
		sess.srv.log.Warn("standalone stream backlog full: dropped oldest messages",
			"session", sess.id, "dropped", dropped)
	}
}
