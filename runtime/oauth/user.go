package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// This file is per-user upstream identity ("identity": "per_client") seen
// from a downstream request: a request of an identity without a token for
// its server starts that identity's authorization and tells the person
// where to approve it. The gateway's session is the User.

// BeginWait bounds how long a request waits for the authorization URL of
// its identity (discovery and registration).
const BeginWait = 10 * time.Second

// User is the downstream session of a tools/call whose identity needs an
// authorization, as AskUser asks it. Its methods answer the call or ask
// the person; they are called on the call's goroutine.
type User interface {
	// Refuse answers the call with reason; denied says the person
	// declined.
	Refuse(denied bool, reason string)
	// Modern reports that the call follows revision 2026-07-28: it is
	// answered with an input_required result (InputRequired) and the
	// client's retry goes on.
	Modern() bool
	// InputRequired answers the call with an input_required result asking
	// for the URL-mode elicitation params; false, answering nothing, when
	// the client declared no elicitation.
	InputRequired(params json.RawMessage) bool
	// ElicitURL reports whether the client takes URL-mode elicitation.
	ElicitURL() bool
	// Elicit sends elicitation/create with params and returns the action
	// the person took.
	Elicit(ctx context.Context, params json.RawMessage) (action string, err error)
}

// AskUser makes sure identity has a token for server before tool runs,
// asking the person through u when not: a URL-mode elicitation
// (2025-11-25; the call waits for the callback until ctx ends), or an
// input_required result (2026-07-28). It reports whether the call may go
// on; false when it has been answered.
func (m *Manager) AskUser(ctx context.Context, server, identity, tool string, u User) bool {
	h := m.Handler(server, identity)
	if h == nil || h.Ready() {
		return true
	}
	authorized := h.Authorized()
	bctx, bcancel := context.WithTimeout(ctx, BeginWait)
	st, err := h.Begin(bctx)
	bcancel()
	switch {
	case h.Ready():
		return true
	case err != nil || st.PendingURL == "":
		u.Refuse(false, fmt.Sprintf("edge-mcp: authorizing server %q for %q: %v", server, identity, err))
		return false
	}
	msg := fmt.Sprintf("edge-mcp: server %q needs your authorization before tool %q can run. Open the link, sign in and approve; then the call goes on.", server, tool)
	params, _ := json.Marshal(map[string]string{"mode": "url", "message": msg, "url": st.PendingURL, "elicitationId": "edge-mcp-oauth-" + server})
	openIt := fmt.Sprintf("edge-mcp: server %q needs your authorization: open this URL, then call again: %s", server, st.PendingURL)
	if u.Modern() {
		if !u.InputRequired(params) {
			u.Refuse(false, openIt)
		}
		return false
	}
	if !u.ElicitURL() {
		u.Refuse(false, openIt)
		return false
	}
	action, err := u.Elicit(ctx, params)
	if err != nil {
		u.Refuse(false, fmt.Sprintf("edge-mcp: asking for the authorization of server %q failed (%v); open this URL, then call again: %s", server, err, st.PendingURL))
		return false
	}
	if action != "accept" {
		u.Refuse(true, fmt.Sprintf("edge-mcp: the authorization of server %q was not given (%s); the call was not made", server, action))
		return false
	}
	select {
	case <-authorized:
	case <-h.Settled(): // completed, failed or expired
	case <-ctx.Done():
	}
	if !h.Ready() {
		err := &NeedsAuthorizationError{Server: server, Identity: identity, Pending: true}
		u.Refuse(false, "edge-mcp: "+err.Error())
		return false
	}
	return true
}

// UserAuthorization is, for a request other than tools/call (resources/
// read, prompts/get, completion) of identity without a token for server,
// the error to answer it with: it starts the authorization and carries
// its URL, instead of holding the session while its link cannot be
// dialed. nil when identity has a token.
func (m *Manager) UserAuthorization(ctx context.Context, server, identity string) error {
	h := m.Handler(server, identity)
	if h == nil || h.Ready() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, BeginWait)
	defer cancel()
	st, err := h.Begin(ctx)
	switch {
	case h.Ready():
		return nil
	case err != nil || st.PendingURL == "":
		return fmt.Errorf("authorizing server %q for %q: %v", server, identity, err)
	}
	return fmt.Errorf("server %q needs your authorization: open this URL, then try again: %s", server, st.PendingURL)
}
