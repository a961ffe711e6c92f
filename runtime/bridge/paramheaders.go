package bridge

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file derives the Mcp-Param-* headers of a tools/call to a 2026-07-28
// upstream for a 2025 client, whose revision has no such headers (a
// 2026-07-28 client's own headers are forwarded, or their absence): a tool's inputSchema may map an argument to a
// header with "x-mcp-header" (SEP-2243), and a server that declares one
// refuses a call whose header is missing. The rules are go-sdk v1.8.0's
// client's (mcp/streamable_headers.go): strings, booleans and integers in
// the safe range; null and absent arguments get no header; values with
// non-printable ASCII, edge blanks or the sentinel form are base64-wrapped.

// headerSchema is what of an input schema the x-mcp-header rules read.
type headerSchema struct {
	Header     json.RawMessage         `json:"x-mcp-header"`
	Properties map[string]headerSchema `json:"properties"`
}

// mcpHeaderKey is the annotation's key; a schema without it costs a scan.
var mcpHeaderKey = []byte(`"x-mcp-header"`)

// DerivedParamHeaders returns the Mcp-Param-* headers of a tools/call of a
// tool with that inputSchema and these params, or nil.
func DerivedParamHeaders(schema, params json.RawMessage) transports.ParamHeaders {
	if !bytes.Contains(schema, mcpHeaderKey) {
		return nil
	}
	var s headerSchema
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	args, ok, err := wire.Field(params, "arguments")
	if err != nil || !ok {
		return nil
	}
	var out transports.ParamHeaders
	collectParamHeaders(s.Properties, args, &out)
	return out
}

// collectParamHeaders adds to *out the header of every annotated property
// of props present in args, descending into nested objects.
func collectParamHeaders(props map[string]headerSchema, args json.RawMessage, out *transports.ParamHeaders) {
	for name, p := range props {
		v, ok, err := wire.Field(args, name)
		if err != nil || !ok || string(v) == "null" {
			continue
		}
		var h string
		if json.Unmarshal(p.Header, &h) == nil && h != "" {
			if s, ok := paramHeaderValue(v); ok {
				if *out == nil {
					*out = transports.ParamHeaders{}
				}
				(*out)[http.CanonicalHeaderKey("Mcp-Param-"+h)] = []string{s}
			}
		}
		if len(p.Properties) > 0 {
			collectParamHeaders(p.Properties, v, out)
		}
	}
}

// paramHeaderValue is the header value of a JSON argument: a string, a
// boolean or an integer within ±(2^53-1).
func paramHeaderValue(v json.RawMessage) (string, bool) {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return "", false
	}
	var s string
	switch x := x.(type) {
	case string:
		s = x
	case bool:
		s = strconv.FormatBool(x)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) || x != math.Trunc(x) || math.Abs(x) > 1<<53-1 {
			return "", false
		}
		s = strconv.FormatInt(int64(x), 10)
	default:
		return "", false
	}
	if needsBase64(s) {
		s = "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
	}
	return s, true
}

// needsBase64 reports whether a header value must be base64-wrapped.
func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return true
		}
	}
	return strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?=")
}
