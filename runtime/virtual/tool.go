package virtual

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// Tool is an overridden tool of a virtual server: how its definition is
// rewritten on the way down and its arguments on the way up.
type Tool struct {
	tool        string // the catalogue's name of the tool
	name        string // "" unchanged
	description string // "" unchanged
	args        []Argument
	// refused are the arguments a client must not send (fixed, hidden);
	// added the fixed ones and defaults, in config order.
	refused []string
}

func compileTool(o Override) *Tool {
	t := &Tool{tool: o.Tool, name: o.Name, description: o.Description, args: o.Arguments}
	for _, a := range o.Arguments {
		if a.Fixed != nil || a.Hidden {
			t.refused = append(t.refused, a.Name)
		}
	}
	return t
}

// Catalogue returns the tool's name in the catalogue, which the global
// access rules, tool rules and policies know it by.
func (t *Tool) Catalogue() string { return t.tool }

// ArgumentError is a client's argument the virtual server refuses: the
// gateway answers it with JSON-RPC error -32602 (invalid params).
type ArgumentError struct {
	Argument string // "" when the arguments are not an object
	Reason   string
}

func (e *ArgumentError) Error() string {
	if e.Argument == "" {
		return e.Reason
	}
	return fmt.Sprintf("argument %q %s", e.Argument, e.Reason)
}

// Arguments rewrites a call's arguments (the raw "arguments" member; nil
// when absent) for the upstream: an argument the client may not send
// (fixed or hidden) is refused, fixed values are set, defaults are added
// when the client sent none. Every other member keeps its bytes and
// order. changed reports whether out differs from args.
func (t *Tool) Arguments(args json.RawMessage) (out json.RawMessage, changed bool, _ error) {
	if t == nil {
		return args, false, nil
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	out = args
	if err := t.Refuse(args); err != nil {
		return nil, false, err
	}
	for _, a := range t.args {
		var v json.RawMessage
		switch {
		case a.Fixed != nil:
			v = a.Fixed
		case a.Default != nil:
			_, sent, err := wire.Field(out, a.Name)
			if err != nil {
				return nil, false, &ArgumentError{Reason: "arguments must be a JSON object"}
			}
			if sent {
				continue
			}
			v = a.Default
		default:
			continue
		}
		var err error
		if out, err = wire.SetField(out, a.Name, v); err != nil {
			return nil, false, &ArgumentError{Reason: "arguments must be a JSON object"}
		}
		changed = true
	}
	if !changed {
		if _, _, err := wire.Field(args, ""); err != nil {
			return nil, false, &ArgumentError{Reason: "arguments must be a JSON object"}
		}
	}
	return out, changed, nil
}

// Refuse returns an *ArgumentError when args holds an argument the client
// may not send (fixed or hidden), naming it, or is not an object.
func (t *Tool) Refuse(args json.RawMessage) error {
	if t == nil || len(args) == 0 || string(args) == "null" {
		return nil
	}
	for _, name := range t.refused {
		_, sent, err := wire.Field(args, name)
		if err != nil {
			return &ArgumentError{Reason: "arguments must be a JSON object"}
		}
		if sent {
			return &ArgumentError{Argument: name, Reason: "is not an argument of this tool"}
		}
	}
	return nil
}

// Rewrite is Arguments applied to a tools/call's params: it returns the
// params and arguments to send upstream (unchanged when nothing is
// added).
func (t *Tool) Rewrite(params, args json.RawMessage) (json.RawMessage, json.RawMessage, error) {
	out, changed, err := t.Arguments(args)
	if err != nil || !changed {
		return params, args, err
	}
	if params, err = wire.SetField(params, "arguments", out); err != nil {
		return nil, nil, &ArgumentError{Reason: "params must be a JSON object"}
	}
	return params, out, nil
}

// definition rewrites a tool's definition (raw, with its catalogue name)
// for the virtual server: name, description, and the inputSchema less the
// fixed and hidden arguments (from properties and required); a defaulted
// argument gets its default in the schema and is no longer required.
func (t *Tool) definition(raw json.RawMessage) (json.RawMessage, error) {
	var set []wire.Member
	if t.name != "" {
		set = append(set, wire.Member{Key: "name", Value: wire.AppendString(nil, t.name)})
	}
	if t.description != "" {
		set = append(set, wire.Member{Key: "description", Value: wire.AppendString(nil, t.description)})
	}
	if len(t.args) > 0 {
		sch, ok, err := wire.Field(raw, "inputSchema")
		if err != nil {
			return nil, err
		}
		if ok {
			if sch, err = t.schema(sch); err != nil {
				return nil, fmt.Errorf("rewriting inputSchema: %w", err)
			}
			set = append(set, wire.Member{Key: "inputSchema", Value: sch})
		}
	}
	if len(set) == 0 {
		return raw, nil
	}
	return wire.EditFields(raw, nil, set)
}

// schema rewrites an inputSchema.
func (t *Tool) schema(sch json.RawMessage) (json.RawMessage, error) {
	props, hasProps, err := wire.Field(sch, "properties")
	if err != nil {
		return nil, err
	}
	var drop []string // from required
	for _, a := range t.args {
		if a.Fixed != nil || a.Hidden {
			drop = append(drop, a.Name)
			if hasProps {
				if props, err = wire.DeleteField(props, a.Name); err != nil {
					return nil, fmt.Errorf("properties: %w", err)
				}
			}
			continue
		}
		drop = append(drop, a.Name)
		if p, ok, err := wire.Field(props, a.Name); hasProps && err == nil && ok && len(p) > 0 && p[0] == '{' {
			if p, err = wire.SetField(p, "default", a.Default); err != nil {
				return nil, fmt.Errorf("properties.%s: %w", a.Name, err)
			}
			if props, err = wire.SetField(props, a.Name, p); err != nil {
				return nil, fmt.Errorf("properties: %w", err)
			}
		}
	}
	var set []wire.Member
	if hasProps {
		set = append(set, wire.Member{Key: "properties", Value: props})
	}
	req, hasReq, err := wire.Field(sch, "required")
	if err != nil {
		return nil, err
	}
	if hasReq {
		var names []json.RawMessage
		if err := json.Unmarshal(req, &names); err == nil {
			kept := slices.DeleteFunc(names, func(n json.RawMessage) bool {
				s, ok := wire.Unquote(n)
				return ok && slices.Contains(drop, s)
			})
			out, _ := json.Marshal(kept)
			if len(kept) == 0 {
				out = json.RawMessage("[]")
			}
			set = append(set, wire.Member{Key: "required", Value: out})
		}
	}
	if len(set) == 0 {
		return sch, nil
	}
	return wire.EditFields(sch, nil, set)
}
