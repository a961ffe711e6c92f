package schema

import (
	"bytes"
	"encoding/json"
)

// WithoutOptionalNulls returns args (a tools/call arguments object) without
// its top-level members whose value is null and which schema does not list
// in "required": what to validate, not what to forward.
//
// JSON Schema says null is not a boolean, so {"verbose": null} fails
// {"type": "boolean"}; but clients send null for an optional argument they
// leave unset (JavaScript's undefined-to-null, model output), MCP treats
// such a value as not provided (SEP-2243: an Mcp-Param header is omitted
// when its argument "is null or not provided"), and the upstream server,
// not the gateway, decides whether it accepts it. So the gateway's check
// takes a null optional argument as absent, and the call goes upstream
// with its arguments unchanged. A required argument that is null is still
// checked as given. Anything that is not an object comes back unchanged.
func WithoutOptionalNulls(schema, args []byte) []byte {
	if !bytes.Contains(args, []byte("null")) {
		return args
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(args, &members) != nil {
		return args
	}
	var s struct {
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s) // no usable "required": nothing is
	required := make(map[string]bool, len(s.Required))
	for _, r := range s.Required {
		required[r] = true
	}
	dropped := false
	for k, v := range members {
		if string(bytes.TrimSpace(v)) == "null" && !required[k] {
			delete(members, k)
			dropped = true
		}
	}
	if !dropped {
		return args
	}
	out, err := json.Marshal(members)
	if err != nil {
		return args
	}
	return out
}
