package gateway

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// This file is the policy stage of the request chain: tools, calls and
// results pass through the Wasm modules attached to them. A tool no policy
// matches never reaches the policy package beyond one memoised lookup.

// toolView returns the tools list the session sees: the catalogue's, or,
// when a module filters the catalogue, the session's own view of it (built
// once per catalogue snapshot and chain).
func (s *session) toolView(cat *catalogue) *catalogue {
	pg := s.g.pol.current()
	if !pg.hooks().Has(policy.HookToolsList) {
		return cat
	}
	s.mu.Lock()
	v := s.view
	s.mu.Unlock()
	if v != nil && v.gen == cat.gen && v.pol == pg {
		return v.cat
	}
	if pg = s.g.pol.acquire(); pg == nil {
		return cat
	}
	defer s.g.pol.release(pg)
	ch := pg.chain
	entries := make([]policy.ToolEntry, len(cat.lists[kindTools]))
	for i, it := range cat.lists[kindTools] {
		entries[i] = policy.ToolEntry{Server: it.up.name, Name: it.name, Tool: it.raw}
	}
	filtered, err := ch.ToolsList(s.ctx, s.client, entries)
	if err != nil {
		return cat // the session is ending
	}
	type key struct{ server, name string }
	byUpstream := make(map[key]*item, len(cat.lists[kindTools]))
	for _, it := range cat.lists[kindTools] {
		byUpstream[key{it.up.name, it.name}] = it
	}
	vc := &catalogue{gen: cat.gen}
	vc.index[kindTools] = make(map[string]*item, len(filtered))
	for _, e := range filtered {
		orig := byUpstream[key{e.Server, e.Name}]
		if orig == nil {
			continue
		}
		it := &item{up: orig.up, name: orig.name, exposed: orig.exposed, raw: e.Tool}
		if e.Exposed != "" {
			it.exposed = e.Exposed
		}
		if _, dup := vc.index[kindTools][it.exposed]; dup {
			continue
		}
		vc.index[kindTools][it.exposed] = it
		vc.lists[kindTools] = append(vc.lists[kindTools], it)
	}
	vc.pages[kindTools] = encodePages(kindTools, vc.lists[kindTools], s.g.opts.PageSize)
	s.mu.Lock()
	s.view = &sessionView{gen: cat.gen, pol: pg, cat: vc}
	s.mu.Unlock()
	return vc
}

// sessionView caches a session's policy-filtered tools list.
type sessionView struct {
	gen uint64
	pol *policyGen
	cat *catalogue
}

// callTool runs the tool_call policies of a call, then forwards it as they
// decided: allowed (arguments possibly rewritten), routed to another server,
// or denied with the module's reason. It owns pg's reference: the call's
// result is filtered by the same generation, which is released when the
// call ends.
func (s *session) callTool(req *jsonrpc.Request, it *item, params json.RawMessage, pg *policyGen) {
	ch := pg.chain
	done := func() { s.g.pol.release(pg) }
	args, _, _ := wire.Field(params, "arguments")
	target, tool := it.up, it.name
	if ch.Hooks().Has(policy.HookToolCall) {
		d, err := ch.ToolCall(s.ctx, policy.CallInput{Client: s.client, Server: it.up.name, Tool: it.name, Arguments: args})
		if err != nil {
			done()
			s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: policy check ended: %v", err)
			return
		}
		switch d.Action {
		case policy.Deny:
			done()
			s.reply(req.ID, toolError(fmt.Sprintf("edge-mcp: policy %q denied this call: %s", d.Module, d.Reason)))
			return
		case policy.Route:
			target = s.g.upstreams().byName[d.Server]
			if target == nil {
				done()
				s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: policy %q routed the call to unknown server %q", d.Module, d.Server)
				return
			}
			if d.Tool != "" {
				tool = d.Tool
			}
		}
		if d.Arguments != nil {
			args = d.Arguments
			var err error
			if params, err = wire.SetField(params, "arguments", d.Arguments); err != nil {
				done()
				s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: applying policy %q: %v", d.Module, err)
				return
			}
		}
	}
	if tool != it.name || target != it.up || it.exposed != it.name {
		var err error
		if params, err = wire.SetField(params, "name", wire.AppendString(nil, tool)); err != nil {
			done()
			s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: %v", req.Method, err)
			return
		}
	}
	info := forwardInfo{tool: it.exposed, upName: tool, args: args, kind: kindTools}
	if resultPolicy(ch, kindTools, target.name, tool) {
		info.pol = pg // released when the call ends
	} else {
		done()
	}
	s.forward(req, target, params, info)
}

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
// response to send downstream.
func (s *session) filterResult(c *call, resp *jsonrpc.Response) *jsonrpc.Response {
	var (
		res json.RawMessage
		err error
	)
	ch := c.pol.chain
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
			Message: fmt.Sprintf("edge-mcp: policy %q withheld this result: %s", denied.Module, denied.Reason)}}
	case err != nil:
		return &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: policy check ended: " + err.Error()}}
	}
	return &jsonrpc.Response{ID: resp.ID, Result: res}
}

// observe hands a gateway event to the modules with an event hook, off the
// request path.
func (g *Gateway) observe(ev Event) {
	if !g.pol.hooks().Has(policy.HookEvent) {
		return
	}
	pev := policy.Event{Kind: ev.Type, Server: ev.Server, Tool: ev.Tool, Duration: ev.Duration,
		IsError: !ev.Success && ev.Type == EventToolExecuted, Error: ev.ErrorMessage, Time: ev.Time}
	if ev.Type == EventServerDisconnected {
		pev.Error = ev.Reason
	}
	pg := g.pol.acquire()
	if pg == nil {
		return
	}
	go func() {
		defer g.pol.release(pg)
		pg.chain.Event(g.ctx, pev) //nolint:errcheck // failures are logged and counted by the module
	}()
}
