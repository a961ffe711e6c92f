package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is per-user upstream identity ("identity": "per_client"):
// each downstream identity (API key name, JWT subject) has upstream
// tokens of its own. Such a server gives every downstream session a link
// of its own (clients.go), dialed with the handler of the session's
// identity, so a token of one identity is never sent for another, and the
// downstream client's own credentials never go upstream. The catalogue
// comes from the shared link, authorized by an operator like a shared
// server. A tools/call of an identity without a token starts its
// authorization and asks the client's user to open the URL: a URL-mode
// elicitation (2025-11-25; the call waits for the callback), or an
// input_required result (2026-07-28; the client's retry goes on).

// oauthInputKey is the key of the authorization in inputRequests.
const oauthInputKey = "edge-mcp-oauth"

// perIdentity reports whether u has upstream tokens per downstream
// identity.
func (u *upstream) perIdentity() bool {
	return u.cfg.Identity == "per_client" && u.cfg.OAuth != nil
}

// needsUserAuthorization reports whether s's identity has no token for
// u yet (a tools/call then takes the slow path, which asks for one).
func (u *upstream) needsUserAuthorization(s *session) bool {
	if !u.perIdentity() {
		return false
	}
	h := u.g.oauth.Handler(u.name, s.id.Name)
	return h != nil && !h.Ready()
}

// identityTransport is u's transport with the handler of identity in
// place of the shared one.
func (g *Gateway) identityTransport(sc config.Server, t mcp.Transport, identity string) mcp.Transport {
	h := g.oauth.Handler(sc.Name, identity)
	if h == nil {
		return t
	}
	switch tt := t.(type) {
	case *transports.StreamableClientTransport:
		c := *tt
		c.OAuthHandler = h
		return &c
	case *transports.WebSocketClientTransport:
		c := *tt
		c.OAuthHandler = h
		return &c
	case *mcp.SSEClientTransport:
		header := http.Header{}
		for k, v := range sc.Headers {
			header.Set(k, v)
		}
		return &mcp.SSEClientTransport{Endpoint: tt.Endpoint, HTTPClient: transports.WithOAuth(sseHTTPClient(sc, header), h)}
	}
	return t
}

// authorizeUser makes sure the caller's identity has a token for the
// call's server, asking its user when not; false when the call has been
// answered (refused, or input_required).
func (s *session) authorizeUser(tc *toolCall) bool {
	u := tc.target
	h := s.g.oauth.Handler(u.name, s.id.Name)
	if h == nil || h.Ready() {
		return true
	}
	// The person has as long as for an approval (the pending
	// authorization itself expires after oauth.DefaultPendingTTL).
	ctx, cancel := context.WithTimeout(s.ctx, approvalTimeout)
	defer cancel()
	authorized := h.Authorized()
	bctx, bcancel := context.WithTimeout(ctx, beginWait)
	st, err := h.Begin(bctx)
	bcancel()
	switch {
	case h.Ready():
		return true
	case err != nil || st.PendingURL == "":
		s.refuse(tc, metrics.OutcomeUnavailable, fmt.Sprintf("edge-mcp: authorizing server %q for %q: %v", u.name, s.id.Name, err))
		return false
	}
	msg := fmt.Sprintf("edge-mcp: server %q needs your authorization before tool %q can run. Open the link, sign in and approve; then the call goes on.", u.name, tc.it.exposed)
	params, _ := json.Marshal(map[string]string{"mode": "url", "message": msg, "url": st.PendingURL, "elicitationId": "edge-mcp-oauth-" + u.name})
	if s.modern.Load() {
		return s.askByInputRequired(tc, params, st.PendingURL)
	}
	if !s.caps.elicitationURL {
		s.refuse(tc, metrics.OutcomeUnavailable, fmt.Sprintf("edge-mcp: server %q needs your authorization: open this URL, then call again: %s", u.name, st.PendingURL))
		return false
	}
	res, rpcErr := s.request(ctx, tc.req.ID, "elicitation/create", params)
	if rpcErr != nil {
		s.refuse(tc, metrics.OutcomeUnavailable, fmt.Sprintf("edge-mcp: asking for the authorization of server %q failed (%s); open this URL, then call again: %s", u.name, rpcErr.Message, st.PendingURL))
		return false
	}
	var answer struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(res, &answer); answer.Action != "accept" {
		s.refuse(tc, metrics.OutcomeDenied, fmt.Sprintf("edge-mcp: the authorization of server %q was not given (%s); the call was not made", u.name, answer.Action))
		return false
	}
	select {
	case <-authorized:
	case <-h.Settled(): // completed, failed or expired
	case <-ctx.Done():
	}
	if !h.Ready() {
		err := &oauth.NeedsAuthorizationError{Server: u.name, Identity: s.id.Name, Pending: true}
		s.refuse(tc, metrics.OutcomeUnavailable, "edge-mcp: "+err.Error())
		return false
	}
	return true
}

// askByInputRequired answers a 2026-07-28 call with an input_required
// result asking for the URL-mode elicitation; the client's retry is an
// ordinary call, which goes on once the callback has stored the token.
func (s *session) askByInputRequired(tc *toolCall, params json.RawMessage, pending string) bool {
	if !s.bridging.Declares("elicitation") {
		s.refuse(tc, metrics.OutcomeUnavailable, fmt.Sprintf("edge-mcp: server %q needs your authorization: open this URL, then call again: %s", tc.target.name, pending))
		return false
	}
	res, err := json.Marshal(map[string]any{"resultType": "input_required", "inputRequests": map[string]any{
		oauthInputKey: map[string]any{"method": "elicitation/create", "params": params}}})
	if err != nil {
		s.replyError(tc.req.ID, jsonrpc.CodeInternalError, "edge-mcp: %v", err)
		return false
	}
	s.reply(tc.req.ID, res)
	return false
}

// beginWait bounds how long a request other than tools/call waits for the
// authorization URL of its identity (discovery and registration).
const beginWait = 10 * time.Second

// refuseUnauthorized answers a request other than tools/call (resources/
// read, prompts/get, completion) of an identity without a token for u
// with an error carrying its authorization URL, instead of holding the
// session while its link cannot be dialed; it reports whether it did.
func (s *session) refuseUnauthorized(req *jsonrpc.Request, u *upstream) bool {
	if !u.needsUserAuthorization(s) {
		return false
	}
	h := s.g.oauth.Handler(u.name, s.id.Name)
	ctx, cancel := context.WithTimeout(s.ctx, beginWait)
	defer cancel()
	st, err := h.Begin(ctx)
	switch {
	case h.Ready():
		return false
	case err != nil || st.PendingURL == "":
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: authorizing server %q for %q: %v", u.name, s.id.Name, err)
	default:
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: server %q needs your authorization: open this URL, then try again: %s", u.name, st.PendingURL)
	}
	return true
}
