package transports

import (
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// This file serves the GET stream (standalone or resuming) and DELETE.

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
