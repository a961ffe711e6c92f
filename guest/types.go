package guest

import (
	"errors"
	"strconv"

	"github.com/edge-mcp/edge-mcp/guest/abi"
	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// Client identifies the downstream client on whose behalf a hook runs.
// ID is the authenticated principal (empty when the gateway runs without
// authentication); Name is the client's self-reported clientInfo name.
type Client struct {
	ID   string
	Name string
}

func (c *Client) parse(v []byte) error {
	return envelope(v, "", func(k, val []byte) (err error) {
		switch string(k) {
		case "id":
			c.ID, err = clientID.get(val)
		case "name":
			c.Name, err = clientName.get(val)
		}
		return err
	})
}

// strCache keeps the last string decoded for one envelope field. Server,
// tool and client names repeat from call to call, and a guest allocation
// costs more than comparing a few bytes.
type strCache struct{ s string }

var clientID, clientName, serverName, toolName, uriName, promptName strCache

// get decodes the JSON string literal raw, reusing the cached string when
// the bytes are the same.
func (c *strCache) get(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", errors.New("expected a string")
	}
	inner := raw[1 : len(raw)-1]
	if len(inner) == len(c.s) && string(inner) == c.s {
		return c.s, nil
	}
	s, err := jsonlite.Unquote(raw)
	if err == nil {
		c.s = s
	}
	return s, err
}

// ToolCall is the input of the tool_call hook.
type ToolCall struct {
	Client Client
	// Server and Tool name the upstream server and the tool's upstream name
	// (renames done by tools_list filters are already undone).
	Server string
	Tool   string
	// Arguments is the raw JSON arguments object ({} when the client sent
	// none). It aliases the SDK's input buffer: valid only during the call.
	Arguments []byte
}

// Argument returns the raw JSON value of one argument.
func (c *ToolCall) Argument(name string) ([]byte, bool) {
	return jsonlite.Lookup(c.Arguments, name)
}

// StringArgument returns the value of a string argument; ok is false when
// the argument is missing or not a string.
func (c *ToolCall) StringArgument(name string) (string, bool) {
	raw, ok := jsonlite.Lookup(c.Arguments, name)
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	s, err := jsonlite.Unquote(raw)
	return s, err == nil
}

func (c *ToolCall) parse(in []byte) error {
	err := envelope(in, "arguments", func(k, v []byte) (err error) {
		switch string(k) {
		case "client":
			err = c.Client.parse(v)
		case "server":
			c.Server, err = serverName.get(v)
		case "tool":
			c.Tool, err = toolName.get(v)
		case "arguments":
			c.Arguments = v
		}
		return err
	})
	if len(c.Arguments) == 0 {
		c.Arguments = []byte("{}")
	}
	return err
}

// envelope calls fn for each member of a hook input object. The member
// named tail (the bulky one: arguments or result) is, by ABI guarantee, the
// last one, so its value is taken as the rest of the object without being
// scanned: a guest pays nothing for the bytes it does not look at. Keys are
// compared raw: the host writes them without escapes.
func envelope(in []byte, tail string, fn func(key, val []byte) error) error {
	body, i, err := objectBody(in)
	if err != nil {
		return err
	}
	for i < len(body) {
		next, ke, _, err := jsonscan.SkipKey(body, i)
		if err != nil {
			return err
		}
		key := body[i+1 : ke-1]
		if next >= len(body) {
			return errors.New("missing member value")
		}
		if tail != "" && string(key) == tail {
			return fn(key, trimRight(body[next:]))
		}
		ve, err := valueEnd(body, next)
		if err != nil {
			return err
		}
		if err := fn(key, body[next:ve]); err != nil {
			return err
		}
		if i = jsonscan.SkipSpace(body, ve); i < len(body) {
			if body[i] != ',' {
				return errors.New("expected ',' between members")
			}
			i = jsonscan.SkipSpace(body, i+1)
		}
	}
	return nil
}

// objectBody returns in without its closing brace and the index of the
// first member, after the opening brace and white space.
func objectBody(in []byte) ([]byte, int, error) {
	in = trimRight(in)
	i := jsonscan.SkipSpace(in, 0)
	if i >= len(in) || in[i] != '{' || in[len(in)-1] != '}' {
		return nil, 0, errors.New("input is not a JSON object")
	}
	return in[:len(in)-1], jsonscan.SkipSpace(in, i+1), nil
}

// valueEnd returns the index just past the value at b[i].
func valueEnd(b []byte, i int) (int, error) {
	if b[i] == '"' {
		e, _, err := jsonscan.SkipString(b, i)
		return e, err
	}
	return jsonscan.SkipValue(b, i)
}

// trimRight returns b without trailing JSON white space.
func trimRight(b []byte) []byte {
	end := len(b)
	for end > 0 && (b[end-1] == ' ' || b[end-1] == '\n' || b[end-1] == '\r' || b[end-1] == '\t') {
		end--
	}
	return b[:end]
}

// Decision is a tool_call handler's answer. Build one with Allow, Deny,
// Rewrite or Route.
type Decision struct {
	action    string
	reason    string
	server    string
	tool      string
	arguments []byte
}

// Allow lets the call through unchanged.
func Allow() Decision { return Decision{} }

// Deny refuses the call; reason is shown to the client.
func Deny(reason string) Decision { return Decision{action: abi.ActionDeny, reason: reason} }

// Rewrite lets the call through with new arguments (a JSON object).
func Rewrite(arguments []byte) Decision {
	return Decision{action: abi.ActionRewrite, arguments: arguments}
}

// Route sends the call to another upstream server instead.
func Route(server string) Decision { return Decision{action: abi.ActionRoute, server: server} }

// WithTool makes a routed call use another tool name on the target server.
func (d Decision) WithTool(tool string) Decision {
	d.tool = tool
	return d
}

// WithArguments makes a routed call carry new arguments (a JSON object).
func (d Decision) WithArguments(arguments []byte) Decision {
	d.arguments = arguments
	return d
}

func (d *Decision) appendJSON(dst []byte) []byte {
	switch d.action {
	case "":
		return dst // empty output means allow
	case abi.ActionDeny:
		dst = append(dst, `{"action":"`+abi.ActionDeny+`","reason":`...)
		dst = jsonlite.AppendString(dst, d.reason)
		return append(dst, '}')
	case abi.ActionRewrite:
		dst = append(dst, `{"action":"`+abi.ActionRewrite+`","arguments":`...)
		dst = append(dst, d.arguments...)
		return append(dst, '}')
	default:
		dst = append(dst, `{"action":"`+abi.ActionRoute+`","server":`...)
		dst = jsonlite.AppendString(dst, d.server)
		if d.tool != "" {
			dst = append(dst, `,"tool":`...)
			dst = jsonlite.AppendString(dst, d.tool)
		}
		if len(d.arguments) > 0 {
			dst = append(dst, `,"arguments":`...)
			dst = append(dst, d.arguments...)
		}
		return append(dst, '}')
	}
}

// ToolResult is the input of the tool_result hook.
type ToolResult struct {
	Client    Client
	Server    string
	Tool      string
	Arguments []byte // raw arguments of the call; may be empty
	// Result is the raw CallToolResult object ({"content":[...],
	// "structuredContent":{...},"isError":false}).
	Result []byte

	replaced  bool
	newResult []byte
}

// Set replaces the result. It must be a JSON object; the host checks its
// shape (content array, structuredContent object, isError boolean).
func (r *ToolResult) Set(result []byte) { r.replaced, r.newResult = true, result }

func (r *ToolResult) replacement() (bool, []byte) { return r.replaced, r.newResult }

func (r *ToolResult) parse(in []byte) error {
	return parseResult(in, &r.Client, &r.Result, func(k, v []byte) (err error) {
		switch string(k) {
		case "server":
			r.Server, err = serverName.get(v)
		case "tool":
			r.Tool, err = toolName.get(v)
		case "arguments":
			r.Arguments = v
		}
		return err
	})
}

// ResourceResult is the input of the resource_result hook.
type ResourceResult struct {
	Client Client
	Server string
	URI    string
	// Result is the raw ReadResourceResult object ({"contents":[...]}).
	Result []byte

	replaced  bool
	newResult []byte
}

// Set replaces the result (a JSON object with a "contents" array).
func (r *ResourceResult) Set(result []byte) { r.replaced, r.newResult = true, result }

func (r *ResourceResult) replacement() (bool, []byte) { return r.replaced, r.newResult }

func (r *ResourceResult) parse(in []byte) error {
	return parseResult(in, &r.Client, &r.Result, func(k, v []byte) (err error) {
		switch string(k) {
		case "server":
			r.Server, err = serverName.get(v)
		case "uri":
			r.URI, err = uriName.get(v)
		}
		return err
	})
}

// PromptResult is the input of the prompt_result hook.
type PromptResult struct {
	Client    Client
	Server    string
	Prompt    string
	Arguments []byte // raw arguments of the prompts/get request; may be empty
	// Result is the raw GetPromptResult object ({"messages":[...]}).
	Result []byte

	replaced  bool
	newResult []byte
}

// Set replaces the result (a JSON object with a "messages" array).
func (r *PromptResult) Set(result []byte) { r.replaced, r.newResult = true, result }

func (r *PromptResult) replacement() (bool, []byte) { return r.replaced, r.newResult }

func (r *PromptResult) parse(in []byte) error {
	return parseResult(in, &r.Client, &r.Result, func(k, v []byte) (err error) {
		switch string(k) {
		case "server":
			r.Server, err = serverName.get(v)
		case "prompt":
			r.Prompt, err = promptName.get(v)
		case "arguments":
			r.Arguments = v
		}
		return err
	})
}

func parseResult(in []byte, client *Client, result *[]byte, other func(k, v []byte) error) error {
	err := envelope(in, "result", func(k, v []byte) error {
		switch string(k) {
		case "client":
			return client.parse(v)
		case "result":
			*result = v
			return nil
		}
		return other(k, v)
	})
	if err != nil {
		return err
	}
	if len(*result) == 0 {
		return errors.New("missing result")
	}
	return nil
}

// Event is the input of the event hook.
type Event struct {
	// Kind is "server_connected", "server_disconnected" or "tool_executed".
	Kind   string
	Client Client // set for tool_executed
	Server string
	Tool   string // set for tool_executed
	// DurationMS is the upstream call time of a tool_executed event.
	DurationMS float64
	IsError    bool
	Error      string // a failure message, when there is one
	// TimeMS is the event time in Unix milliseconds, as seen by the host.
	TimeMS int64
	// Raw is the whole event object, for fields this SDK version does not
	// decode.
	Raw []byte
}

func (e *Event) parse(in []byte) error {
	e.Raw = in
	return envelope(in, "", func(k, v []byte) (err error) {
		switch string(k) {
		case "event":
			e.Kind, err = jsonlite.Unquote(v)
		case "client":
			err = e.Client.parse(v)
		case "server":
			e.Server, err = serverName.get(v)
		case "tool":
			e.Tool, err = toolName.get(v)
		case "error":
			e.Error, err = jsonlite.Unquote(v)
		case "is_error":
			e.IsError = string(v) == "true"
		case "duration_ms":
			e.DurationMS, err = strconv.ParseFloat(string(v), 64)
		case "time_ms":
			e.TimeMS, err = strconv.ParseInt(string(v), 10, 64)
		}
		return err
	})
}
