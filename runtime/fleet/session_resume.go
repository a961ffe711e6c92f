package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// A client whose POST stream broke before its answer resumes it with a GET
// carrying the stream's Last-Event-ID; a non-sticky balancer sends that GET
// to any replica. The replica that gets it (the relay) asks the one whose
// prefix the id carries (the holder) for the stream on
// <fleet>.replica.<holder>.resume, one round at a time: the holder serves
// the resumption as it would a GET of its own (transports'
// ServeResumed) for at most resumeRound, or until it wrote something, and
// replies with what it wrote; the relay writes that to the client and asks
// again from the last event id until the stream is over. Without it the
// relay took the GET for the session's own stream, and the call's answer,
// waiting on the holder, never reached the client (or, when the relay
// held the session's GET stream already, the client got 409 and dropped
// the session).

// resumeRound bounds one round of a relayed stream on the holder.
const resumeRound = 10 * time.Second

// resumeStillOpen bounds how long the relay asks again while the holder
// has not yet seen the client's POST go (409).
const resumeStillOpen = 10 * time.Second

// fleetResume asks the holder for session's POST stream after event Last.
type fleetResume struct {
	Session string `json:"session"`
	Last    string `json:"last"`
}

// fleetResumed is one round's answer: the HTTP status the holder's
// resumption got, the event-stream bytes it wrote, whether the stream is
// over.
type fleetResumed struct {
	Status int    `json:"status"`
	Body   []byte `json:"body,omitempty"`
	Done   bool   `json:"done,omitempty"`
}

func (fs *Sessions) startResumes() error {
	subj := fs.node.Subject("replica", cluster.Token(fs.node.Replica()), "resume")
	if _, err := fs.node.Subscribe(subj, "a stream resumption", func(m *cluster.Msg) { go fs.serveResume(m) }); err != nil {
		return fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	return nil
}

// ResumeElsewhere relays a GET that resumes another replica's POST stream
// (transports.FleetResumer).
func (h hooks) ResumeElsewhere(w http.ResponseWriter, r *http.Request, id, lastEventID string) bool {
	fs := h.f.sess.Load()
	if fs == nil || !fs.node.Connected() {
		return false
	}
	tok, ev, ok := strings.Cut(lastEventID, "/")
	if !ok || strings.HasPrefix(ev, "0-") { // stream 0: the session's GET stream, fleet-wide already
		return false
	}
	holder, err := cluster.FromToken(tok)
	if err != nil || holder == fs.node.Replica() {
		return false
	}
	fs.relayStream(w, r, id, holder, lastEventID)
	return true
}

// relayStream writes holder's POST stream of session id after event last
// to w, until the stream is over, the client goes or the holder does not
// answer. Ending without an event tells the client its request ended
// without an answer, so that it gets one (an error) rather than none.
func (fs *Sessions) relayStream(w http.ResponseWriter, r *http.Request, id, holder, last string) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	subj := fs.node.Subject("replica", cluster.Token(holder), "resume")
	ctx := r.Context()
	openUntil := time.Now().Add(resumeStillOpen)
	for ctx.Err() == nil {
		q, _ := json.Marshal(fleetResume{Session: id, Last: last})
		rctx, cancel := context.WithTimeout(ctx, resumeRound+answerTimeout)
		reply, err := fs.node.Request(rctx, subj, q)
		cancel()
		var res fleetResumed
		if err == nil {
			err = json.Unmarshal(reply, &res)
		}
		switch {
		case err != nil:
			if ctx.Err() == nil {
				fs.log.Warn("cluster: the replica holding a resumed stream did not relay it (gone?)", "replica", holder, "err", err)
			}
			return
		case res.Status == http.StatusConflict && time.Now().Before(openUntil):
			time.Sleep(20 * time.Millisecond) // the holder has not yet seen the POST go
			continue
		case res.Status != http.StatusOK:
			fs.log.Warn("cluster: a replica refused to relay a resumed stream", "replica", holder, "status", res.Status)
			return
		}
		if len(res.Body) > 0 {
			if _, err := w.Write(res.Body); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			last = lastEventIDIn(res.Body, last)
		}
		if res.Done {
			return
		}
	}
}

// lastEventIDIn is the id of the last event in the event-stream bytes b,
// or last when b has none.
func lastEventIDIn(b []byte, last string) string {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
			last = string(v)
		} else if v, ok := bytes.CutPrefix(line, []byte("id:")); ok {
			last = string(v)
		}
	}
	return last
}

// serveResume serves one round of a relayed stream held here.
func (fs *Sessions) serveResume(m *cluster.Msg) {
	var q fleetResume
	if err := json.Unmarshal(m.Data, &q); err != nil || q.Session == "" {
		fs.log.Warn("cluster: refused a stream resumption from NATS", "err", err)
		_ = m.Respond([]byte(`{"status":400,"done":true}`))
		return
	}
	ctx, cancel := context.WithTimeout(fs.ctx, resumeRound)
	defer cancel()
	rw := &roundWriter{header: http.Header{}, written: cancel}
	done := fs.srv.ServeResumed(ctx, rw, q.Session, q.Last)
	b, _ := json.Marshal(fleetResumed{Status: rw.statusOr200(), Body: rw.body.Bytes(), Done: done})
	_ = m.Respond(b)
}

// roundWriter takes what one round of a relayed stream writes; the first
// flush of something ends the round (written), so that the client gets it
// at once.
type roundWriter struct {
	header  http.Header
	status  int
	body    bytes.Buffer
	written context.CancelFunc
}

func (w *roundWriter) Header() http.Header { return w.header }

func (w *roundWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *roundWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

func (w *roundWriter) FlushError() error {
	if w.body.Len() > 0 {
		w.written()
	}
	return nil
}

func (w *roundWriter) SetWriteDeadline(time.Time) error { return nil }

func (w *roundWriter) statusOr200() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
