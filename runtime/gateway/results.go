package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/tasks"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is the way back: an upstream's answer to a forwarded call is
// recorded (metrics, audit, events), passes the result policies of the
// call's generation when any apply, and is written to the session that
// asked, under the client's own request id.

// toolError is a CallToolResult that reports an error to the model.
func toolError(text string) json.RawMessage {
	b := append([]byte(`{"content":[{"type":"text","text":`), wire.AppendString(nil, text)...)
	return append(b, `}],"isError":true}`...)
}

// resultHooks is the result hook of each kind a call reads.
var resultHooks = [numKinds]policy.Hook{kindTools: policy.HookToolResult, kindPrompts: policy.HookPromptResult,
	kindResources: policy.HookResourceResult, kindTemplates: policy.HookResourceResult}

// resultPolicy reports whether a call's result must pass through the chain.
func resultPolicy(ch *policy.Chain, kind listKind, server, name string) bool {
	return ch.Hooks().Has(resultHooks[kind]) && len(ch.Match(server, name)) > 0
}

// filterResult runs the result policies of a finished call and returns the
// response to send downstream and, when they withheld the result, the
// call's outcome (denied when a policy or an interceptor refused it).
func (s *session) filterResult(c *call, resp *jsonrpc.Response) (*jsonrpc.Response, string) {
	if c.method == "tasks/get" {
		return tasks.FilterInlined(resp, func(r *jsonrpc.Response) *jsonrpc.Response {
			out, _ := s.filterResult(c.inlined(), r)
			return out
		}), ""
	}
	if c.pg == nil || !s.g.icept.oldPolicyPath() {
		return s.interceptResult(c, resp.ID, resp.Result)
	}
	var (
		res json.RawMessage
		err error
	)
	ch := c.pg.Chain()
	switch c.kind {
	case kindTools:
		res, err = ch.ToolResult(s.ctx, policy.ResultInput{Client: s.client, Server: c.server, Tool: c.upName, Arguments: c.args, Result: resp.Result})
	case kindPrompts:
		res, err = ch.PromptResult(s.ctx, policy.PromptInput{Client: s.client, Server: c.server, Prompt: c.upName, Arguments: c.args, Result: resp.Result})
	case kindResources:
		res, err = ch.ResourceResult(s.ctx, policy.ResourceInput{Client: s.client, Server: c.server, URI: c.upName, Result: resp.Result})
	}
	var denied *policy.DeniedError
	switch {
	case errors.As(err, &denied):
		return &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("edge-mcp: policy %q withheld this result: %s", denied.Module, denied.Reason)}}, metrics.OutcomeDenied
	case err != nil:
		return &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: policy check ended: " + err.Error()}}, metricsError
	}
	if c.ic != nil {
		return s.interceptResult(c, resp.ID, res)
	}
	return &jsonrpc.Response{ID: resp.ID, Result: res}, ""
}

// recordFiltered records a tool call whose result went through the result
// policies: withheld (outcome set), or delivered as the upstream said.
func (s *session) recordFiltered(c *call, result json.RawMessage, fr *jsonrpc.Response, outcome string) {
	if outcome != "" {
		msg := ""
		if e, ok := fr.Error.(*jsonrpc.Error); ok {
			msg = e.Message
		}
		s.recordToolCall(c.server, c.tool, outcome, c.start, c.args, msg)
		return
	}
	outcome = metricsOK
	if v, ok, _ := wire.Field(result, "isError"); ok && string(v) == "true" {
		outcome = metricsError
	}
	s.recordToolCall(c.server, c.tool, outcome, c.start, c.args, "")
}

// finish delivers an upstream's answer to a forwarded call.
func (s *session) finish(c *call, resp *jsonrpc.Response) {
	if s.g.bridge.Redirect(bridgingCall{c}, resp) {
		return // a bridged call: its retry got the answer (runtime/bridge)
	}
	s.mu.Lock()
	f := s.inflight[c.origID]
	delete(s.inflight, c.origID)
	s.mu.Unlock()
	out := &jsonrpc.Response{ID: c.origID, Result: resp.Result, Error: resp.Error}
	s.g.route.tasks.Answer(taskOps{s.g}, taskSession{s}, c.task(f.l), out) // runtime/tasks
	filtered := (c.pg != nil || c.ic != nil) && resp.Error == nil
	if c.tool != "" && !filtered {
		outcome, msg := metricsOK, ""
		if e, ok := resp.Error.(*jsonrpc.Error); ok {
			outcome, msg = metricsError, e.Message
			if transports.IsLocal(resp) || e.Code == jsonrpc.CodeInternalError && strings.HasPrefix(e.Message, "edge-mcp: ") {
				outcome = metricsUnavailable
			}
		} else if resp.Error != nil {
			outcome, msg = metricsError, resp.Error.Error()
		} else if v, ok, _ := wire.Field(resp.Result, "isError"); ok && string(v) == "true" {
			outcome = metricsError
		}
		s.recordToolCall(c.server, c.tool, outcome, c.start, c.args, msg)
	}
	switch {
	case filtered:
		// Result policies may take a while: off the upstream's read loop.
		// The call is recorded once they are done: a withheld result is a
		// denied call, as a refused request is.
		go func() {
			defer c.end("")
			fr, outcome := s.filterResult(c, out)
			if c.tool != "" {
				s.recordFiltered(c, resp.Result, fr, outcome)
			}
			s.write(s.ctx, fr)
		}()
	default:
		c.end("")
		s.write(s.ctx, out)
	}
	// One line per call would drown the lifecycle events: calls are logged
	// at DEBUG (and recorded in the audit log); subscribers get them all.
	if c.tool != "" && s.g.events.Wanted(slog.LevelDebug) {
		ev := Event{Type: EventToolExecuted, Server: c.server, Tool: c.tool, Success: true,
			Duration: time.Since(c.start), ContentLength: len(resp.Result)}
		if e, ok := resp.Error.(*jsonrpc.Error); ok {
			ev.Success, ev.ErrorMessage = false, e.Message
		} else if resp.Error != nil {
			ev.Success, ev.ErrorMessage = false, resp.Error.Error()
		} else if v, ok, _ := wire.Field(resp.Result, "isError"); ok && string(v) == "true" {
			ev.Success, ev.ErrorMessage = false, "the tool reported an error (isError)"
		}
		s.g.events.Emit(slog.LevelDebug, ev)
	}
}
