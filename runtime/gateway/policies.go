package gateway

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy"
)

// This file is the policy stage of the request chain: tools, calls and
// results pass through the Wasm modules attached to them. A tool no policy
// matches never reaches the policy package beyond one memoised lookup.

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
