package gateway

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/toolsearch"
)

// This file is the gateway's side of deferred tools (runtime/toolsearch):
// tools a tool rule marks {"visibility":"deferred"} are left out of a
// session's tools/list (view.go) and reached through tool_search, answered
// by the view's toolsearch.Set, and tool_invoke, which runs the named tool
// through the pipeline as a direct tools/call.

// Names of the gateway's own tools.
const (
	toolSearchName = toolsearch.SearchName
	toolInvokeName = toolsearch.InvokeName
)

// metaTools returns the gateway's own tools a session sees besides its
// catalogue, given the tools deferred out of its list: tool_search and
// tool_invoke when anything is deferred, else none. The items have no
// upstream (up is nil); toolCallAnswered answers them through local,
// before the pipeline.
func metaTools(deferred []*item) []*item {
	if len(deferred) == 0 {
		return nil
	}
	set := toolsearch.NewSet(deferredTools(deferred))
	searchDef, invokeDef := toolsearch.Defs(len(deferred))
	search := func(s *session, req *jsonrpc.Request) {
		args, _, _ := wire.Field(req.Params, "arguments")
		res, problem := set.Search(args)
		if problem != "" {
			res = toolError(problem)
		}
		s.reply(req.ID, res)
	}
	return []*item{
		{Name: toolSearchName, Exposed: toolSearchName, Raw: searchDef, Local: search},
		{Name: toolInvokeName, Exposed: toolInvokeName, Raw: invokeDef, Local: invokeTool},
	}
}

// deferredTools are a view's deferred tools as toolsearch.Tools.
type deferredTools []*item

func (d deferredTools) Len() int { return len(d) }
func (d deferredTools) At(i int) (string, json.RawMessage) {
	return d[i].Exposed, d[i].Raw
}

// invokeTool answers a tools/call of tool_invoke: it turns it into a
// tools/call of the named tool, with the same request id (so cancellation,
// progress and elicitation relate to the client's request) and the same
// _meta, and runs it through the pipeline.
func invokeTool(s *session, req *jsonrpc.Request) {
	name, problem := toolsearch.Invoked(req.Params)
	if problem != "" {
		s.reply(req.ID, toolError(problem))
		return
	}
	it := s.catalogue().Find(kindTools, name)
	if it == nil {
		s.reply(req.ID, toolError(fmt.Sprintf("edge-mcp: there is no tool named %q available to you; find tools with %s", name, toolSearchName)))
		return
	}
	if it.Local != nil {
		s.reply(req.ID, toolError(fmt.Sprintf("edge-mcp: %q is one of the gateway's own tools: call it directly", name)))
		return
	}
	params, targs, problem := toolsearch.Invocation(req.Params, name)
	if problem != "" {
		s.reply(req.ID, toolError(problem))
		return
	}
	call := &jsonrpc.Request{ID: req.ID, Method: "tools/call", Params: params}
	if rl := invokeRateLimited(s, it); rl != nil {
		tc := &toolCall{s: s, req: call, it: it, start: time.Now(), args: targs}
		tc.respond(nil, tc.rateLimited(rl))
		return
	}
	s.toolCall(call, it)
}

// invokeRateLimited applies the per-tool rate limits of a tool called
// through tool_invoke that the pipeline would skip: over streamable HTTP the
// limits are taken before the transport reads a request, and there the call
// was charged to tool_invoke (the client's own limit included), not to the
// tool it names. Other transports take every limit in the pipeline
// (stage_ratelimit.go).
func invokeRateLimited(s *session, it *item) *rateLimited {
	gd := s.g.guard.Load()
	if s.transport != transportStreamable || !gd.Limited() {
		return nil
	}
	return gd.AllowTool(s.id.Name, it.Up.name, it.Exposed)
}
