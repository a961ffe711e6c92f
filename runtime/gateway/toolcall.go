package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/attribute"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/limits"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/schema"
	"github.com/edge-mcp/edge-mcp/internal/telemetry"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// This file is the tools/call chain, in order: the gateway's own tools
// answer at once; then rate limits, argument validation against the tool's
// inputSchema, tool_call policies (allow, rewrite, route, deny), human
// approval, the upstream's concurrency limit, and the upstream. Each stage
// that refuses answers the call once, with a reason, and records the
// outcome (metrics, audit log).

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

// toolCall is one tools/call on its way through the chain.
type toolCall struct {
	req    *jsonrpc.Request
	it     *item
	ts     *toolSettings
	start  time.Time
	params json.RawMessage
	args   json.RawMessage
	target *upstream
	tool   string // the upstream's tool name
	// scope holds the policy generation deciding the call and its
	// concurrency slot; toolCallSlow releases it.
	scope callScope
	// approval is set when a rule or a policy asks a person first.
	approval bool
	// answer is the person's answer a 2026-07-28 client's retry carried.
	answer json.RawMessage
}

// toolCall runs the chain for a tools/call of it.
func (s *session) toolCall(req *jsonrpc.Request, it *item) { s.toolCallAnswered(req, it, nil) }

// toolCallAnswered runs the chain for a tools/call of it that carries a
// person's answer to its approval (a 2026-07-28 retry), if answer is not
// nil.
func (s *session) toolCallAnswered(req *jsonrpc.Request, it *item, answer json.RawMessage) {
	if it.local != nil {
		go it.local(s, req)
		return
	}
	gd := s.g.guard.Load()
	tc := &toolCall{req: req, it: it, ts: gd.settings(it.up.name, it.exposed), start: time.Now(),
		params: req.Params, target: it.up, tool: it.name, answer: answer}
	tc.args, _, _ = wire.Field(req.Params, "arguments")
	if s.transport != transportStreamable && gd.limited() {
		// Requests over streamable HTTP were checked before the transport
		// read them, to answer 429.
		if rl := gd.allowCall(s.id.Name, it.up.name, it.exposed); rl != nil {
			s.rateLimited(tc, rl)
			return
		}
	}
	if tc.ts.validate {
		if err := s.g.validateArguments(it, tc.args); err != nil {
			s.refuse(tc, metrics.OutcomeInvalidArguments, fmt.Sprintf("edge-mcp: invalid arguments for tool %q: %v", it.exposed, err))
			return
		}
	}
	tc.scope = s.g.pol.scope(kindTools, it.up.name, it.name)
	tc.approval = tc.ts.approval
	if tc.scope.held() || tc.approval || gd.concurrency(it.up.name) != nil || it.up.needsUserAuthorization(s) {
		go s.toolCallSlow(tc, gd) // modules, people and queues take time: off the read loop
		return
	}
	s.toolCallForward(tc)
}

// toolCallSlow runs the stages that may wait.
// It owns the call's scope: whatever happens, the scope is released once
// the call has been answered.
func (s *session) toolCallSlow(tc *toolCall, gd *guard) {
	defer tc.scope.release()
	if tc.scope.pg != nil && !s.decide(tc) {
		return
	}
	if tc.approval {
		var err error
		switch {
		case tc.answer != nil:
			err = s.approvalAnswer(tc, tc.answer)
		case s.modern.Load():
			s.askApproval(tc) // input_required (or -32021 without elicitation); the retry comes back with the answer
			return
		default:
			err = s.approve(tc)
		}
		if err != nil {
			s.refuse(tc, metrics.OutcomeDenied, err.Error())
			return
		}
	}
	if tc.target.perIdentity() && !s.authorizeUser(tc) { // oauth_client.go
		return
	}
	if conc := gd.concurrency(tc.target.name); conc != nil {
		ctx, cancel := context.WithTimeout(s.ctx, s.timeoutOf(tc))
		rel, err := conc.Acquire(ctx)
		cancel()
		if err != nil {
			reason := fmt.Sprintf("edge-mcp: server %q is busy: %d calls in flight and %d waiting", tc.target.name, conc.InFlight(), conc.Waiting())
			if !errors.Is(err, limits.ErrQueueFull) {
				reason = fmt.Sprintf("edge-mcp: server %q stayed busy: %v", tc.target.name, err)
			}
			s.recordCall(tc, metrics.OutcomeUnavailable, reason)
			s.replyError(tc.req.ID, jsonrpc.CodeInternalError, "%s", reason)
			return
		}
		tc.scope.slot = rel
	}
	if done := s.toolCallForward(tc); done != nil {
		<-done
	}
}

// toolCallForward sends the call upstream. It returns a channel closed when
// the call has been answered, or nil when it was answered already (or holds
// no scope, so nobody waits).
func (s *session) toolCallForward(tc *toolCall) <-chan struct{} {
	params := tc.params
	if tc.tool != tc.it.name || tc.target != tc.it.up || tc.it.exposed != tc.it.name {
		var err error
		if params, err = wire.SetField(params, "name", wire.AppendString(nil, tc.tool)); err != nil {
			s.replyError(tc.req.ID, jsonrpc.CodeInvalidParams, "%s: %v", tc.req.Method, err)
			return nil
		}
	}
	info := forwardInfo{tool: tc.it.exposed, upName: tc.tool, kind: kindTools, timeout: tc.ts.timeout, start: tc.start, waited: tc.scope.held()}
	if s.g.auditLog != nil {
		info.args = tc.args
	}
	if pg := tc.scope.pg; pg != nil && resultPolicy(pg.chain, kindTools, tc.target.name, tc.tool) {
		info.pg = pg
		info.args = tc.args
	}
	if s.g.tracer != nil {
		ctx, span := s.g.tracer.Start(telemetry.ExtractMeta(s.ctx, params), "tools/call "+tc.it.exposed,
			attribute.String("mcp.server", tc.target.name), attribute.String("mcp.tool", tc.tool),
			attribute.String("enduser.id", s.id.Name))
		params = telemetry.InjectMeta(ctx, params)
		info.span = span
	}
	return s.forward(tc.req, tc.target, params, info)
}

// timeoutOf is the deadline of a call: its tool rule's, else its server's.
func (s *session) timeoutOf(tc *toolCall) time.Duration {
	if tc.ts.timeout > 0 {
		return tc.ts.timeout
	}
	return tc.target.cfg.Timeout
}

// refuse answers a call the chain stopped with a tool error the model can
// read (and act on), and records the outcome.
func (s *session) refuse(tc *toolCall, outcome, reason string) {
	s.recordCall(tc, outcome, reason)
	s.reply(tc.req.ID, toolError(reason))
}

// rateLimited answers a call over a rate limit on a stream.
func (s *session) rateLimited(tc *toolCall, rl *rateLimited) {
	s.g.metrics.RateLimited(rl.scope)
	s.recordCall(tc, metrics.OutcomeRateLimited, rl.Error())
	data, _ := json.Marshal(map[string]any{"retryAfter": retryAfterSeconds(rl.retryAfter), "scope": rl.scope})
	s.write(s.ctx, &jsonrpc.Response{ID: tc.req.ID, Error: &jsonrpc.Error{Code: codeRateLimited, Message: rl.Error(), Data: data}})
}

// recordCall records a tool call's outcome in the metrics and audit log.
func (s *session) recordCall(tc *toolCall, outcome, errMsg string) {
	s.g.recordToolCall(s, tc.it.up.name, tc.it.exposed, outcome, tc.start, tc.args, errMsg)
}

// recordToolCall records a tool call's outcome in the metrics and audit log.
func (g *Gateway) recordToolCall(s *session, server, tool, outcome string, start time.Time, args json.RawMessage, errMsg string) {
	d := time.Since(start)
	g.metrics.ToolCall(server, tool, outcome, d)
	if g.auditLog != nil {
		g.auditLog.ToolCall(audit.ToolCall{Time: start.UTC(), Identity: s.id.Name, Server: server, Tool: tool, Outcome: outcome,
			DurationMS: d.Milliseconds(), Arguments: args, Error: errMsg, SessionID: s.conn.SessionID()})
	}
}

// validateArguments checks a call's arguments against the tool's
// inputSchema. A schema that does not compile is logged and lets the call
// through: a broken upstream schema must not brick its tool.
func (g *Gateway) validateArguments(it *item, args json.RawMessage) error {
	sch, ok, _ := wire.Field(it.raw, "inputSchema")
	if !ok {
		return nil
	}
	// A null optional argument is checked as absent (see
	// schema.WithoutOptionalNulls); the arguments go upstream unchanged.
	err := g.validator.Validate(sch, schema.WithoutOptionalNulls(sch, args))
	if errors.Is(err, schema.ErrBadSchema) {
		g.log.Debug("tool input schema does not compile; arguments not checked", "server", it.up.name, "tool", it.exposed, "err", err)
		return nil
	}
	return err
}

// retryAfterHeader formats a Retry-After value.
func retryAfterHeader(d time.Duration) string { return strconv.Itoa(retryAfterSeconds(d)) }
