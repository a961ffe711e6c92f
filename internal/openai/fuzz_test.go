package openai

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var toolSeeds = []string{
	`{"name":"create_issue","description":"Create a new issue","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","$id":"x","type":"object","properties":{"title":{"type":"string"},"n":{"type":"number","maximum":12345678901234567890}},"required":["title"],"definitions":{"a":{"$schema":"y"}}}}`,
	`{"name":"q","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"f":{"anyOf":[{"$ref":"#/$defs/f"},true]}},"prefixItems":[{"$schema":1}],"properties":{"$schema":{"default":{"$schema":2}}}}}`,
	`{"name":"t"}`, `{"name":"t","inputSchema":null}`, `{"name":"t","inputSchema":{}}`, `{"inputSchema":{"type":["object"],"properties":null,"type":1}}`,
	`{"title":"T","annotations":{"title":"A"},"inputSchema":{"properties":{"a":{"items":[{"enum":[{"$schema":1}]}]}}}}`,
	`{"inputSchema":"x"}`, `[]`, `null`, ``, `{"a":`, "{\"name\":\"\xff\",\"inputSchema\":{\"k\xff\\u0000\":1e999}}",
}

// nestingDepth returns the deepest bracket nesting of the valid JSON data.
func nestingDepth(data []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range data {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = c == '\\'
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func FuzzConvertTool(f *testing.F) {
	for _, s := range toolSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tool, err := ConvertTool("fn", data)
		if err == nil {
			if verr := validateTool(tool); verr != nil {
				t.Fatalf("ConvertTool(%s) = invalid tool: %v\n%s", data, verr, tool.Function.Parameters)
			}
			return
		}
		// Valid input must convert: a JSON object whose inputSchema is
		// absent, null or a (not absurdly deep) object.
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil || m == nil || nestingDepth(data) > maxSchemaDepth {
			return
		}
		if s := bytes.TrimSpace(m["inputSchema"]); len(s) == 0 || string(s) == "null" || s[0] == '{' {
			t.Fatalf("ConvertTool(%s) failed: %v", data, err)
		}
	})
}

func FuzzNormalizeResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"a"},{"type":"image","data":"AA==","mimeType":"image/png"}],"structuredContent":{"n":12345678901234567890},"isError":true}`,
		`{"content":[{"type":"text","text":1},"x",null,[]],"isError":null}`, `{}`, `{"content":null}`, `{"content":{}}`, `{"isError":"no"}`,
		`[]`, ``, `{"content":[{"type":"text","text":"\ud800"}]}`, "{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NormalizeResult(data)
		if err != nil {
			var m map[string]json.RawMessage
			if json.Unmarshal(data, &m) != nil || m == nil {
				return
			}
			content := string(bytes.TrimSpace(m["content"]))
			isError := string(bytes.TrimSpace(m["isError"]))
			if (content == "" || content == "null" || content[0] == '[') && (isError == "" || isError == "null" || isError == "true" || isError == "false") {
				t.Fatalf("NormalizeResult(%s) failed: %v", data, err)
			}
			return
		}
		out, err := json.Marshal(r)
		if err != nil || !json.Valid(out) {
			t.Fatalf("NormalizeResult(%s) = %+v, which does not marshal: %v", data, r, err)
		}
		for _, c := range r.Content {
			if !json.Valid(c) {
				t.Fatalf("content item %q is not valid JSON", c)
			}
		}
		var back Result
		if err := json.Unmarshal(out, &back); err != nil || back.Text != strings.ToValidUTF8(r.Text, "\ufffd") || back.IsError != r.IsError || len(back.Content) != len(r.Content) {
			t.Fatalf("round trip of %s: %+v, %v", out, back, err)
		}
	})
}

func FuzzNamer(f *testing.F) {
	f.Add("github.create_issue", "github/create_issue", "github_create_issue")
	f.Add(strings.Repeat("x", 70), strings.Repeat("x", 71), "")
	f.Add("café", "caf_", "caf\xff")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		names := []string{a, b, c, sanitize(a), sanitize(b), a + "." + b}
		checkNamer(t, NewNamer(names), names)
	})
}
