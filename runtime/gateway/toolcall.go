package gateway

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/admission"
)

// This file is the tools/call entry: the call as the pipeline carries it
// (toolCall), how the pipeline's answer reaches the client, and how an
// outcome is recorded (metrics, audit log). The stages themselves and their
// order are in pipeline.go.

// Tool call outcomes, as metrics and the audit log name them.
const (
	metricsOK          = metrics.OutcomeOK
	metricsError       = metrics.OutcomeError
	metricsTimeout     = metrics.OutcomeTimeout
	metricsUnavailable = metrics.OutcomeUnavailable
	metricsRateLimited = metrics.OutcomeRateLimited
)

// codeRateLimited is the JSON-RPC error code of a call over a rate limit on
// a stream (HTTP requests get 429 instead).
const codeRateLimited = -32029

// toolCall is one tools/call on its way through the pipeline: the tool, its
// arguments as raw JSON, and the session it came on (the caller's identity
// is s.id, its view of the catalogue s's).
type toolCall struct {
	s      *session
	gd     *guard // the admission rules the call started under
	req    *jsonrpc.Request
	it     *item
	ts     *toolSettings
	start  time.Time
	params json.RawMessage
	args   json.RawMessage
	target *upstream
	tool   string // the upstream's tool name
	// scope holds the policy generation deciding the call and its
	// concurrency slot; the scope stage releases it.
	scope callScope
	// approval is set when a rule or a policy asks a person first.
	approval bool
	// answer is the person's answer a 2026-07-28 client's retry carried.
	answer json.RawMessage
	// done is closed when a forwarded call has been answered, when its
	// caller waits for that (forward.go).
	done <-chan struct{}
	// ic is the interceptor chain the call met, for its result.
	ic *intercept.Chain
}

// toolCall runs the pipeline for a tools/call of it.
func (s *session) toolCall(req *jsonrpc.Request, it *item) { s.toolCallAnswered(req, it, nil) }

// toolCallAnswered runs the pipeline for a tools/call of it that carries a
// person's answer to its approval (a 2026-07-28 retry), if answer is not
// nil.
func (s *session) toolCallAnswered(req *jsonrpc.Request, it *item, answer json.RawMessage) {
	if it.Local != nil {
		// The gateway's own tools (tool search, tool_invoke) answer at
		// once, off the read loop; no stage applies to them.
		go it.Local(s, req)
		return
	}
	gd := s.g.guard.Load()
	tc := &toolCall{s: s, gd: gd, req: req, it: it, ts: gd.Settings(it.Up.name, it.RuleName()), start: time.Now(),
		params: req.Params, target: it.Up, tool: it.Name, answer: answer}
	tc.args, _, _ = wire.Field(req.Params, "arguments")
	tc.respond(toolPipeline(tc))
}

// respond writes what a handler returned to the client: a result, or an
// error; neither when the call went upstream or was answered already.
func (tc *toolCall) respond(result json.RawMessage, rerr *jsonrpc.Error) {
	switch {
	case rerr != nil:
		tc.s.write(tc.s.ctx, &jsonrpc.Response{ID: tc.req.ID, Error: rerr})
	case result != nil:
		tc.s.reply(tc.req.ID, result)
	}
}

// timeout is the deadline of a call: its tool rule's, else its server's.
func (tc *toolCall) timeout() time.Duration {
	if tc.ts.Timeout > 0 {
		return tc.ts.Timeout
	}
	return tc.target.cfg.Timeout
}

// refused records a call a stage stopped and returns the tool error the
// model reads (and can act on).
func (tc *toolCall) refused(outcome, reason string) json.RawMessage {
	tc.s.recordCall(tc, outcome, reason)
	return toolError(reason)
}

// failed records a call a stage stopped and returns its JSON-RPC error.
func (tc *toolCall) failed(outcome string, code int64, reason string) *jsonrpc.Error {
	tc.s.recordCall(tc, outcome, reason)
	return &jsonrpc.Error{Code: code, Message: reason}
}

// refuse answers a call with a tool error the model can read (and act
// on), and records the outcome.
func (s *session) refuse(tc *toolCall, outcome, reason string) {
	s.reply(tc.req.ID, tc.refused(outcome, reason))
}

// recordCall records a tool call's outcome in the metrics and audit log.
func (s *session) recordCall(tc *toolCall, outcome, errMsg string) {
	s.recordToolCall(tc.it.Up.name, tc.it.Exposed, outcome, tc.start, tc.args, errMsg)
}

// recordToolCall records a tool call's outcome in the metrics and audit log.
func (s *session) recordToolCall(server, tool, outcome string, start time.Time, args json.RawMessage, errMsg string) {
	g, d := s.g, time.Since(start)
	g.metrics.ToolCall(server, tool, outcome, d)
	g.tailCall(s.id.Name, server, tool, outcome, start, d, errMsg)
	if g.auditLog != nil {
		g.auditLog.ToolCall(audit.ToolCall{Time: start.UTC(), Identity: s.id.Name, Server: server, Tool: tool, Outcome: outcome,
			DurationMS: d.Milliseconds(), Arguments: args, Error: errMsg, SessionID: s.conn.SessionID()})
	}
}

// retryAfterHeader formats a Retry-After value.
func retryAfterHeader(d time.Duration) string { return strconv.Itoa(admission.RetryAfterSeconds(d)) }
