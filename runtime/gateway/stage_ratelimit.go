package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/runtime/admission"
)

// rateLimit applies the client's and the tool's rate limits to a call on a
// stream. Requests over streamable HTTP were checked before the transport
// read them, to answer 429 (admit.go).
func rateLimit(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		if tc.s.transport != transportStreamable && tc.gd.Limited() {
			if rl := tc.gd.AllowCall(tc.s.vs, tc.s.id.Name, tc.it.Up.name, tc.it.RuleName()); rl != nil {
				return nil, tc.rateLimited(rl)
			}
		}
		return next(tc)
	}
}

// rateLimited records a call over a rate limit and returns its error.
func (tc *toolCall) rateLimited(rl *rateLimited) *jsonrpc.Error {
	tc.s.g.metrics.RateLimited(rl.Scope)
	tc.s.recordCall(tc, metrics.OutcomeRateLimited, rl.Error())
	data, _ := json.Marshal(map[string]any{"retryAfter": admission.RetryAfterSeconds(rl.RetryAfter), "scope": rl.Scope})
	return &jsonrpc.Error{Code: codeRateLimited, Message: rl.Error(), Data: data}
}
