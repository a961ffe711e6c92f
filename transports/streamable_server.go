package transports

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
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
