package transports

import (
	"context"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// StreamableFleet lets the replicas of a fleet share the sessions of their
// [StreamableServer]s: it names new sessions, adopts session ids another
// replica issued, and carries the standalone stream's messages to the
// replica that holds the client's GET. Its methods are called from HTTP
// handlers, concurrently, without the server's locks held.
type StreamableFleet interface {
	// SessionID names the session opened by peer's initialize request
	// init; "" lets the server pick a random id.
	SessionID(peer any, init *jsonrpc.Request) string
	// Adopt is asked about a session id this server does not know. ok
	// makes the server open a session under id for peer (accept is called
	// as for a new session, before the request is delivered) and serve r
	// on it; otherwise r gets 404.
	Adopt(r *http.Request, id string) (peer any, ok bool)
	// Elsewhere is handed a message for the standalone stream of session
	// id while this server holds no GET stream of it; true means taken
	// (else it waits in the session's backlog). msg is the encoded message,
	// valid during the call only.
	Elsewhere(id string, msg []byte) bool
	// Standalone says that session id's GET stream opened (true) or
	// closed on this server.
	Standalone(id string, open bool)
	// Deleted says that the client deleted session id (HTTP DELETE).
	Deleted(id string)
}

// FleetResumer is implemented by a [StreamableFleet] that serves a GET
// whose Last-Event-ID names an event of another replica: a client resuming
// a POST stream (its request's answer is still to come there) after a
// non-sticky balancer sent the GET here.
type FleetResumer interface {
	// ResumeElsewhere serves r, a GET of session id whose Last-Event-ID
	// lastEventID is another replica's, when that id names one of that
	// replica's POST streams, and reports whether it did; false leaves r
	// to this server (the session's GET stream, starting fresh).
	ResumeElsewhere(w http.ResponseWriter, r *http.Request, id, lastEventID string) bool
}

// ServeResumed serves on w the resumption of one of session id's POST
// streams from lastEventID, an event id this server issued, for a fleet
// replica that relays it to the client ([FleetResumer]): the events after
// it, then the stream's live messages until the response, or until ctx
// ends (the rest is kept for the next resumption). done reports that
// nothing more will come on the stream. A stream whose POST has not yet
// ended here gets 409 and done false: ask again.
func (s *StreamableServer) ServeResumed(ctx context.Context, w http.ResponseWriter, id, lastEventID string) (done bool) {
	sess := s.lookup(id)
	if sess == nil {
		writeJSONRPCError(w, http.StatusNotFound, jsonrpc.ID{}, codeServerError, "session not found", nil)
		return true
	}
	ev, mine := strings.CutPrefix(lastEventID, s.eventPrefix)
	stream, seq, ok := parseEventID(ev)
	if !mine || !ok || stream == 0 || sess.store == nil {
		writeJSONRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, codeServerError, "not a POST stream of this server", nil)
		return true
	}
	sess.enter()
	defer sess.leave()
	from := &resumePoint{stream: stream, seq: seq}
	sess.mu.Lock()
	if stream >= sess.nextNum || seq > sess.seq {
		from.fresh = true
	}
	sess.mu.Unlock()
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	return sess.serveResumedCall(w, r, from)
}

// adopt opens a session under an id this server did not issue, when the
// fleet says it may; nil means 404. Two requests adopting one id at once
// get the same session.
func (s *StreamableServer) adopt(r *http.Request, id string) *streamableSession {
	if s.fleet == nil {
		return nil
	}
	peer, ok := s.fleet.Adopt(r, id)
	if !ok {
		return nil
	}
	sess, fresh := s.openSession(id, peer)
	if sess != nil && fresh {
		s.log.Debug("streamable session adopted", "session", id)
		s.accept(sess)
	}
	return sess
}

// WriteStandalone queues msg, an encoded JSON-RPC message that the caller
// has validated, on the standalone stream of session id (the backlog while
// no GET is open). It reports false when this server has no such session.
func (s *StreamableServer) WriteStandalone(id string, msg []byte) bool {
	sess := s.lookup(id)
	if sess == nil {
		return false
	}
	bp := encodeBufs.Get().(*[]byte)
	*bp = append((*bp)[:0], msg...)
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		putEncodeBuf(bp)
		return false
	}
	dropped := 0
	if st := sess.standalone; st != nil && len(st.q) < maxStreamQueue {
		st.q = append(st.q, bp)
		st.signal()
	} else {
		dropped = sess.backlogLocked(bp)
	}
	sess.mu.Unlock()
	if dropped > 0 {
		s.log.Warn("standalone stream backlog full: dropped oldest messages", "session", id, "dropped", dropped)
	}
	return true
}

// Rehome hands the backlog of session id, the standalone messages kept
// while no GET stream was open anywhere, to the fleet ([StreamableFleet]
// Elsewhere), when this server holds no GET stream of the session; what
// the fleet does not take stays in the backlog.
func (s *StreamableServer) Rehome(id string) {
	sess := s.lookup(id)
	if sess == nil || s.fleet == nil {
		return
	}
	sess.mu.Lock()
	if sess.closed || sess.standalone != nil || len(sess.backlog) == 0 {
		sess.mu.Unlock()
		return
	}
	backlog := sess.backlog
	sess.backlog = nil
	sess.mu.Unlock()
	var kept []*[]byte
	for _, bp := range backlog {
		if sess.elsewhere(bp) {
			putEncodeBuf(bp)
		} else {
			kept = append(kept, bp)
		}
	}
	if len(kept) == 0 {
		return
	}
	sess.mu.Lock()
	newer := sess.backlog
	sess.backlog = kept
	dropped := 0
	if !sess.closed {
		dropped = sess.backlogLocked(newer...)
	}
	sess.mu.Unlock()
	if dropped > 0 {
		s.log.Warn("standalone stream backlog full: dropped oldest messages", "session", id, "dropped", dropped)
	}
}

// elsewhere hands a standalone message to the fleet when this server holds
// no GET stream of the session; it reports whether the fleet took it.
func (sess *streamableSession) elsewhere(bp *[]byte) bool {
	f := sess.srv.fleet
	return f != nil && f.Elsewhere(sess.id, *bp)
}

// BacklogLen is the number of messages session id keeps for its next GET
// stream (0 for an unknown session).
func (s *StreamableServer) BacklogLen(id string) int {
	sess := s.lookup(id)
	if sess == nil {
		return 0
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return len(sess.backlog)
}
