package toolsearch

import (
	"encoding/json"
	"fmt"

	"github.com/edge-mcp/edge-mcp/internal/openai"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// Invoked is the name of the tool a tools/call of tool_invoke (params)
// names; problem, when it names none, is the answer for the client.
func Invoked(params json.RawMessage) (name, problem string) {
	args, _, _ := wire.Field(params, "arguments")
	name, _ = wire.String(args, "name")
	if name == "" {
		return "", `edge-mcp: tool_invoke needs "name": the name of the tool to call (find it with tool_search)`
	}
	return name, ""
}

// Invocation is the params of a tools/call of the tool name that a
// tools/call of tool_invoke (params) asks for: its arguments, and the
// same _meta (so progress and the rest relate to the client's request);
// args are the tool's arguments (nil: none). problem, when the arguments
// are not an object, is the answer for the client.
func Invocation(params json.RawMessage, name string) (call, args json.RawMessage, problem string) {
	outer, _, _ := wire.Field(params, "arguments")
	raw, _, _ := wire.Field(outer, "arguments")
	args, err := openai.ObjectArguments(raw)
	if err != nil {
		return nil, nil, fmt.Sprintf("edge-mcp: tool_invoke: the arguments of %q %v", name, err)
	}
	call = append(wire.AppendString([]byte(`{"name":`), name), '}')
	if args != nil {
		call, _ = wire.SetField(call, "arguments", args)
	}
	if meta, ok, _ := wire.Field(params, "_meta"); ok {
		call, _ = wire.SetField(call, "_meta", meta)
	}
	return call, args, ""
}
