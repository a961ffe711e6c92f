package openai

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// ObjectArguments checks tool call arguments: absent or null (nil, no
// arguments), a JSON object, or a JSON string holding an object (as OpenAI's
// function calls carry them, and as models sometimes write them).
func ObjectArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		s, ok := wire.Unquote(raw)
		if !ok {
			return nil, fmt.Errorf("are not a valid JSON string")
		}
		raw = bytes.TrimSpace([]byte(s))
		if len(raw) == 0 {
			return nil, nil
		}
	}
	if raw[0] != '{' || !wire.Valid(raw) {
		return nil, fmt.Errorf("must be a JSON object")
	}
	return raw, nil
}
