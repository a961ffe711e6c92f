package transports

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The resumption side of the StreamableServer: event ids, the priming event,
// replays for a GET with Last-Event-ID and POST streams kept for it. See
// the StreamableServer documentation for the behaviour.

// sseRetry ends a standalone stream the server fails early, so that the
// client reconnects (and resumes) soon.
var sseRetry = []byte("retry: " + strconv.Itoa(resumeRetryMillis) + "\n\n")

// maxDetached bounds the POST streams a session keeps for a resuming GET.
const maxDetached = 64

// listChangedMethods are sent at the start of a fresh stream, when the
// events the client missed are gone, so that it re-lists.
var listChangedMethods = []string{
	"notifications/tools/list_changed",
	"notifications/prompts/list_changed",
	"notifications/resources/list_changed",
}

// resumePoint is a parsed Last-Event-ID.
type resumePoint struct {
	stream, seq uint64
	// fresh is set when the id is not one this session issued: the stream
	// starts fresh.
	fresh bool
	// foreign is the Last-Event-ID when it carries another replica's
	// prefix (fresh is then set too).
	foreign string
}

// primes reports whether the event streams of request r (carrying req, or
// nil for a GET) start with a priming event: the client announced 2025-11-25,
// the first revision with SEP-1699 polling and the last with resumable
// streams. An initialize's stream is never primed.
func primes(r *http.Request, req *jsonrpc.Request) bool {
	if req != nil && req.Method == "initialize" {
		return false
	}
	v := r.Header[hdrProtocolVersion]
	return len(v) > 0 && v[0] >= "2025-11-25" && v[0] < "2026-07-28"
}

// primingEvent returns a priming event for st: a fresh id, the "retry:"
// field and empty data. After it the client may resume st.
func (sess *streamableSession) primingEvent(st *responseStream) []byte {
	sess.mu.Lock()
	sess.seq++
	seq := sess.seq
	st.primed = true
	sess.mu.Unlock()
	b := make([]byte, 0, 64)
	b = append(b, "id: "...)
	b = append(b, sess.srv.eventPrefix...)
	b = append(b, formatEventID(st.num, seq)...)
	b = append(b, "\nretry: "...)
	b = strconv.AppendInt(b, resumeRetryMillis, 10)
	b = append(b, "\ndata: \n\n"...)
	return b
}

// record gives the messages of batch, about to be written on st, their event
// ids and stores them. It returns nil when the session has no store.
func (sess *streamableSession) record(st *responseStream, batch []*[]byte) []string {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.store == nil {
		return nil
	}
	ids := make([]string, len(batch))
	for i, bp := range batch {
		sess.seq++
		sess.store.add(st.num, sess.seq, *bp)
		ids[i] = sess.srv.eventPrefix + formatEventID(st.num, sess.seq)
	}
	return ids
}

// writeEvents writes batch as message events, with ids when the stream
// records them.
func (o *streamOut) writeEvents(batch []*[]byte) error {
	var ids []string
	if o.sess != nil && o.st != nil {
		ids = o.sess.record(o.st, batch)
	}
	for i, bp := range batch {
		var err error
		if ids == nil {
			err = writeMessageEvent(o.w, *bp)
		} else {
			err = writeSSEEvent(o.w, "message", ids[i], *bp)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeResumed writes what a resuming GET gets before the live stream: the
// list_changed notifications when events were lost (a fresh stream), else
// the stored events the client missed, under their ids.
func (o *streamOut) writeResumed(replay []storedEvent, gap bool) error {
	if gap {
		batch := make([]*[]byte, 0, len(listChangedMethods))
		for _, m := range listChangedMethods {
			bp, err := encodePooled(&jsonrpc.Request{Method: m})
			if err != nil {
				return err
			}
			batch = append(batch, bp)
		}
		err := o.writeEvents(batch)
		for _, bp := range batch {
			putEncodeBuf(bp)
		}
		if err != nil {
			return err
		}
	} else {
		for _, e := range replay {
			if err := writeSSEEvent(o.w, "message", o.sess.srv.eventPrefix+formatEventID(e.stream, e.seq), e.data); err != nil {
				return err
			}
		}
	}
	return o.rc.Flush()
}

// replayLocked returns the stored events of stream after from, and whether
// some were lost. The caller holds mu.
func (sess *streamableSession) replayLocked(stream uint64, from *resumePoint) ([]storedEvent, bool) {
	if from.fresh {
		return nil, true
	}
	replay, gap := sess.store.after(stream, from.seq)
	if gap {
		return nil, true
	}
	return replay, false
}

// resumePointOf parses the Last-Event-ID of a GET: nil without one; a
// malformed one, or one while resumption is off, gets 400.
func (sess *streamableSession) resumePointOf(w http.ResponseWriter, r *http.Request) (*resumePoint, bool) {
	v := r.Header[hdrLastEventID]
	if len(v) == 0 || v[0] == "" {
		return nil, true
	}
	if sess.store == nil {
		writeJSONRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, codeServerError,
			"stream resumption (Last-Event-ID) is disabled on this server", nil)
		return nil, false
	}
	id, mine := strings.CutPrefix(v[0], sess.srv.eventPrefix)
	if !mine {
		// Another fleet replica's event: its events are not here.
		return &resumePoint{fresh: true, foreign: v[0]}, true
	}
	stream, seq, ok := parseEventID(id)
	if !ok {
		writeJSONRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, codeServerError,
			"malformed Last-Event-ID", nil)
		return nil, false
	}
	sess.mu.Lock()
	known := stream < sess.nextNum && seq <= sess.seq
	sess.mu.Unlock()
	if !known {
		return &resumePoint{fresh: true}, true
	}
	return &resumePoint{stream: stream, seq: seq}, true
}

// serveResumedCall serves a GET resuming POST stream from.stream: the missed
// events, then, when its request is still pending, the rest of the stream
// up to the response. It reports whether the stream is over (nothing more
// will come on it: its response was written, or it is gone).
func (sess *streamableSession) serveResumedCall(w http.ResponseWriter, r *http.Request, from *resumePoint) bool {
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		writeJSONRPCError(w, sess.closedStatus(), jsonrpc.ID{}, codeServerError, "session terminated", nil)
		return true
	}
	st := sess.detached[from.stream]
	if st == nil && sess.liveCallLocked(from.stream) {
		sess.mu.Unlock()
		writeJSONRPCError(w, http.StatusConflict, jsonrpc.ID{}, codeServerError,
			"that stream is still open", nil)
		return false
	}
	delete(sess.detached, from.stream)
	replay, gap := sess.replayLocked(from.stream, from)
	sess.mu.Unlock()

	o := streamOut{w: w, sess: sess, st: st}
	if st == nil {
		o.st = &responseStream{num: from.stream} // finished: replay only
	}
	o.startSSE()
	err := o.writeResumed(replay, gap)
	end := streamEndClient
	if err == nil && st != nil {
		end = sess.pump(r.Context(), &o, st)
	}
	o.finish()
	if st == nil {
		return true
	}
	return !sess.releaseResumed(st, end)
}

// releaseResumed keeps a resumed POST stream for the next GET when its
// client left again before the response, and recycles it otherwise; it
// reports whether it kept it.
func (sess *streamableSession) releaseResumed(st *responseStream, end streamEnd) bool {
	sess.mu.Lock()
	if end == streamEndClient && !sess.closed && !st.failed && (len(st.q) > 0 || !st.final) {
		sess.detached[st.num] = st
		sess.mu.Unlock()
		return true
	}
	if sess.calls[st.id] == st {
		delete(sess.calls, st.id)
	}
	cancel := end == streamEndFailed && !st.final
	id := st.id
	sess.mu.Unlock()
	if cancel {
		sess.cancelUpstream(id)
	}
	return false
}

// liveCallLocked reports whether POST stream num has a handler.
func (sess *streamableSession) liveCallLocked(num uint64) bool {
	for _, st := range sess.calls {
		if st.num == num {
			return true
		}
	}
	return false
}

// detachLocked keeps the POST stream st, whose client left before its
// response, for a resuming GET; it reports whether it did. Only primed
// streams are kept: their clients were told they may resume.
func (sess *streamableSession) detachLocked(st *responseStream) bool {
	if sess.closed || !st.primed || st.isInit || st.failed || sess.calls[st.id] != st ||
		len(sess.detached) >= maxDetached {
		return false
	}
	sess.detached[st.num] = st
	return true
}

// forgetCancelled drops the kept stream of a request the client cancels.
func (sess *streamableSession) forgetCancelled(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	sess.mu.Lock()
	st := sess.calls[id]
	if sess.closed || st == nil || sess.detached[st.num] != st {
		sess.mu.Unlock()
		return
	}
	delete(sess.detached, st.num)
	delete(sess.calls, id)
	sess.mu.Unlock()
}
