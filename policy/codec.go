package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/edge-mcp/edge-mcp/guest/abi"
	"github.com/edge-mcp/edge-mcp/policy/internal/jsonx"
)

// Client identifies the downstream client a hook runs for. It never carries
// credentials: ID is the authenticated principal (empty without auth) and
// Name the client's self-reported clientInfo name.
type Client struct {
	ID   string
	Name string
}

var emptyObject = json.RawMessage("{}")

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return emptyObject
	}
	return raw
}

func appendMember(dst []byte, first bool, key string) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"', ':')
}

func appendStringMember(dst []byte, first bool, key, val string) []byte {
	return jsonx.AppendString(appendMember(dst, first, key), val)
}

// appendClient writes "client":{...} (or nothing for an anonymous client)
// as the first member of an object.
func appendClient(dst []byte, c Client) ([]byte, bool) {
	if c.ID == "" && c.Name == "" {
		return dst, true
	}
	dst = append(dst, `"client":{`...)
	first := true
	if c.ID != "" {
		dst = appendStringMember(dst, first, "id", c.ID)
		first = false
	}
	if c.Name != "" {
		dst = appendStringMember(dst, first, "name", c.Name)
	}
	return append(dst, '}'), false
}

func encodeToolCall(dst []byte, c Client, server, tool string, args json.RawMessage) []byte {
	dst = append(dst, '{')
	dst, first := appendClient(dst, c)
	dst = appendStringMember(dst, first, "server", server)
	dst = appendStringMember(dst, false, "tool", tool)
	dst = appendMember(dst, false, "arguments")
	dst = append(dst, orEmptyObject(args)...)
	return append(dst, '}')
}

func encodeToolResult(dst []byte, in *ResultInput, result json.RawMessage) []byte {
	return encodeNamedResult(dst, in.Client, in.Server, "tool", in.Tool, in.Arguments, result)
}

func encodeResourceResult(dst []byte, in *ResourceInput, result json.RawMessage) []byte {
	dst = append(dst, '{')
	dst, first := appendClient(dst, in.Client)
	dst = appendStringMember(dst, first, "server", in.Server)
	dst = appendStringMember(dst, false, "uri", in.URI)
	dst = appendMember(dst, false, "result")
	dst = append(dst, result...)
	return append(dst, '}')
}

func encodePromptResult(dst []byte, in *PromptInput, result json.RawMessage) []byte {
	return encodeNamedResult(dst, in.Client, in.Server, "prompt", in.Prompt, in.Arguments, result)
}

// encodeNamedResult is the input of the tool_result and prompt_result
// hooks: who, which server, the tool or prompt (under key), the call's
// arguments when known, and the result last (the ABI puts the bulky member
// last).
func encodeNamedResult(dst []byte, c Client, server, key, name string, args, result json.RawMessage) []byte {
	dst = append(dst, '{')
	dst, first := appendClient(dst, c)
	dst = appendStringMember(dst, first, "server", server)
	dst = appendStringMember(dst, false, key, name)
	if len(args) > 0 {
		dst = appendMember(dst, false, "arguments")
		dst = append(dst, args...)
	}
	dst = appendMember(dst, false, "result")
	dst = append(dst, result...)
	return append(dst, '}')
}

func encodeToolsList(dst []byte, c Client, tools []ToolEntry, idx []int) []byte {
	dst = append(dst, '{')
	dst, first := appendClient(dst, c)
	dst = appendMember(dst, first, "tools")
	dst = append(dst, '[')
	for n, i := range idx {
		if n > 0 {
			dst = append(dst, ',')
		}
		t := &tools[i]
		dst = append(dst, '{')
		dst = appendStringMember(dst, true, "server", t.Server)
		dst = appendStringMember(dst, false, "name", t.Name)
		dst = appendMember(dst, false, "tool")
		dst = append(dst, orEmptyObject(t.Tool)...)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

func encodeEvent(dst []byte, ev *Event) []byte {
	dst = append(dst, '{')
	dst = appendStringMember(dst, true, "event", ev.Kind)
	if ev.Client.ID != "" || ev.Client.Name != "" {
		dst = append(dst, ',')
		dst, _ = appendClient(dst, ev.Client)
	}
	dst = appendStringMember(dst, false, "server", ev.Server)
	if ev.Tool != "" {
		dst = appendStringMember(dst, false, "tool", ev.Tool)
	}
	if ev.Kind == EventToolExecuted {
		dst = appendMember(dst, false, "duration_ms")
		dst = strconv.AppendFloat(dst, float64(ev.Duration)/float64(time.Millisecond), 'f', 3, 64)
		dst = appendMember(dst, false, "is_error")
		dst = strconv.AppendBool(dst, ev.IsError)
	}
	if ev.Error != "" {
		dst = appendStringMember(dst, false, "error", ev.Error)
	}
	t := ev.Time
	if t.IsZero() {
		t = time.Now()
	}
	dst = appendMember(dst, false, "time_ms")
	dst = strconv.AppendInt(dst, t.UnixMilli(), 10)
	return append(dst, '}')
}

// validateOutput is the generic check every non-empty guest output passes
// before any hook-specific decoding: valid UTF-8, one JSON object, and not
// an {"error": ...} report. kind is nil, ErrBadOutput or ErrGuest (the
// guest's own message is then in detail).
func validateOutput(out []byte) (kind, detail error) {
	if !utf8.Valid(out) || !jsonx.Valid(out) {
		return ErrBadOutput, fmt.Errorf("not valid JSON: %.120q", out)
	}
	if jsonx.Kind(out) != '{' {
		return ErrBadOutput, fmt.Errorf("not a JSON object: %.120q", out)
	}
	if msg, ok := guestError(out); ok {
		return ErrGuest, errors.New(msg)
	}
	return nil, nil
}

// badOutput formats a shape error found while decoding a guest output.
func badOutput(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

type action uint8

const (
	actionAllow action = iota
	actionDeny
	actionRewrite
	actionRoute
)

// callOutput is a decoded tool_call output.
type callOutput struct {
	action          action
	reason          string
	server, tool    string
	arguments       json.RawMessage
	requireApproval bool
}

// decodeDecision decodes a validated tool_call output; empty output allows.
func decodeDecision(out []byte) (callOutput, error) {
	var o callOutput
	if len(out) == 0 {
		return o, nil
	}
	var act string
	haveAction := false
	err := jsonx.Members(out, func(k, v []byte) error {
		var err error
		switch {
		case jsonx.KeyIs(k, "action"):
			haveAction = true
			act, err = stringField("action", v)
		case jsonx.KeyIs(k, "reason"):
			o.reason, err = stringField("reason", v)
		case jsonx.KeyIs(k, "server"):
			o.server, err = stringField("server", v)
		case jsonx.KeyIs(k, "tool"):
			o.tool, err = stringField("tool", v)
		case jsonx.KeyIs(k, "arguments"):
			if jsonx.Kind(v) != '{' {
				return badOutput("arguments must be a JSON object, got %.60s", v)
			}
			o.arguments = json.RawMessage(v)
		case jsonx.KeyIs(k, "require_approval"):
			switch string(v) {
			case "true":
				o.requireApproval = true
			case "false":
			default:
				return badOutput("require_approval must be a boolean")
			}
		}
		return err
	})
	if err != nil {
		return o, asBadOutput(err)
	}
	if !haveAction {
		return o, badOutput(`tool_call output has no "action"`)
	}
	switch act {
	case abi.ActionAllow:
		o.action = actionAllow
		o.arguments = nil
	case abi.ActionDeny:
		o.action = actionDeny
		if o.reason == "" {
			o.reason = "denied by policy"
		}
	case abi.ActionRewrite:
		o.action = actionRewrite
		if o.arguments == nil {
			return o, badOutput(`"rewrite" needs an "arguments" object`)
		}
	case abi.ActionRoute:
		o.action = actionRoute
		if o.server == "" {
			return o, badOutput(`"route" needs a "server"`)
		}
		if o.tool != "" && !validToolName(o.tool) {
			return o, badOutput("route tool name %q is not a valid tool name", o.tool)
		}
	default:
		return o, badOutput("unknown action %q (want allow, deny, rewrite or route)", act)
	}
	return o, nil
}

func asBadOutput(err error) error {
	if errors.Is(err, jsonx.ErrMalformed) {
		return fmt.Errorf("malformed output: %w", err)
	}
	return err
}

func stringField(name string, v []byte) (string, error) {
	if jsonx.Kind(v) != '"' {
		return "", badOutput("%s must be a string", name)
	}
	s, err := jsonx.Unquote(v)
	if err != nil {
		return "", badOutput("%s: %v", name, err)
	}
	return s, nil
}

// decodeResult decodes a validated {"result": {...}} output and checks the
// result's shape; nil means unchanged.
func decodeResult(out []byte, check func([]byte) error) (json.RawMessage, error) {
	if len(out) == 0 {
		return nil, nil
	}
	var res json.RawMessage
	err := jsonx.Members(out, func(k, v []byte) error {
		if jsonx.KeyIs(k, "result") {
			res = json.RawMessage(v)
		}
		return nil
	})
	if err != nil {
		return nil, asBadOutput(err)
	}
	if res == nil {
		return nil, badOutput(`output has no "result"`)
	}
	if err := check(res); err != nil {
		return nil, err
	}
	return res, nil
}

// checkToolResult checks the shape of a CallToolResult.
func checkToolResult(r []byte) error {
	if jsonx.Kind(r) != '{' {
		return badOutput("result must be an object")
	}
	err := jsonx.Members(r, func(k, v []byte) error {
		switch {
		case jsonx.KeyIs(k, "content"):
			return checkArrayOf(v, "content", "type")
		case jsonx.KeyIs(k, "structuredContent"):
			if jsonx.Kind(v) != '{' {
				return badOutput("structuredContent must be an object")
			}
		case jsonx.KeyIs(k, "isError"):
			if s := string(v); s != "true" && s != "false" {
				return badOutput("isError must be a boolean")
			}
		case jsonx.KeyIs(k, "_meta"):
			if jsonx.Kind(v) != '{' {
				return badOutput("_meta must be an object")
			}
		}
		return nil
	})
	return asBadOutputIf(err)
}

// checkResourceResult checks the shape of a ReadResourceResult.
func checkResourceResult(r []byte) error {
	if jsonx.Kind(r) != '{' {
		return badOutput("result must be an object")
	}
	err := jsonx.Members(r, func(k, v []byte) error {
		if jsonx.KeyIs(k, "contents") {
			return checkArrayOf(v, "contents", "uri")
		}
		return nil
	})
	return asBadOutputIf(err)
}

// checkPromptResult checks the shape of a GetPromptResult.
func checkPromptResult(r []byte) error {
	if jsonx.Kind(r) != '{' {
		return badOutput("result must be an object")
	}
	err := jsonx.Members(r, func(k, v []byte) error {
		if !jsonx.KeyIs(k, "messages") {
			return nil
		}
		if err := checkArrayOf(v, "messages", "role"); err != nil {
			return err
		}
		return jsonx.Elements(v, func(m []byte) error {
			content := false
			err := jsonx.Members(m, func(k, v []byte) error {
				if jsonx.KeyIs(k, "content") {
					content = true
					if jsonx.Kind(v) != '{' {
						return badOutput("message content must be an object")
					}
				}
				return nil
			})
			if err == nil && !content {
				return badOutput("message without content")
			}
			return err
		})
	})
	return asBadOutputIf(err)
}

func asBadOutputIf(err error) error {
	if err == nil {
		return nil
	}
	return asBadOutput(err)
}

// checkArrayOf checks that v is an array of objects that each have a string
// member named key.
func checkArrayOf(v []byte, name, key string) error {
	if jsonx.Kind(v) != '[' {
		return badOutput("%s must be an array", name)
	}
	return jsonx.Elements(v, func(e []byte) error {
		if jsonx.Kind(e) != '{' {
			return badOutput("%s items must be objects", name)
		}
		found := false
		err := jsonx.Members(e, func(k, v []byte) error {
			if jsonx.KeyIs(k, key) {
				found = jsonx.Kind(v) == '"'
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !found {
			return badOutput("%s item without a string %q", name, key)
		}
		return nil
	})
}

// toolPatch is one entry of a tools_list output.
type toolPatch struct {
	server, name string
	hide         bool
	rename       string
	description  *string
	title        *string
	annotations  json.RawMessage
}

// decodeToolsList decodes a validated tools_list output.
func decodeToolsList(out []byte) ([]toolPatch, error) {
	if len(out) == 0 {
		return nil, nil
	}
	var patches []toolPatch
	err := jsonx.Members(out, func(k, v []byte) error {
		if !jsonx.KeyIs(k, "tools") {
			return nil
		}
		if jsonx.Kind(v) != '[' {
			return badOutput("tools must be an array")
		}
		return jsonx.Elements(v, func(e []byte) error {
			if jsonx.Kind(e) != '{' {
				return badOutput("tools items must be objects")
			}
			var p toolPatch
			err := jsonx.Members(e, func(k, v []byte) error {
				var err error
				switch {
				case jsonx.KeyIs(k, "server"):
					p.server, err = stringField("server", v)
				case jsonx.KeyIs(k, "name"):
					p.name, err = stringField("name", v)
				case jsonx.KeyIs(k, "hide"):
					p.hide = string(v) == "true"
					if !p.hide && string(v) != "false" {
						err = badOutput("hide must be a boolean")
					}
				case jsonx.KeyIs(k, "rename"):
					p.rename, err = stringField("rename", v)
					if err == nil && !validToolName(p.rename) {
						err = badOutput("rename %q is not a valid tool name (1-128 of A-Z a-z 0-9 _ . -)", p.rename)
					}
				case jsonx.KeyIs(k, "description"):
					var s string
					s, err = stringField("description", v)
					p.description = &s
				case jsonx.KeyIs(k, "title"):
					var s string
					s, err = stringField("title", v)
					p.title = &s
				case jsonx.KeyIs(k, "annotations"):
					if jsonx.Kind(v) != '{' {
						err = badOutput("annotations must be an object")
					}
					p.annotations = json.RawMessage(v)
				}
				return err
			})
			if err != nil {
				return err
			}
			if p.name == "" {
				return badOutput("tools item without a name")
			}
			patches = append(patches, p)
			return nil
		})
	})
	if err != nil {
		return nil, asBadOutput(err)
	}
	return patches, nil
}

// validToolName reports whether s is 1-128 characters of [A-Za-z0-9_.-].
func validToolName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// applyPatch rewrites a tool definition: name, description and title are
// replaced, annotations merged key by key. Other members keep their bytes
// and order; new members go at the end.
func applyPatch(tool json.RawMessage, p *toolPatch) (json.RawMessage, error) {
	tool = orEmptyObject(tool)
	out := make([]byte, 0, len(tool)+64)
	out = append(out, '{')
	first := true
	seenName, seenDesc, seenTitle, seenAnn := false, false, false, false
	err := jsonx.Members(tool, func(k, v []byte) error {
		var repl []byte
		switch {
		case jsonx.KeyIs(k, "name"):
			seenName = true
			if p.rename != "" {
				repl = jsonx.AppendString(nil, p.rename)
			}
		case jsonx.KeyIs(k, "description"):
			seenDesc = true
			if p.description != nil {
				repl = jsonx.AppendString(nil, *p.description)
			}
		case jsonx.KeyIs(k, "title"):
			seenTitle = true
			if p.title != nil {
				repl = jsonx.AppendString(nil, *p.title)
			}
		case jsonx.KeyIs(k, "annotations"):
			seenAnn = true
			if p.annotations != nil {
				var err error
				if repl, err = mergeObjects(v, p.annotations); err != nil {
					return err
				}
			}
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, k...)
		out = append(out, ':')
		if repl != nil {
			out = append(out, repl...)
		} else {
			out = append(out, v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("patching tool definition: %w", err)
	}
	if !seenName && p.rename != "" {
		out = appendStringMember(out, first, "name", p.rename)
		first = false
	}
	if !seenDesc && p.description != nil {
		out = appendStringMember(out, first, "description", *p.description)
		first = false
	}
	if !seenTitle && p.title != nil {
		out = appendStringMember(out, first, "title", *p.title)
		first = false
	}
	if !seenAnn && p.annotations != nil {
		out = appendMember(out, first, "annotations")
		merged, err := mergeObjects(nil, p.annotations)
		if err != nil {
			return nil, err
		}
		out = append(out, merged...)
	}
	return append(out, '}'), nil
}

// mergeObjects returns base with every member of over set (last one wins);
// a nil or non-object base counts as {}.
func mergeObjects(base, over []byte) ([]byte, error) {
	type member struct{ k, v []byte }
	var ms []member
	index := map[string]int{}
	add := func(k, v []byte) error {
		key, err := jsonx.Unquote(k)
		if err != nil {
			return err
		}
		if i, ok := index[key]; ok {
			ms[i].v = v
			return nil
		}
		index[key] = len(ms)
		ms = append(ms, member{k, v})
		return nil
	}
	if jsonx.Kind(base) == '{' {
		if err := jsonx.Members(base, add); err != nil {
			return nil, err
		}
	}
	if err := jsonx.Members(over, add); err != nil {
		return nil, err
	}
	out := []byte{'{'}
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m.k...)
		out = append(out, ':')
		out = append(out, m.v...)
	}
	return append(out, '}'), nil
}

// toolNameOf returns the "name" member of a tool definition.
func toolNameOf(tool json.RawMessage) string {
	var name string
	_ = jsonx.Members(tool, func(k, v []byte) error {
		if jsonx.KeyIs(k, "name") {
			name, _ = jsonx.Unquote(v)
			return errStop
		}
		return nil
	})
	return name
}
