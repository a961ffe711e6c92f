package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// validateTool checks tool against OpenAI's rules for function tools: type
// "function", a valid name, and parameters that are a JSON object schema of
// type "object" with no "$schema" keyword anywhere. It is written
// independently of the package's own schema walk.
func validateTool(tool Tool) error {
	if tool.Type != "function" {
		return fmt.Errorf("type %q, want function", tool.Type)
	}
	if !nameRE.MatchString(tool.Function.Name) {
		return fmt.Errorf("name %q does not match %s", tool.Function.Name, nameRE)
	}
	if !json.Valid(tool.Function.Parameters) {
		return fmt.Errorf("parameters are not valid JSON: %s", tool.Function.Parameters)
	}
	dec := json.NewDecoder(bytes.NewReader(tool.Function.Parameters))
	dec.UseNumber()
	var params any
	if err := dec.Decode(&params); err != nil {
		return err
	}
	obj, ok := params.(map[string]any)
	if !ok {
		return fmt.Errorf("parameters are %T, want an object", params)
	}
	if obj["type"] != "object" {
		return fmt.Errorf(`parameters "type" is %v, want "object"`, obj["type"])
	}
	if _, ok := obj["properties"].(map[string]any); !ok {
		return fmt.Errorf(`parameters "properties" is %T, want an object`, obj["properties"])
	}
	if _, ok := obj["$id"]; ok {
		return fmt.Errorf(`parameters have "$id"`)
	}
	if _, err := json.Marshal(tool); err != nil {
		return fmt.Errorf("marshalling: %w", err)
	}
	return noSchemaKeyword(obj, "parameters")
}

// noSchemaKeyword reports a "$schema" keyword in the schema v or below.
// Values of data keywords are instance data, and the member names of
// property maps are property names, so neither is a keyword.
func noSchemaKeyword(v any, path string) error {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			switch k {
			case "$schema":
				return fmt.Errorf("%s has $schema", path)
			case "enum", "const", "default", "example", "examples":
				continue
			case "properties", "patternProperties", "$defs", "definitions", "dependencies", "dependentSchemas":
				if m, ok := sub.(map[string]any); ok {
					for name, s := range m {
						if err := noSchemaKeyword(s, path+"."+k+"."+name); err != nil {
							return err
						}
					}
					continue
				}
			}
			if err := noSchemaKeyword(sub, path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		for i, sub := range v {
			if err := noSchemaKeyword(sub, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestConvertTool(t *testing.T) {
	for _, c := range []struct {
		name, tool       string
		wantDesc         string
		wantParams       string
		wantParamsSubstr []string
	}{
		{
			name:       "no inputSchema, title as description",
			tool:       `{"name":"ping","title":"Ping the server"}`,
			wantDesc:   "Ping the server",
			wantParams: `{"type":"object","properties":{}}`,
		},
		{
			name:       "null inputSchema, annotations title",
			tool:       `{"name":"ping","inputSchema":null,"annotations":{"title":"Ping","readOnlyHint":true}}`,
			wantDesc:   "Ping",
			wantParams: `{"type":"object","properties":{}}`,
		},
		{
			name: "draft-07 with definitions",
			tool: `{
				"name": "create_issue",
				"description": "Create a new issue in a GitHub repository",
				"inputSchema": {
					"$schema": "http://json-schema.org/draft-07/schema#",
					"$id": "https://example.com/create_issue.json",
					"type": "object",
					"properties": {
						"owner": {"type": "string", "description": "Repository owner"},
						"labels": {"type": "array", "items": {"$ref": "#/definitions/label"}},
						"milestone": {"type": "number", "maximum": 12345678901234567890, "minimum": -1.50E+3}
					},
					"required": ["owner"],
					"additionalProperties": false,
					"definitions": {
						"label": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string", "minLength": 1}
					}
				}
			}`,
			wantDesc:   "Create a new issue in a GitHub repository",
			wantParams: `{"type":"object","properties":{"owner":{"type":"string","description":"Repository owner"},"labels":{"type":"array","items":{"$ref":"#/definitions/label"}},"milestone":{"type":"number","maximum":12345678901234567890,"minimum":-1.50E+3}},"required":["owner"],"additionalProperties":false,"definitions":{"label":{"type":"string","minLength":1}}}`,
		},
		{
			name:       "2020-12 with $defs and nested $schema",
			tool:       `{"name":"query","description":"Run a query","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"filter":{"$ref":"#/$defs/filter"},"point":{"type":"array","prefixItems":[{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"number"},{"type":"number"}]}},"$defs":{"filter":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"and":{"type":"array","items":{"$ref":"#/$defs/filter"}}},"anyOf":[{"required":["and"]},{"$schema":"x","not":{"$schema":"y"}}],"additionalProperties":{"$schema":"z","type":"integer","maximum":1e400}}},"unevaluatedProperties":false}}`,
			wantDesc:   "Run a query",
			wantParams: `{"type":"object","properties":{"filter":{"$ref":"#/$defs/filter"},"point":{"type":"array","prefixItems":[{"type":"number"},{"type":"number"}]}},"$defs":{"filter":{"type":"object","properties":{"and":{"type":"array","items":{"$ref":"#/$defs/filter"}}},"anyOf":[{"required":["and"]},{"not":{}}],"additionalProperties":{"type":"integer","maximum":1e400}}},"unevaluatedProperties":false}`,
		},
		{
			name:       "missing type, properties and $schema-named property",
			tool:       `{"name":"t","description":"d","inputSchema":{"required":["$schema"],"properties":{"$schema":{"type":"string","default":{"$schema":"kept"}}},"$id":"x"}}`,
			wantDesc:   "d",
			wantParams: `{"type":"object","required":["$schema"],"properties":{"$schema":{"type":"string","default":{"$schema":"kept"}}}}`,
		},
		{
			name:       "no properties",
			tool:       `{"name":"t","inputSchema":{"type":"object"}}`,
			wantParams: `{"properties":{},"type":"object"}`,
		},
		{
			name:       "wrong type and null properties",
			tool:       `{"name":"t","inputSchema":{"type":["object","null"],"properties":null,"type":"string"}}`,
			wantParams: `{"properties":{},"type":"object"}`,
		},
		{
			name:       "boolean subschemas and odd keys kept",
			tool:       `{"name":"t","inputSchema":{"type":"object","properties":{"a":true,"b":false,"q\"\u00e9\n":{"enum":[1,"$schema",{"$schema":1}]}},"items":[true,{"$schema":1}],"x-vendor":{"$schema":"gone","list":[{"$schema":"gone"}]},"examples":[{"$schema":"kept"}]}}`,
			wantParams: `{"type":"object","properties":{"a":true,"b":false,"q\"é\u000a":{"enum":[1,"$schema",{"$schema":1}]}},"items":[true,{}],"x-vendor":{"list":[{}]},"examples":[{"$schema":"kept"}]}`,
		},
		{
			name:             "real filesystem tool",
			tool:             `{"name":"edit_file","description":"Make line-based edits to a text file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"edits":{"type":"array","items":{"type":"object","properties":{"oldText":{"type":"string","description":"Text to search for - must match exactly"},"newText":{"type":"string","description":"Text to replace with"}},"required":["oldText","newText"],"additionalProperties":false}},"dryRun":{"type":"boolean","default":false,"description":"Preview changes using git-style diff format"}},"required":["path","edits"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}}`,
			wantDesc:         "Make line-based edits to a text file.",
			wantParamsSubstr: []string{`"required":["path","edits"]`, `"default":false`, `"required":["oldText","newText"]`},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ConvertTool("my_tool", json.RawMessage(c.tool))
			if err != nil {
				t.Fatalf("ConvertTool: %v", err)
			}
			if err := validateTool(got); err != nil {
				t.Errorf("invalid OpenAI tool: %v\n%s", err, got.Function.Parameters)
			}
			if got.Function.Name != "my_tool" || got.Function.Description != c.wantDesc || got.Function.Strict != nil {
				t.Errorf("function = %+v, want name my_tool, description %q", got.Function, c.wantDesc)
			}
			if c.wantParams != "" && string(got.Function.Parameters) != c.wantParams {
				t.Errorf("parameters =\n%s\nwant\n%s", got.Function.Parameters, c.wantParams)
			}
			for _, s := range c.wantParamsSubstr {
				if !bytes.Contains(got.Function.Parameters, []byte(s)) {
					t.Errorf("parameters lack %s:\n%s", s, got.Function.Parameters)
				}
			}
		})
	}
}

func TestConvertToolErrors(t *testing.T) {
	for _, c := range []struct {
		name, openaiName, tool string
		want                   error
	}{
		{"invalid name", "a.b", `{"name":"a.b"}`, ErrInvalidName},
		{"empty name", "", `{"name":"x"}`, ErrInvalidName},
		{"long name", strings.Repeat("x", 65), `{"name":"x"}`, ErrInvalidName},
		{"invalid JSON", "t", `{"name":`, ErrInvalidTool},
		{"trailing data", "t", `{"name":"t"} {}`, ErrInvalidTool},
		{"not an object", "t", `["name"]`, ErrInvalidTool},
		{"empty", "t", ``, ErrInvalidTool},
		{"string schema", "t", `{"name":"t","inputSchema":"object"}`, ErrInvalidTool},
		{"boolean schema", "t", `{"name":"t","inputSchema":true}`, ErrInvalidTool},
		{"absurdly deep", "t", `{"inputSchema":` + strings.Repeat(`{"not":`, 200) + `{}` + strings.Repeat(`}`, 200) + `}`, ErrInvalidTool},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ConvertTool(c.openaiName, json.RawMessage(c.tool)); !errors.Is(err, c.want) {
				t.Errorf("ConvertTool error = %v, want %v", err, c.want)
			}
		})
	}
}

func TestToolJSON(t *testing.T) {
	tool, err := ConvertTool("get_forecast", json.RawMessage(`{"name":"get_forecast","description":"Get weather forecast for a location.","inputSchema":{"type":"object","properties":{"latitude":{"type":"number"}},"required":["latitude"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"function","function":{"name":"get_forecast","description":"Get weather forecast for a location.","parameters":{"type":"object","properties":{"latitude":{"type":"number"}},"required":["latitude"]}}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestNormalizeResult(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     Result
		wantJSON string
	}{
		{
			name:     "text only",
			in:       `{"content":[{"type":"text","text":"line 1"},{"type":"text","text":"line 2","annotations":{"audience":["user"]}}]}`,
			want:     Result{Text: "line 1\nline 2"},
			wantJSON: `{"text":"line 1\nline 2","isError":false}`,
		},
		{
			name: "mixed text and image",
			in:   `{"content":[{"type":"text","text":"Here is the chart:"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png", "annotations":{"priority":0.25}},{"type":"text","text":"done"}]}`,
			want: Result{Text: "Here is the chart:\ndone", Content: []json.RawMessage{
				json.RawMessage(`{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png","annotations":{"priority":0.25}}`),
			}},
			wantJSON: `{"text":"Here is the chart:\ndone","content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png","annotations":{"priority":0.25}}],"isError":false}`,
		},
		{
			name: "structured content",
			in:   `{"content":[{"type":"text","text":"{\"temperature\":22.50,\"id\":12345678901234567890}"}],"structuredContent":{"temperature":22.50,"id":12345678901234567890},"_meta":{"x":1}}`,
			want: Result{Text: `{"temperature":22.50,"id":12345678901234567890}`, StructuredContent: json.RawMessage(`{"temperature":22.50,"id":12345678901234567890}`)},
		},
		{
			name:     "tool error",
			in:       `{"content":[{"type":"text","text":"API rate limit exceeded"}],"isError":true}`,
			want:     Result{Text: "API rate limit exceeded", IsError: true},
			wantJSON: `{"text":"API rate limit exceeded","isError":true}`,
		},
		{
			name: "audio, resources and unknown items",
			in:   `{"content":[{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"},{"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"hello"}},{"type":"resource_link","uri":"file:///b.txt","name":"b.txt"},{"type":"text","text":7},{"type":"hologram"},"bare",null],"isError":false}`,
			want: Result{Content: []json.RawMessage{
				json.RawMessage(`{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"}`),
				json.RawMessage(`{"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"hello"}}`),
				json.RawMessage(`{"type":"resource_link","uri":"file:///b.txt","name":"b.txt"}`),
				json.RawMessage(`{"type":"text","text":7}`),
				json.RawMessage(`{"type":"hologram"}`),
				json.RawMessage(`"bare"`),
				json.RawMessage(`null`),
			}},
		},
		{
			name:     "empty",
			in:       `{}`,
			want:     Result{},
			wantJSON: `{"text":"","isError":false}`,
		},
		{
			name: "null members and empty text",
			in:   `{"content":null,"structuredContent":null,"isError":null}`,
			want: Result{},
		},
		{
			name: "empty texts still joined",
			in:   `{"content":[{"type":"text","text":""},{"type":"text","text":"b"}]}`,
			want: Result{Text: "\nb"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := NormalizeResult(json.RawMessage(c.in))
			if err != nil {
				t.Fatalf("NormalizeResult: %v", err)
			}
			if got.Text != c.want.Text || got.IsError != c.want.IsError || !bytes.Equal(got.StructuredContent, c.want.StructuredContent) || len(got.Content) != len(c.want.Content) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
			for i := range got.Content {
				if !bytes.Equal(got.Content[i], c.want.Content[i]) {
					t.Errorf("content[%d] = %s, want %s", i, got.Content[i], c.want.Content[i])
				}
			}
			if c.wantJSON != "" {
				b, err := json.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != c.wantJSON {
					t.Errorf("JSON = %s, want %s", b, c.wantJSON)
				}
			}
		})
	}
}

func TestNormalizeResultErrors(t *testing.T) {
	for _, in := range []string{``, `null`, `[]`, `"x"`, `{"content":`, `{"content":{}}`, `{"content":"text"}`, `{"isError":"yes"}`, `{"isError":1}`, `{} {}`} {
		if _, err := NormalizeResult(json.RawMessage(in)); !errors.Is(err, ErrInvalidResult) {
			t.Errorf("NormalizeResult(%s) error = %v, want ErrInvalidResult", in, err)
		}
	}
}

func ExampleConvertTool() {
	mcpTools := []json.RawMessage{
		json.RawMessage(`{"name":"github.create_issue","description":"Create a new issue","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}`),
		json.RawMessage(`{"name":"fs/read file","title":"Read a file"}`),
	}
	names := []string{"github.create_issue", "fs/read file"}
	namer := NewNamer(names)
	for i, raw := range mcpTools {
		tool, err := ConvertTool(namer.OpenAI(names[i]), raw)
		if err != nil {
			fmt.Println(err)
			continue
		}
		b, _ := json.Marshal(tool)
		fmt.Println(string(b))
	}
	back, _ := namer.MCP("fs_read_file")
	fmt.Println(back)
	// Output:
	// {"type":"function","function":{"name":"github_create_issue","description":"Create a new issue","parameters":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}}
	// {"type":"function","function":{"name":"fs_read_file","description":"Read a file","parameters":{"type":"object","properties":{}}}}
	// fs/read file
}

func ExampleNormalizeResult() {
	r, err := NormalizeResult(json.RawMessage(`{"content":[{"type":"text","text":"22.5 °C"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"structuredContent":{"celsius":22.5}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	// Output:
	// {"text":"22.5 °C","content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"structuredContent":{"celsius":22.5},"isError":false}
}
