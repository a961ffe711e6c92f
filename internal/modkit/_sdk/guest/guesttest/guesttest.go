// Package guesttest runs the handlers a Go policy module registers with
// package guest natively, under go test, the way the gateway calls them
// inside the module (like proxy-wasm-go-sdk's proxytest): one JSON input
// per hook, encoded as the host encodes it (compact, members in the order
// of policy/ABI.md, the bulky member last), one JSON output.
//
// A module's handlers are registered by its init functions, so a test in
// the module's package sees them:
//
//	func TestDeletesDenied(t *testing.T) {
//		out, err := guesttest.Call("tool_call", `{"server":"gh","tool":"delete_repo","arguments":{}}`)
//		if err != nil || out.Action != "deny" { ... }
//	}
//
// RunVectors runs a module's vectors.json natively, before it is ever
// compiled to WebAssembly; `edge-mcp policy test --vectors` runs the same
// file against the built module.
package guesttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edge-mcp/edge-mcp/guest"
)

// Output is a hook's answer, decoded.
type Output struct {
	// Raw is the output as the module wrote it; nil when there is none
	// (allow, or the result unchanged).
	Raw json.RawMessage
	// Action is the tool_call action ("allow" when there is no output),
	// Reason the deny reason, Server and Tool the route target, Arguments
	// the rewritten or routed arguments.
	Action, Reason, Server, Tool string
	Arguments                    json.RawMessage
	// Result is the replacement result of a *_result hook.
	Result json.RawMessage
	// Tools are the tools_list edits.
	Tools []Edit
	// Error is the message of an {"error":...} output.
	Error string
}

// Edit is one tools_list edit.
type Edit struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Hide        bool            `json:"hide,omitempty"`
	Rename      string          `json:"rename,omitempty"`
	Description *string         `json:"description,omitempty"`
	Title       *string         `json:"title,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// members lists, per hook, the members of its input in ABI order.
var members = map[string][]string{
	"tools_list":      {"client", "tools"},
	"tool_call":       {"client", "server", "tool", "arguments"},
	"tool_result":     {"client", "server", "tool", "arguments", "result"},
	"resource_result": {"client", "server", "uri", "result"},
	"prompt_result":   {"client", "server", "prompt", "arguments", "result"},
	"event":           {"event", "client", "server", "tool", "duration_ms", "is_error", "error", "time_ms"},
}

// Encode returns a hook input the way the host writes it: compact, members
// in ABI order (unknown members are an error), tool_call arguments {} when
// absent.
func Encode(hook, input string) ([]byte, error) {
	order, ok := members[hook]
	if !ok {
		return nil, fmt.Errorf("guesttest: unknown hook %q", hook)
	}
	var ms map[string]json.RawMessage
	if err := json.Unmarshal([]byte(input), &ms); err != nil {
		return nil, fmt.Errorf("guesttest: %s input: %w", hook, err)
	}
	for k := range ms {
		if !slices.Contains(order, k) {
			return nil, fmt.Errorf("guesttest: %s input: unknown member %q (want %s)", hook, k, strings.Join(order, ", "))
		}
	}
	if _, ok := ms["arguments"]; !ok && hook == "tool_call" {
		ms["arguments"] = json.RawMessage(`{}`)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for _, k := range order {
		v, ok := ms[k]
		if !ok || string(v) == "null" {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", k)
		if err := json.Compact(&b, v); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Configure hands the module its config, as the host does once per
// instance before any hook ("" stands for {}). A config the module refuses
// is an error with its message.
func Configure(config string) error {
	if config == "" {
		config = "{}"
	}
	var c bytes.Buffer
	if err := json.Compact(&c, []byte(config)); err != nil {
		return fmt.Errorf("guesttest: config: %w", err)
	}
	out, _ := guest.Handle("configure", c.Bytes())
	if len(out) == 0 {
		return nil
	}
	var e struct{ Error string }
	if json.Unmarshal(out, &e) != nil || e.Error == "" {
		return fmt.Errorf("guesttest: configure answered %s; want nothing or {\"error\":...}", out)
	}
	return errors.New(e.Error)
}

// Call runs the handler of hook (an ABI hook name, e.g. "tool_call") on
// input, a JSON object as ABI.md describes it (members in any order). An
// {"error":...} output is an Output with Error set, not an error: errors
// are for inputs that are not valid, hooks without a handler and outputs
// that are not JSON objects.
func Call(hook, input string) (*Output, error) {
	in, err := Encode(hook, input)
	if err != nil {
		return nil, err
	}
	raw, ok := guest.Handle(hook, in)
	if !ok {
		return nil, fmt.Errorf("guesttest: the module registers no %s handler", hook)
	}
	out := &Output{Raw: raw}
	if hook == "tool_call" {
		out.Action = "allow"
	}
	if len(raw) == 0 {
		return out, nil
	}
	var o struct {
		Action, Reason, Server, Tool, Error string
		Arguments, Result                   json.RawMessage
		Tools                               []Edit
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("guesttest: %s output %s is not a JSON object: %w", hook, raw, err)
	}
	if o.Action != "" {
		out.Action = o.Action
	}
	out.Reason, out.Server, out.Tool, out.Error = o.Reason, o.Server, o.Tool, o.Error
	out.Arguments, out.Result, out.Tools = o.Arguments, o.Result, o.Tools
	return out, nil
}

// Reset unregisters every handler, for tests that register their own.
func Reset() {
	guest.OnConfigure(nil)
	guest.OnToolsList(nil)
	guest.OnToolCall(nil)
	guest.OnToolResult(nil)
	guest.OnResourceResult(nil)
	guest.OnPromptResult(nil)
	guest.OnEvent(nil)
}
