package transports

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// This file serves a POST: a client message, and for a request the stream
// its answer goes out on (servePOST, serveCall), and the cancellation a
// dropped stream sends upstream.

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
