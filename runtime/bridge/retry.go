package bridge

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// The second half of bridging (parked.go): a 2026-07-28 client's retry of
// a tools/call, prompts/get or resources/read answered with
// input_required, and the way the upstream call's final result reaches
// that retry.

// Sealed returns the requestState of a 2026-07-28 retry's params when the
// gateway sealed it.
func Sealed(params json.RawMessage) (string, bool) {
	state, ok := wire.String(params, "requestState")
	if !ok || !strings.HasPrefix(state, statePrefix) {
		return "", false
	}
	return state, true
}

// Target is what a retry continues: the call it names and, for a
// tools/call, what continues it once a person approved it.
type Target struct {
	// Name is what the retry names, as [Call.Name] says; Server is the
	// upstream serving it.
	Name   string
	Server string
	// Approved, when not nil, continues a tools/call whose requestState
	// asked for its approval (approval.go) with the call's request and
	// the person's answer.
	Approved func(req *jsonrpc.Request, answer json.RawMessage)
}

// Resume serves the retry req of s, whose requestState the gateway sealed
// (state): an approval it asked for continues the call (t.Approved); else
// the parked upstream requests it names are answered with the client's
// inputResponses and the retry waits for the call's next step.
func (b *Bridge) Resume(s Session, req *jsonrpc.Request, t Target, state string) {
	st, err := b.open(state)
	if err == nil && st.Approve != "" && t.Approved != nil {
		b.resumeApproval(s, req, t, st)
		return
	}
	if err == nil && (st.Method != req.Method || st.Name != t.Name || st.Identity != s.Identity().Name) {
		err = fmt.Errorf("requestState belongs to another call")
	}
	if err != nil {
		replyError(s, req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: %v", err)
		return
	}
	if st.Replica != "" && st.Replica != b.replica() {
		go b.retryElsewhere(s, req, st.Replica, st.Server) // the upstream's call waits there
		return
	}
	var responses map[string]json.RawMessage
	if raw, ok, _ := wire.Field(req.Params, "inputResponses"); ok {
		if err := json.Unmarshal(raw, &responses); err != nil {
			replyError(s, req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: inputResponses: %v", err)
			return
		}
	}
	ps, br, why := b.claim(st.Tokens, responses, s, req.ID)
	if ps == nil {
		replyError(s, req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: %s", why)
		return
	}
	open := s.Attach(req.ID, br.l, br.upID)
	for _, p := range ps {
		p.l.Respond(p.reqID, responses[p.key], nil)
	}
	if !open {
		br.l.Cancel(br.upID, "client disconnected")
	}
}

// claim takes the parked requests of tokens, if responses answer them
// all, and records that the client request id of s waits for their call.
func (b *Bridge) claim(tokens []string, responses map[string]json.RawMessage, s Session, id jsonrpc.ID) ([]*parked, *bridged, string) {
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
	timeout := ps[0].l.Timeout()
	br.timer = time.AfterFunc(timeout, func() { b.retryTimedOut(c, s, id, timeout) })
	return ps, br, ""
}

// codeRequestTimeout is the error code of a request that timed out.
const codeRequestTimeout = -32001

// retryTimedOut answers a retry whose call gave no next step in time.
func (b *Bridge) retryTimedOut(c Call, s Session, id jsonrpc.ID, timeout time.Duration) {
	b.mu.Lock()
	br := b.calls[c]
	if br == nil || br.sess != s || br.id != id {
		b.mu.Unlock()
		return
	}
	delete(b.calls, c)
	b.mu.Unlock()
	s.Detach(id)
	br.l.Cancel(br.upID, "timeout")
	replyError(s, id, codeRequestTimeout, "edge-mcp: the server did not answer %s within %s", c.Method(), timeout)
}

// Redirect hands the final answer of a bridged call to the retry waiting
// for it, and reports whether it did (or dropped it: nobody waits). Calls
// that were never bridged report false.
func (b *Bridge) Redirect(c Call, resp *jsonrpc.Response) bool {
	if !c.Bridged() {
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
		c.End("no client request waiting")
		return true
	}
	// The call has been taken from its link: nobody else reads it now.
	c.Finish(br.sess, br.id, resp)
	return true
}
