package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// emptyParameters is the parameter schema of a tool without an inputSchema.
const emptyParameters = `{"type":"object","properties":{}}`

// maxSchemaDepth bounds the nesting of a schema; deeper ones are rejected
// with errTooDeep (no real tool comes close).
const maxSchemaDepth = 128

var errTooDeep = fmt.Errorf("schema nested more than %d levels deep", maxSchemaDepth)

// A schema is walked generically, since any keyword (including unknown and
// vendor ones) may hold subschemas, except that the values of data keywords
// are instance data and are copied verbatim, and the member names of
// property-map keywords are property names, not keywords.
var (
	dataKeywords      = keywordSet("const", "default", "enum", "example", "examples")
	schemaMapKeywords = keywordSet(
		"$defs", "definitions", "dependencies", "dependentSchemas",
		"patternProperties", "properties",
	)
)

func keywordSet(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// parameters returns the OpenAI parameters schema for the inputSchema raw
// (nil when absent).
func parameters(raw json.RawMessage) (json.RawMessage, error) {
	if raw == nil || isNull(raw) {
		return json.RawMessage(emptyParameters), nil
	}
	m, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	// Of repeated "type" or "properties" members only the last, which
	// encoding/json would decode, is kept.
	last := map[string]int{}
	for i, mem := range m {
		last[mem.Key] = i
	}
	var out []byte
	var hasType, hasProps bool
	for i, mem := range m {
		switch mem.Key {
		case "$schema", "$id":
			continue
		case "type":
			if i != last["type"] {
				continue
			}
			hasType = true
			mem.Value = json.RawMessage(`"object"`)
		case "properties":
			if i != last["properties"] {
				continue
			}
			hasProps = true
			if v := bytes.TrimSpace(mem.Value); len(v) == 0 || v[0] != '{' {
				mem.Value = json.RawMessage(`{}`)
			}
		}
		if out, err = appendMember(out, mem, 0); err != nil {
			return nil, err
		}
	}
	var head []byte
	head = append(head, '{')
	if !hasType {
		head = append(head, `"type":"object",`...)
	}
	if !hasProps {
		head = append(head, `"properties":{},`...)
	}
	out = append(head, out...)
	if out[len(out)-1] == ',' {
		out = out[:len(out)-1]
	}
	out = append(out, '}')
	var b bytes.Buffer
	if err := json.Compact(&b, out); err != nil {
		return nil, fmt.Errorf("rebuilding schema: %w", err)
	}
	return b.Bytes(), nil
}

// appendMember appends `"key":value,` with value cleaned as the keyword key
// requires.
func appendMember(dst []byte, mem jsonMember, depth int) ([]byte, error) {
	dst = appendString(dst, mem.Key)
	dst = append(dst, ':')
	var err error
	switch {
	case dataKeywords[mem.Key]:
		dst = append(dst, mem.Value...)
	case schemaMapKeywords[mem.Key] && isObject(mem.Value):
		dst, err = appendSchemaMap(dst, mem.Value, depth+1)
	case isArray(mem.Value):
		dst, err = appendEach(dst, mem.Value, depth+1)
	default:
		dst, err = appendSchema(dst, mem.Value, depth+1)
	}
	if err != nil {
		return nil, err
	}
	return append(dst, ','), nil
}

// appendSchema appends the schema raw without "$schema" members, cleaning its
// subschemas. Values that are not objects (boolean schemas, strings, numbers)
// are copied.
func appendSchema(dst []byte, raw json.RawMessage, depth int) ([]byte, error) {
	if !isObject(raw) {
		return append(dst, raw...), nil
	}
	if depth > maxSchemaDepth {
		return nil, errTooDeep
	}
	m, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	dst = append(dst, '{')
	for _, mem := range m {
		if mem.Key == "$schema" {
			continue
		}
		if dst, err = appendMember(dst, mem, depth); err != nil {
			return nil, err
		}
	}
	return closeObject(dst), nil
}

// appendEach appends the array raw, cleaning each element as a schema (which
// leaves elements that are not objects unchanged).
func appendEach(dst []byte, raw json.RawMessage, depth int) ([]byte, error) {
	if depth > maxSchemaDepth {
		return nil, errTooDeep
	}
	elems, err := arrayElements(raw)
	if err != nil {
		return nil, err
	}
	dst = append(dst, '[')
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = appendSchema(dst, e, depth); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendSchemaMap appends the object raw, whose member names are property
// names (kept, even "$schema") and whose values are schemas.
func appendSchemaMap(dst []byte, raw json.RawMessage, depth int) ([]byte, error) {
	m, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	dst = append(dst, '{')
	for _, mem := range m {
		dst = appendString(dst, mem.Key)
		dst = append(dst, ':')
		if dst, err = appendSchema(dst, mem.Value, depth); err != nil {
			return nil, err
		}
		dst = append(dst, ',')
	}
	return closeObject(dst), nil
}

// closeObject replaces a trailing comma with '}', or appends '}' to an
// empty object.
func closeObject(dst []byte) []byte {
	if dst[len(dst)-1] == ',' {
		dst[len(dst)-1] = '}'
		return dst
	}
	return append(dst, '}')
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

func isArray(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '['
}
