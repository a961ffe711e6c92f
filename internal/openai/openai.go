// Package openai presents an MCP tool catalogue to OpenAI-style function
// calling: it converts MCP tool definitions into function definitions with
// valid names and parameter schemas, and flattens an MCP CallToolResult into
// plain JSON.
//
// Nothing is round-tripped through map[string]any: JSON values the
// conversion does not need to change are copied byte for byte (then
// compacted), so member order and number literals such as
// 12345678901234567890 survive.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

var (
	// ErrInvalidName reports a function name that does not match
	// ^[a-zA-Z0-9_-]{1,64}$.
	ErrInvalidName = errors.New("invalid OpenAI function name")
	// ErrInvalidTool reports an MCP tool definition that cannot be converted.
	ErrInvalidTool = errors.New("invalid MCP tool")
	// ErrInvalidResult reports an MCP CallToolResult that cannot be
	// normalised.
	ErrInvalidResult = errors.New("invalid MCP CallToolResult")
)

// Function is an OpenAI function definition.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Tool is an OpenAI tool of type "function".
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// ConvertTool converts the MCP tool definition tool (an element of a
// tools/list result) into an OpenAI function tool named openaiName (see
// Namer).
//
// The description is the tool's description, or failing that its title or
// annotations.title. The parameters are the tool's inputSchema, or
// {"type":"object","properties":{}} when it has none (or null), changed only
// as OpenAI requires:
//   - "$schema" is removed from the schema and from every subschema, and
//     "$id" from the top level;
//   - "type" is set to "object" when missing or anything else;
//   - "properties":{} is added when missing or not an object.
//
// "$schema" is removed wherever it is a keyword: not from the values of
// const, default, enum, example and examples, which are data, and not where
// it is a property name (a member name directly inside properties,
// patternProperties, $defs, definitions, dependencies or dependentSchemas).
// Everything else is kept verbatim.
//
// ConvertTool fails when openaiName is not a valid function name, when tool
// is not a JSON object, or when its inputSchema is neither an object nor
// null or is nested more than 128 levels deep.
func ConvertTool(openaiName string, tool json.RawMessage) (Tool, error) {
	if !validName(openaiName) {
		return Tool{}, fmt.Errorf("converting tool to %q: %w", openaiName, ErrInvalidName)
	}
	if !json.Valid(tool) {
		return Tool{}, fmt.Errorf("converting tool %q: %w: not valid JSON", openaiName, ErrInvalidTool)
	}
	m, err := objectMembers(tool)
	if err != nil {
		return Tool{}, fmt.Errorf("converting tool %q: %w: %w", openaiName, ErrInvalidTool, err)
	}
	desc := stringMember(m, "description")
	if desc == "" {
		desc = stringMember(m, "title")
	}
	if desc == "" {
		if ann, err := objectMembers(member(m, "annotations")); err == nil {
			desc = stringMember(ann, "title")
		}
	}
	params, err := parameters(member(m, "inputSchema"))
	if err != nil {
		return Tool{}, fmt.Errorf("converting tool %q: %w: inputSchema: %w", openaiName, ErrInvalidTool, err)
	}
	return Tool{Type: "function", Function: Function{Name: openaiName, Description: desc, Parameters: params}}, nil
}

// Result is a CallToolResult flattened for a plain-JSON API.
type Result struct {
	// Text joins the text of every text content item with "\n".
	Text string `json:"text"`
	// Content holds the other content items (image, audio, resource,
	// resource_link, or anything unrecognised), verbatim with their type.
	Content []json.RawMessage `json:"content,omitempty"`
	// StructuredContent is the result's structuredContent, verbatim.
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	// IsError reports a tool-level error.
	IsError bool `json:"isError"`
}

// NormalizeResult flattens an MCP CallToolResult. A content item counts as
// text when its type is "text" and its text is a string; any other item is
// kept in Content. Text items' annotations and _meta are dropped, as are the
// result's own _meta and unknown members. It fails when the result is not a
// JSON object, content is neither an array nor null, or isError is neither a
// boolean nor null.
func NormalizeResult(callToolResult json.RawMessage) (Result, error) {
	if !json.Valid(callToolResult) {
		return Result{}, fmt.Errorf("normalising result: %w: not valid JSON", ErrInvalidResult)
	}
	m, err := objectMembers(callToolResult)
	if err != nil {
		return Result{}, fmt.Errorf("normalising result: %w: %w", ErrInvalidResult, err)
	}
	var r Result
	switch raw := member(m, "isError"); {
	case raw == nil, isNull(raw):
	case string(raw) == "true":
		r.IsError = true
	case string(raw) == "false":
	default:
		return Result{}, fmt.Errorf("normalising result: %w: isError is %s, not a boolean", ErrInvalidResult, kind(raw))
	}
	if raw := member(m, "structuredContent"); raw != nil && !isNull(raw) {
		r.StructuredContent = compact(raw)
	}
	content := member(m, "content")
	if content == nil || isNull(content) {
		return r, nil
	}
	items, err := arrayElements(content)
	if err != nil {
		return Result{}, fmt.Errorf("normalising result: %w: content: %w", ErrInvalidResult, err)
	}
	var text strings.Builder
	texts := 0
	for _, item := range items {
		im, err := objectMembers(item)
		if err == nil && stringMember(im, "type") == "text" {
			if t := member(im, "text"); len(t) > 0 && t[0] == '"' {
				if texts > 0 {
					text.WriteByte('\n')
				}
				text.WriteString(stringMember(im, "text"))
				texts++
				continue
			}
		}
		r.Content = append(r.Content, compact(item))
	}
	r.Text = text.String()
	return r, nil
}

// jsonMember is one member of a JSON object, its value undecoded.
type jsonMember = jsonscan.KeyValue

// objectMembers returns the members of the JSON object raw, in order
// (duplicates included).
func objectMembers(raw json.RawMessage) ([]jsonMember, error) {
	m, err := jsonscan.ObjectMembers(raw)
	if m == nil {
		return nil, fmt.Errorf("%s, not an object", kind(raw))
	}
	return m, err
}

// arrayElements returns the elements of the JSON array raw.
func arrayElements(raw json.RawMessage) ([][]byte, error) {
	e, err := jsonscan.ArrayElements(raw)
	if e == nil {
		return nil, fmt.Errorf("%s, not an array", kind(raw))
	}
	return e, err
}

// member returns the value of the last member named key (the one
// encoding/json would decode), or nil.
func member(m []jsonMember, key string) json.RawMessage { return jsonscan.Lookup(m, key) }

// stringMember returns the member named key when it is a string, or "".
func stringMember(m []jsonMember, key string) string {
	s, _ := jsonscan.StringValue(member(m, key))
	return s
}

// kind names the JSON type of the valid JSON value raw, for error messages.
func kind(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// compact returns raw without insignificant whitespace.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json would have it.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
