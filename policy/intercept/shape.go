package intercept

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// checkMutation checks a mutator's new payload: valid JSON within the size
// cap, the same kind of value as before, and for the events the gateway
// routes on, members of the right types.
func (c *Chain) checkMutation(m *member, ev Event, before, after json.RawMessage) *FailError {
	bad := func(format string, args ...any) *FailError {
		return &FailError{Interceptor: m.desc.Name, Kind: ErrBadResult, Err: fmt.Errorf("mutated payload: "+format, args...)}
	}
	if len(after) > c.maxPayload {
		return bad("%d bytes, limit %d", len(after), c.maxPayload)
	}
	if !json.Valid(after) {
		return bad("not valid JSON")
	}
	if kb, ka := kind(before), kind(after); kb != ka {
		return bad("a JSON %s where the event had a JSON %s", ka, kb)
	}
	if err := CheckShape(ev.Event, ev.Phase, after); err != nil {
		return bad("%v", err)
	}
	if ev.Check != nil {
		if err := ev.Check(after); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

func kind(b json.RawMessage) string {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// shapes lists, per event and phase, the members whose JSON kind is fixed
// when present.
type shapeKey struct {
	event string
	phase Phase
}

var shapes = map[shapeKey]map[string]string{
	{"tools/call", Request}:                {"name": "string", "arguments": "object", "_meta": "object"},
	{"tools/call", Response}:               {"content": "array", "structuredContent": "object", "isError": "boolean", "_meta": "object"},
	{"resources/read", Request}:            {"uri": "string", "_meta": "object"},
	{"resources/read", Response}:           {"contents": "array", "_meta": "object"},
	{"prompts/get", Request}:               {"name": "string", "arguments": "object", "_meta": "object"},
	{"prompts/get", Response}:              {"messages": "array", "_meta": "object"},
	{"tools/list", Response}:               {"tools": "array", "nextCursor": "string"},
	{"prompts/list", Response}:             {"prompts": "array", "nextCursor": "string"},
	{"resources/list", Response}:           {"resources": "array", "nextCursor": "string"},
	{"resources/templates/list", Response}: {"resourceTemplates": "array", "nextCursor": "string"},
	{"resources/subscribe", Request}:       {"uri": "string", "_meta": "object"},
	{"sampling/createMessage", Request}:    {"messages": "array", "maxTokens": "number"},
	{"elicitation/create", Request}:        {"message": "string", "requestedSchema": "object"},
	{"roots/list", Response}:               {"roots": "array"},
}

// CheckShape checks a payload of a known event for members of the wrong
// JSON kind (an object payload; "arguments" an object for tools/call, ...).
// Payloads of other events pass.
func CheckShape(event string, ph Phase, payload json.RawMessage) error {
	want, ok := shapes[shapeKey{event, ph}]
	if !ok {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil || obj == nil {
		return fmt.Errorf("%s %s payload must be a JSON object", event, ph)
	}
	for name, k := range want {
		if v, ok := obj[name]; ok && kind(v) != k {
			return fmt.Errorf("%s %s payload: %q is a JSON %s, want %s", event, ph, name, kind(v), k)
		}
	}
	return nil
}
