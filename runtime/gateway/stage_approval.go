package gateway

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/consent"
)

// This file is the human approval stage of the tools/call pipeline: a call
// that a tool rule or a policy module marks as needing approval is held
// while the client asks a person (MCP elicitation). Accept lets it go on;
// decline, cancel, a client that cannot ask, or no answer in time stop it
// with a clear reason. Never a silent allow. Every decision is audited.

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
		decideApproval(tc, consent.Unavailable)
		return consent.NoElicitation(tool)
	}
	ctx, cancel := context.WithTimeout(s.ctx, consent.Timeout)
	defer cancel()
	res, rpcErr := s.request(ctx, tc.req.ID, "elicitation/create", approvalParams(tc))
	if rpcErr != nil {
		decideApproval(tc, consent.Failed)
		return consent.AskFailed(tool, rpcErr.Message)
	}
	return approvalAnswer(tc, res)
}

// approvalParams are the elicitation/create params asking for tc, its
// arguments' secrets masked.
func approvalParams(tc *toolCall) json.RawMessage {
	return consent.Question(tc.it.Exposed, tc.target.name, policy.RedactInput(tc.args))
}

// approvalAnswer decides tc by the person's answer res (an
// elicitation/create result); nil means allowed.
func approvalAnswer(tc *toolCall, res json.RawMessage) error {
	decision, err := consent.Decide(tc.it.Exposed, res)
	decideApproval(tc, decision)
	return err
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
