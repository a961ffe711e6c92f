package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/attribute"

	"github.com/edge-mcp/edge-mcp/internal/telemetry"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// forwardCall sends the call upstream (forward.go), under the upstream
// tool name a policy may have routed it to. The answer comes back through
// the session's in-flight table; when the call holds a scope, tc.done is
// closed once it has been answered.
func forwardCall(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
	s, params := tc.s, tc.params
	if tc.tool != tc.it.Name || tc.target != tc.it.Up || tc.it.Exposed != tc.it.Name {
		var err error
		if params, err = wire.SetField(params, "name", wire.AppendString(nil, tc.tool)); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %v", tc.req.Method, err)}
		}
	}
	info := forwardInfo{tool: tc.it.Exposed, upName: tc.tool, kind: kindTools, timeout: tc.ts.Timeout, start: tc.start, waited: tc.scope.Held()}
	if s.g.auditLog != nil {
		info.args = tc.args
	}
	info.ic = tc.ic
	if pg := tc.scope.Gen; pg != nil && s.g.icept.oldPolicyPath() && resultPolicy(pg.Chain(), kindTools, tc.target.name, tc.tool) {
		info.pg = pg
		info.args = tc.args
	}
	if s.g.tracer != nil {
		ctx, span := s.g.tracer.Start(telemetry.ExtractMeta(s.ctx, params), "tools/call "+tc.it.Exposed,
			attribute.String("mcp.server", tc.target.name), attribute.String("mcp.tool", tc.tool),
			attribute.String("enduser.id", s.id.Name))
		params = telemetry.InjectMeta(ctx, params)
		info.span = span
	}
	tc.done = s.forward(tc.req, tc.target, params, info)
	return nil, nil
}
