package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// This file is the second half of bridging (bridge.go): a 2026-07-28
// client's retry of a tools/call, prompts/get or resources/read answered
// with input_required, and the way the upstream call's final result
// reaches that retry.

// bridgeState returns the requestState of a 2026-07-28 retry when the
// gateway sealed it.
func bridgeState(s *session, params json.RawMessage) (string, bool) {
	if !s.modern.Load() {
		return "", false
	}
	state, ok := wire.String(params, "requestState")
	if !ok || !strings.HasPrefix(state, statePrefix) {
		return "", false
	}
	return state, true
}

// resumeBridge answers the parked upstream request a retry's requestState
// names with the client's inputResponses, and makes the retry wait for the
// call's next step. name is what the retry names, as callName says.
func (s *session) resumeBridge(req *jsonrpc.Request, name, state string) {
	b := s.g.bridge
	st, err := b.open(state)
	if err == nil && (st.Method != req.Method || st.Name != name || st.Identity != s.id.Name) {
		err = fmt.Errorf("requestState belongs to another call")
	}
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: %v", err)
		return
	}
	if st.Replica != "" && st.Replica != s.g.replicaName() {
		go s.retryElsewhere(req, st.Replica, st.Server) // the upstream's call waits there
		return
	}
	var responses map[string]json.RawMessage
	if raw, ok, _ := wire.Field(req.Params, "inputResponses"); ok {
		if err := json.Unmarshal(raw, &responses); err != nil {
			s.replyError(req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: inputResponses: %v", err)
			return
		}
	}
	ps, br, why := b.claim(st.Tokens, responses, s, req.ID)
	if ps == nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: %s", why)
		return
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.inflight[req.ID] = inflight{br.l, br.upID}
	}
	s.mu.Unlock()
	for _, p := range ps {
		p.l.respond(p.reqID, responses[p.key], nil)
	}
	if closed {
		br.cancelUpstream("client disconnected")
	}
}

// claim takes the parked requests of tokens, if responses answer them
// all, and records that the client request id of s waits for their call.
func (b *bridges) claim(tokens []string, responses map[string]json.RawMessage, s *session, id jsonrpc.ID) ([]*parked, *bridged, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ps := make([]*parked, 0, len(tokens))
	for _, token := range tokens {
		p := b.parked[token]
		if p == nil {
			return nil, nil, "requestState names no request waiting for an answer (answered, expired or cancelled)"
		}
		if _, ok := responses[p.key]; !ok {
			return nil, nil, fmt.Sprintf("inputResponses has no answer for %q", p.key)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, nil, "requestState names no request"
	}
	c := ps[0].c
	br := b.calls[c]
	if br == nil {
		return nil, nil, "the call this requestState belongs to has ended"
	}
	for _, p := range ps {
		delete(b.parked, p.token)
		p.timer.Stop()
		p.unpark()
	}
	br.sess, br.id = s, id
	timeout := ps[0].l.u.cfg.Timeout
	br.timer = time.AfterFunc(timeout, func() { b.retryTimedOut(c, s, id, timeout) })
	return ps, br, ""
}

// retryTimedOut answers a retry whose call gave no next step in time.
func (b *bridges) retryTimedOut(c *call, s *session, id jsonrpc.ID, timeout time.Duration) {
	b.mu.Lock()
	br := b.calls[c]
	if br == nil || br.sess != s || br.id != id {
		b.mu.Unlock()
		return
	}
	delete(b.calls, c)
	b.mu.Unlock()
	s.detach(id)
	br.cancelUpstream("timeout")
	s.replyError(id, codeRequestTimeout, "edge-mcp: the server did not answer %s within %s", c.method, timeout)
}

// redirect hands the final answer of a bridged call to the retry waiting
// for it, and reports whether it did (or dropped it: nobody waits). Calls
// that were never bridged report false.
func (b *bridges) redirect(c *call, resp *jsonrpc.Response) bool {
	if !c.bridged.Load() {
		return false // the common case: no lock, no lookup
	}
	b.mu.Lock()
	br, ok := b.calls[c]
	if !ok {
		b.mu.Unlock()
		return false
	}
	delete(b.calls, c)
	for token, p := range b.parked {
		if p.c == c {
			p.timer.Stop()
			delete(b.parked, token)
			p.unpark()
		}
	}
	if br.timer != nil {
		br.timer.Stop()
	}
	b.mu.Unlock()
	if br.sess == nil {
		c.end("no client request waiting")
		return true
	}
	// The call has been taken from its link: nobody else reads it now.
	c.sess, c.origID = br.sess, br.id
	br.sess.finish(c, resp)
	return true
}
