package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// LegacyInterceptors maps the module's ABI 1.0 hooks onto SEP-2624
// interceptors (ABI.md, "ABI 1.0 hooks as interceptors"), named after the
// module:
//
//   - tool_call: "<module>/tool_call", a validator on tools/call requests
//     (deny refuses with the reason; route and require_approval are
//     reported in the result's info), and "<module>/tool_call/rewrite", a
//     mutator on tools/call requests (rewrite, or route with arguments,
//     replaces the arguments);
//   - tool_result: "<module>/tool_result", a mutator on tools/call
//     responses;
//   - resource_result: "<module>/resource_result", a mutator on
//     resources/read responses;
//   - prompt_result: "<module>/prompt_result", a mutator on prompts/get
//     responses.
//
// tools_list and event are not events of one call (they see the merged
// catalogue and the gateway's own events) and stay gateway hooks. The
// invocation context supplies what the ABI 1.0 inputs need beyond the
// payload: the server (Context.Server), the principal (Context.Principal)
// and, for results, the tool, URI or prompt (Context.Subject).
func (m *Module) LegacyInterceptors() []intercept.Interceptor {
	var out []intercept.Interceptor
	add := func(h Hook, suffix string, t intercept.Type, event string, ph intercept.Phase) {
		if !m.hooks.Has(h) {
			return
		}
		out = append(out, &legacy{m: m, hook: h, desc: intercept.Descriptor{
			Name: m.name + "/" + h.String() + suffix, Type: t,
			Description: "ABI 1.0 " + h.String() + " hook of policy " + m.name,
			Hooks:       []intercept.Hook{{Events: []string{event}, Phase: ph}},
		}})
	}
	add(HookToolCall, "", intercept.Validation, "tools/call", intercept.Request)
	add(HookToolCall, "/rewrite", intercept.Mutation, "tools/call", intercept.Request)
	add(HookToolResult, "", intercept.Mutation, "tools/call", intercept.Response)
	add(HookResourceResult, "", intercept.Mutation, "resources/read", intercept.Response)
	add(HookPromptResult, "", intercept.Mutation, "prompts/get", intercept.Response)
	return out
}

type legacy struct {
	m    *Module
	hook Hook
	desc intercept.Descriptor
}

func (l *legacy) Describe() intercept.Descriptor { return l.desc }

func (l *legacy) Invoke(ctx context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
	var c intercept.Context
	if inv.Context != nil {
		c = *inv.Context
	}
	client := Client{}
	if c.Principal != nil {
		client.ID = c.Principal.ID
	}
	buf := getBuf()
	defer putBuf(buf)
	if l.hook == HookToolCall {
		return l.toolCall(ctx, buf, client, c.Server, inv.Payload)
	}
	var in []byte
	var check func([]byte) error
	switch l.hook {
	case HookToolResult:
		in, check = encodeToolResult((*buf)[:0], &ResultInput{Client: client, Server: c.Server, Tool: c.Subject}, inv.Payload), checkToolResult
	case HookResourceResult:
		in, check = encodeResourceResult((*buf)[:0], &ResourceInput{Client: client, Server: c.Server, URI: c.Subject}, inv.Payload), checkResourceResult
	default:
		in, check = encodePromptResult((*buf)[:0], &PromptInput{Client: client, Server: c.Server, Prompt: c.Subject}, inv.Payload), checkPromptResult
	}
	*buf = in
	out, err := l.m.call(ctx, l.hook, in)
	if err != nil {
		return nil, legacyFailure(inv.Name, err)
	}
	res, err := decodeResult(out, check)
	if err != nil {
		return nil, &intercept.FailError{Interceptor: inv.Name, Kind: intercept.ErrBadResult, Err: err}
	}
	if res == nil {
		return intercept.Keep(), nil
	}
	return intercept.Replace(res), nil
}

// toolCall runs the tool_call hook on a tools/call request payload
// ({"name", "arguments", ...}) and answers as the validator or the
// rewriting mutator.
func (l *legacy) toolCall(ctx context.Context, buf *[]byte, client Client, server string, payload json.RawMessage) (*intercept.Result, error) {
	var p map[string]json.RawMessage
	var tool string
	if err := json.Unmarshal(payload, &p); err != nil || json.Unmarshal(p["name"], &tool) != nil {
		return nil, &intercept.FailError{Interceptor: l.desc.Name, Kind: intercept.ErrFailed, Err: errors.New("tools/call payload without a tool name")}
	}
	in := encodeToolCall((*buf)[:0], client, server, tool, p["arguments"])
	*buf = in
	out, err := l.m.call(ctx, HookToolCall, in)
	if err != nil {
		return nil, legacyFailure(l.desc.Name, err)
	}
	d, err := decodeDecision(out)
	if err != nil {
		return nil, &intercept.FailError{Interceptor: l.desc.Name, Kind: intercept.ErrBadResult, Err: err}
	}
	if l.desc.Type == intercept.Mutation {
		if d.action != actionRewrite && d.action != actionRoute || len(d.arguments) == 0 {
			return intercept.Keep(), nil
		}
		p["arguments"] = d.arguments
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		return intercept.Replace(b), nil
	}
	if d.action == actionDeny {
		return intercept.Deny(d.reason), nil
	}
	res := intercept.Pass()
	if d.action == actionRoute || d.requireApproval {
		info := map[string]any{}
		if d.action == actionRoute {
			info["route"] = map[string]string{"server": d.server, "tool": d.tool}
		}
		if d.requireApproval {
			info["requireApproval"] = true
		}
		res.Info, _ = json.Marshal(info)
	}
	return res, nil
}

func legacyFailure(name string, err error) error {
	kind := intercept.ErrFailed
	switch {
	case errors.Is(err, ErrTimeout):
		kind = intercept.ErrTimeout
	case errors.Is(err, ErrBadOutput), errors.Is(err, ErrOutputTooLarge):
		kind = intercept.ErrBadResult
	}
	return &intercept.FailError{Interceptor: name, Kind: kind, Err: fmt.Errorf("%w", err)}
}

// EnforcesDeadline reports that a module call stops at its deadline on its
// own (intercept.DeadlineEnforcer).
func (l *legacy) EnforcesDeadline() bool { return true }
