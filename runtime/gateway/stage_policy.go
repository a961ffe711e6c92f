package gateway

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy"
)

// policyDecision runs the tool_call policies of the call's generation:
// they allow it, rewrite its arguments, route it to another server or
// tool, deny it, or ask for a person's approval.
func policyDecision(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		if tc.scope.Gen == nil || !tc.scope.Gen.Chain().Hooks().Has(policy.HookToolCall) || !tc.s.g.icept.oldPolicyPath() {
			return next(tc)
		}
		s := tc.s
		fail := func(format string, args ...any) (json.RawMessage, *jsonrpc.Error) {
			return nil, tc.failed(metrics.OutcomeError, jsonrpc.CodeInternalError, fmt.Sprintf(format, args...))
		}
		start := time.Now()
		d, err := tc.scope.Gen.Chain().ToolCall(s.ctx, policy.CallInput{Client: s.client, Server: tc.it.Up.name, Tool: tc.it.Name, Arguments: tc.args})
		if err != nil {
			s.g.metrics.PolicyFailure(policyModuleOf(err), "tool_call")
			return fail("edge-mcp: policy check ended: %v", err)
		}
		s.g.metrics.PolicyDecision(orChain(d.Module), "tool_call", d.Action.String(), time.Since(start))
		switch d.Action {
		case policy.Deny:
			// Logged at INFO as shadow differences are: an operator sees
			// what an enforcing policy does.
			s.g.log.Info("policy denied a call", "policy", d.Module, "server", tc.it.Up.name, "tool", tc.it.Name, "reason", d.Reason)
			return tc.refused(metrics.OutcomeDenied, fmt.Sprintf("edge-mcp: policy %q denied this call: %s", d.Module, d.Reason)), nil
		case policy.Route:
			target := s.g.route.upstreams().byName[d.Server]
			if target == nil {
				return fail("edge-mcp: policy %q routed the call to unknown server %q", d.Module, d.Server)
			}
			tc.target = target
			if d.Tool != "" {
				tc.tool = d.Tool
			}
		}
		if d.Arguments != nil {
			tc.args = d.Arguments
			var err error
			if tc.params, err = wire.SetField(tc.params, "arguments", d.Arguments); err != nil {
				return fail("edge-mcp: applying policy %q: %v", d.Module, err)
			}
		}
		tc.approval = tc.approval || d.RequireApproval
		return next(tc)
	}
}
