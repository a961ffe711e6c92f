package transports

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// This file writes one HTTP response: a single JSON body or an event
// stream, fed from a responseStream by pump.

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
