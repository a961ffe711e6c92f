package jsonx

import "github.com/edge-mcp/edge-mcp/internal/wire"

// Valid reports whether b is exactly one JSON value (RFC 8259 syntax;
// white space around it allowed), agreeing with encoding/json.Valid. It is
// the gateway codec's validating scanner (internal/wire).
func Valid(b []byte) bool { return wire.Valid(b) }
