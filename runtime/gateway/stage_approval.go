package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/policy"
)

// This file is the human approval stage of the tools/call pipeline: a call
// that a tool rule or a policy module marks as needing approval is held
// while the client asks a person (MCP elicitation). Accept lets it go on;
// decline, cancel, a client that cannot ask, or no answer in time stop it
// with a clear reason. Never a silent allow. Every decision is audited.

// approvalTimeout bounds how long a call waits for a person.
const approvalTimeout = 10 * time.Minute

// approvalSchema is what the person is asked to fill in.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Allow this call","description":"Check to let the tool call go ahead."}},"required":["approve"]}`)

// approval holds a call a tool rule or a policy marked until a person
// allows it: a 2026-07-28 client is answered input_required, and its retry
// carries the answer (approval_modern.go); other clients are asked by
// elicitation/create while the call waits.
func approval(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		if !tc.approval {
			return next(tc)
		}
		s := tc.s
		var err error
		switch {
		case tc.answer != nil:
			err = approvalAnswer(tc, tc.answer)
		case s.modern.Load():
			s.askApproval(tc) // input_required (or -32021 without elicitation); the retry comes back with the answer
			return nil, nil
		default:
			err = approve(tc)
		}
		if err != nil {
			return tc.refused(metrics.OutcomeDenied, err.Error()), nil
		}
		return next(tc)
	}
}

// approve asks the client's user to allow tc; nil means allowed.
func approve(tc *toolCall) error {
	s, tool := tc.s, tc.it.Exposed
	if !s.caps.elicitation {
		decideApproval(tc, "unavailable")
		return fmt.Errorf("edge-mcp: tool %q needs a person's approval, but this client cannot ask for it (no elicitation support); the call was not made", tool)
	}
	ctx, cancel := context.WithTimeout(s.ctx, approvalTimeout)
	defer cancel()
	res, rpcErr := s.request(ctx, tc.req.ID, "elicitation/create", approvalParams(tc))
	if rpcErr != nil {
		decideApproval(tc, "failed")
		return fmt.Errorf("edge-mcp: asking for approval of tool %q failed (%s); the call was not made", tool, rpcErr.Message)
	}
	return approvalAnswer(tc, res)
}

// approvalParams are the elicitation/create params asking for tc.
func approvalParams(tc *toolCall) json.RawMessage {
	shown := policy.RedactInput(tc.args)
	if len(shown) == 0 {
		shown = json.RawMessage(`{}`)
	}
	msg := fmt.Sprintf("edge-mcp: allow the call of tool %q on server %q?\nArguments (secrets masked): %s", tc.it.Exposed, tc.target.name, shown)
	params, _ := json.Marshal(struct {
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}{msg, approvalSchema})
	return params
}

// approvalAnswer decides tc by the person's answer res (an
// elicitation/create result); nil means allowed.
func approvalAnswer(tc *toolCall, res json.RawMessage) error {
	tool := tc.it.Exposed
	var answer struct {
		Action  string `json:"action"`
		Content struct {
			Approve bool `json:"approve"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &answer); err != nil {
		decideApproval(tc, "invalid")
		return fmt.Errorf("edge-mcp: the approval answer for tool %q was not understood; the call was not made", tool)
	}
	switch {
	case answer.Action == "accept" && answer.Content.Approve:
		decideApproval(tc, "approved")
		return nil
	case answer.Action == "accept":
		decideApproval(tc, "declined")
		return fmt.Errorf("edge-mcp: the user did not approve the call of tool %q", tool)
	case answer.Action == "decline":
		decideApproval(tc, "declined")
		return fmt.Errorf("edge-mcp: the user declined the call of tool %q", tool)
	default:
		decideApproval(tc, "cancelled")
		return fmt.Errorf("edge-mcp: the user cancelled the approval of tool %q; the call was not made", tool)
	}
}

// decideApproval audits and logs the decision on tc.
func decideApproval(tc *toolCall, decision string) {
	s, server, tool := tc.s, tc.target.name, tc.it.Exposed
	if s.g.auditLog != nil {
		s.g.auditLog.Approval(audit.Approval{Time: time.Now().UTC(), Identity: s.id.Name, Server: server, Tool: tool,
			Decision: decision, Arguments: tc.args})
	}
	s.g.log.Info("tool call approval", "decision", decision, "identity", s.id.Name, "server", server, "tool", tool)
}
