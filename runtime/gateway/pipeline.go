package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// This file is the tools/call pipeline, read top to bottom in the order a
// call meets its stages, the way CoreDNS composes its plugins. Each stage
// is a func(next Handler) Handler in a file of its own (stage_*.go): it
// answers the call (a result, or a JSON-RPC error, recording the outcome),
// or changes it and hands it to next. The last handler sends the call
// upstream; the answer comes back through the session's in-flight table
// (link.go, results.go), where the result policies run. The gateway's own
// tools (tool search, tool_invoke) do not enter it (toolcall.go).

// Handler handles one tools/call. It returns the result or the JSON-RPC
// error to answer the call with, or neither when the call went upstream
// or has been answered already (by a stage that asks the client first,
// or off the read loop).
type Handler func(tc *toolCall) (json.RawMessage, *jsonrpc.Error)

// Stage is one step of the pipeline.
type Stage func(next Handler) Handler

// toolPipeline is the tools/call pipeline.
var toolPipeline Handler

func init() {
	toolPipeline = chain(forwardCall, // stage_forward.go: the upstream (terminal)
		rateLimit,          // stage_ratelimit.go: per-client and per-tool rate limits (streams; HTTP is checked in admit.go)
		refuseVirtualArgs,  // virtual.go: a virtual server's fixed and hidden arguments are not the client's
		validateArgs,       // stage_validate.go: arguments against the tool's inputSchema
		rewriteVirtualArgs, // virtual.go: a virtual server's fixed arguments and defaults added
		holdScope,          // stage_scope.go: the policy generation; off the read loop from here when a stage may wait
		interceptCall,      // stage_intercept.go: the SEP-2624 interceptor chain, request phase (the response phase: results.go)
		policyDecision,     // stage_policy.go: tool_call policies (allow, rewrite, route, deny, ask)
		approval,           // stage_approval.go: a person allows the call (elicitation, or input_required)
		userAuthorized,     // stage_authorize.go: a per-identity upstream has the caller's token
		concurrencySlot,    // stage_slot.go: the server's concurrency limit
	)
}

// chain wraps h in stages, the first stage outermost.
func chain(h Handler, stages ...Stage) Handler {
	for i := len(stages) - 1; i >= 0; i-- {
		h = stages[i](h)
	}
	return h
}
