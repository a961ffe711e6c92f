package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/policy"
)

// This file is the human approval stage of the tools/call chain: a call
// that a tool rule or a policy module marks as needing approval is held
// while the client asks a person (MCP elicitation). Accept lets it go on;
// decline, cancel, a client that cannot ask, or no answer in time stop it
// with a clear reason. Never a silent allow. Every decision is audited.

// approvalTimeout bounds how long a call waits for a person.
const approvalTimeout = 10 * time.Minute

// approvalSchema is what the person is asked to fill in.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Allow this call","description":"Check to let the tool call go ahead."}},"required":["approve"]}`)

// approve asks the client's user to allow tc; nil means allowed.
func (s *session) approve(tc *toolCall) error {
	tool := tc.it.exposed
	if !s.caps.elicitation {
		s.decideApproval(tc, "unavailable")
		return fmt.Errorf("edge-mcp: tool %q needs a person's approval, but this client cannot ask for it (no elicitation support); the call was not made", tool)
	}
	ctx, cancel := context.WithTimeout(s.ctx, approvalTimeout)
	defer cancel()
	res, rpcErr := s.request(ctx, tc.req.ID, "elicitation/create", approvalParams(tc))
	if rpcErr != nil {
		s.decideApproval(tc, "failed")
		return fmt.Errorf("edge-mcp: asking for approval of tool %q failed (%s); the call was not made", tool, rpcErr.Message)
	}
	return s.approvalAnswer(tc, res)
}

// approvalParams are the elicitation/create params asking for tc.
func approvalParams(tc *toolCall) json.RawMessage {
	shown := policy.RedactInput(tc.args)
	if len(shown) == 0 {
		shown = json.RawMessage(`{}`)
	}
	msg := fmt.Sprintf("edge-mcp: allow the call of tool %q on server %q?\nArguments (secrets masked): %s", tc.it.exposed, tc.target.name, shown)
	params, _ := json.Marshal(struct {
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}{msg, approvalSchema})
	return params
}

// approvalAnswer decides tc by the person's answer res (an
// elicitation/create result); nil means allowed.
func (s *session) approvalAnswer(tc *toolCall, res json.RawMessage) error {
	tool := tc.it.exposed
	var answer struct {
		Action  string `json:"action"`
		Content struct {
			Approve bool `json:"approve"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &answer); err != nil {
		s.decideApproval(tc, "invalid")
		return fmt.Errorf("edge-mcp: the approval answer for tool %q was not understood; the call was not made", tool)
	}
	switch {
	case answer.Action == "accept" && answer.Content.Approve:
		s.decideApproval(tc, "approved")
		return nil
	case answer.Action == "accept":
		s.decideApproval(tc, "declined")
		return fmt.Errorf("edge-mcp: the user did not approve the call of tool %q", tool)
	case answer.Action == "decline":
		s.decideApproval(tc, "declined")
		return fmt.Errorf("edge-mcp: the user declined the call of tool %q", tool)
	default:
		s.decideApproval(tc, "cancelled")
		return fmt.Errorf("edge-mcp: the user cancelled the approval of tool %q; the call was not made", tool)
	}
}

// decideApproval audits and logs the decision on tc.
func (s *session) decideApproval(tc *toolCall, decision string) {
	server, tool := tc.target.name, tc.it.exposed
	if s.g.auditLog != nil {
		s.g.auditLog.Approval(audit.Approval{Time: time.Now().UTC(), Identity: s.id.Name, Server: server, Tool: tool,
			Decision: decision, Arguments: tc.args})
	}
	s.g.log.Info("tool call approval", "decision", decision, "identity", s.id.Name, "server", server, "tool", tool)
}
