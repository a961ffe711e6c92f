package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/runtime/consent"
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

// authorizeUser makes sure the caller's identity has a token for the
// call's server, asking its user when not (oauth.Manager.AskUser: the
// person has as long as for an approval; the pending authorization itself
// expires after oauth.DefaultPendingTTL); false when the call has been
// answered (refused, or input_required).
func authorizeUser(s *session, tc *toolCall) bool {
	ctx, cancel := context.WithTimeout(s.ctx, consent.Timeout)
	defer cancel()
	return s.g.oauth.AskUser(ctx, tc.target.name, s.id.Name, tc.it.Exposed, oauthUser{s, tc})
}

// oauthUser is the session of a tools/call as oauth.AskUser asks it.
type oauthUser struct {
	s  *session
	tc *toolCall
}

func (u oauthUser) Modern() bool    { return u.s.modern.Load() }
func (u oauthUser) ElicitURL() bool { return u.s.caps.elicitationURL }

func (u oauthUser) Refuse(denied bool, reason string) {
	outcome := metrics.OutcomeUnavailable
	if denied {
		outcome = metrics.OutcomeDenied
	}
	u.s.refuse(u.tc, outcome, reason)
}

func (u oauthUser) InputRequired(params json.RawMessage) bool {
	if !u.s.bridging.Declares("elicitation") {
		return false
	}
	res, err := json.Marshal(map[string]any{"resultType": "input_required", "inputRequests": map[string]any{
		oauthInputKey: map[string]any{"method": "elicitation/create", "params": params}}})
	if err != nil {
		u.s.replyError(u.tc.req.ID, jsonrpc.CodeInternalError, "edge-mcp: %v", err)
		return true
	}
	u.s.reply(u.tc.req.ID, res)
	return true
}

func (u oauthUser) Elicit(ctx context.Context, params json.RawMessage) (string, error) {
	res, rpcErr := u.s.request(ctx, u.tc.req.ID, "elicitation/create", params)
	if rpcErr != nil {
		return "", errors.New(rpcErr.Message)
	}
	var answer struct {
		Action string `json:"action"`
	}
	json.Unmarshal(res, &answer)
	return answer.Action, nil
}
