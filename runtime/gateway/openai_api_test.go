package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// oaLongName is an MCP tool name longer than OpenAI allows.
const oaLongName = "analytics_reporting_generate_quarterly_revenue_breakdown_by_region_and_product_line"

// openAIUpstream is a go-sdk server with the tools the API tests call: a
// dotted and an over-long name, text, image, structured, isError and
// protocol-error results, a schema full of "$schema", a slow tool and
// tools for rules to defer and limit. calls counts the calls it answered.
func openAIUpstream(t *testing.T, calls *atomic.Int32) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "oa", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"File path"}},"required":["path"]}`)
	add := func(name, desc string, schema json.RawMessage, h func(args json.RawMessage) (*mcp.CallToolResult, error)) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			if name == "slow" {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return h(req.Params.Arguments)
		})
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	add("files.read", "Read a file.", obj, func(args json.RawMessage) (*mcp.CallToolResult, error) {
		var in struct{ Path string }
		json.Unmarshal(args, &in)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "line one of " + in.Path}, &mcp.TextContent{Text: "line two"}}}, nil
	})
	add(oaLongName, "Generate the quarterly revenue breakdown.", json.RawMessage(`{"type":"object"}`), func(json.RawMessage) (*mcp.CallToolResult, error) {
		return text("revenue"), nil
	})
	add("snapshot", "Take a screenshot.", json.RawMessage(`{"type":"object"}`), func(json.RawMessage) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a picture"}, &mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}}, nil
	})
	add("forecast", "Weather forecast.", json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"urn:forecast","type":"object",`+
		`"properties":{"city":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"string"},`+
		`"options":{"type":"object","properties":{"units":{"$schema":"x","enum":["metric","imperial"]}}}},`+
		`"$defs":{"unit":{"$schema":"x","type":"string"}}}`), func(json.RawMessage) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{StructuredContent: map[string]any{"temperature": 21.5, "unit": "C"}, Content: []mcp.Content{&mcp.TextContent{Text: `{"temperature":21.5,"unit":"C"}`}}}, nil
	})
	add("fail", "Always fails.", json.RawMessage(`{"type":"object"}`), func(json.RawMessage) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk full"}}}, nil
	})
	add("rpcfail", "Fails with a protocol error.", json.RawMessage(`{"type":"object"}`), func(json.RawMessage) (*mcp.CallToolResult, error) {
		return nil, errors.New("backend exploded")
	})
	add("slow", "Never answers in time.", json.RawMessage(`{"type":"object"}`), nil)
	add("hidden_gem", "A deferred tool.", json.RawMessage(`{"type":"object"}`), func(json.RawMessage) (*mcp.CallToolResult, error) {
		return text("gem"), nil
	})
	add("limited", "A rate-limited tool.", json.RawMessage(`{"type":"object"}`), func(json.RawMessage) (*mcp.CallToolResult, error) {
		return text("ok"), nil
	})
	return serveMCP(t, s)
}

// oaNameRE is OpenAI's rule for function names.
var oaNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// validateOpenAITool checks one element of the tools array against
// OpenAI's function-calling rules.
func validateOpenAITool(raw json.RawMessage) error {
	var tool map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tool); err != nil {
		return fmt.Errorf("not an object: %v", err)
	}
	for k := range tool {
		if k != "type" && k != "function" {
			return fmt.Errorf("unknown member %q", k)
		}
	}
	if string(tool["type"]) != `"function"` {
		return fmt.Errorf(`type is %s, want "function"`, tool["type"])
	}
	var fn map[string]json.RawMessage
	if err := json.Unmarshal(tool["function"], &fn); err != nil {
		return fmt.Errorf("function: %v", err)
	}
	for k := range fn {
		if k != "name" && k != "description" && k != "parameters" && k != "strict" {
			return fmt.Errorf("function: unknown member %q", k)
		}
	}
	var name string
	if err := json.Unmarshal(fn["name"], &name); err != nil || !oaNameRE.MatchString(name) {
		return fmt.Errorf("function name %s does not match %s", fn["name"], oaNameRE)
	}
	if d, ok := fn["description"]; ok {
		var s string
		if err := json.Unmarshal(d, &s); err != nil {
			return fmt.Errorf("%s: description is not a string", name)
		}
	}
	var params map[string]any
	if err := json.Unmarshal(fn["parameters"], &params); err != nil {
		return fmt.Errorf("%s: parameters are not an object: %v", name, err)
	}
	if params["type"] != "object" {
		return fmt.Errorf(`%s: parameters type is %v, want "object"`, name, params["type"])
	}
	if _, ok := params["properties"].(map[string]any); !ok {
		return fmt.Errorf("%s: parameters have no properties object", name)
	}
	if path := findKey(params, "$schema", "parameters"); path != "" {
		return fmt.Errorf("%s: %s holds \"$schema\"", name, path)
	}
	return nil
}

// findKey returns the path of the first object member named key in v, or "".
func findKey(v any, key, path string) string {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if k == key {
				return path
			}
			if p := findKey(sub, key, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, sub := range v {
			if p := findKey(sub, key, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

func TestValidateOpenAIToolRejects(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"type":"function","function":{"name":"a.b","parameters":{"type":"object","properties":{}}}}`,
		`{"type":"function","function":{"name":"` + oaLongName + `","parameters":{"type":"object","properties":{}}}}`,
		`{"type":"function","function":{"name":"ok","parameters":{"type":"object","properties":{"x":{"$schema":"y"}}}}}`,
		`{"type":"function","function":{"name":"ok","parameters":{"type":"string","properties":{}}}}`,
		`{"type":"tool","function":{"name":"ok","parameters":{"type":"object","properties":{}}}}`,
	} {
		if validateOpenAITool(json.RawMessage(bad)) == nil {
			t.Errorf("the validator accepts %s", bad)
		}
	}
}

// oaDo sends one request to the API and decodes the JSON answer.
func oaDo(t *testing.T, method, url string, header http.Header, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if resp.StatusCode != http.StatusUnauthorized {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: %d, body %q is not JSON: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// oaTools fetches /v1/tools, validates every function and returns them by
// name.
func oaTools(t *testing.T, base string, header http.Header) map[string]map[string]any {
	t.Helper()
	code, _, body := oaDo(t, "GET", base+"/v1/tools", header, "")
	if code != http.StatusOK || body["object"] != "list" {
		t.Fatalf("GET /v1/tools: %d %v", code, body)
	}
	raw, _ := json.Marshal(body["data"])
	var data []json.RawMessage
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, d := range data {
		if err := validateOpenAITool(d); err != nil {
			t.Errorf("invalid OpenAI tool %s: %v", d, err)
			continue
		}
		var tool struct{ Function map[string]any }
		json.Unmarshal(d, &tool)
		name := tool.Function["name"].(string)
		if out[name] != nil {
			t.Errorf("function name %q twice", name)
		}
		out[name] = tool.Function
	}
	return out
}

func oaConfig(up, extra string) string {
	return fmt.Sprintf(`{"mcpServers": {"oa": {"url": %q}}, "max_body_bytes": 4096,
		"tool_rules": [{"tools": ["hidden_gem"], "visibility": "deferred"}, {"tools": ["slow"], "timeout": 0.3},
		               {"tools": ["limited"], "rate": {"rps": 0.001, "burst": 1}}]%s}`, up, extra)
}

func TestOpenAIToolsExport(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	url, _ := startGateway(t, oaConfig(openAIUpstream(t, &calls), ""), Options{})
	base := strings.TrimSuffix(url, "/mcp")
	tools := oaTools(t, base, nil)

	if tools["files_read"] == nil || tools["files_read"]["description"] != "Read a file." {
		t.Errorf("files.read not exported as files_read: %v", tools["files_read"])
	}
	var long string
	for name := range tools {
		if strings.HasPrefix(name, oaLongName[:40]) {
			long = name
		}
	}
	if len(long) == 0 || len(long) > 64 {
		t.Errorf("the long name is exported as %q", long)
	}
	params, _ := json.Marshal(tools["forecast"]["parameters"])
	if strings.Contains(string(params), "$schema") || strings.Contains(string(params), `"$id"`) || !strings.Contains(string(params), `"enum":["metric","imperial"]`) {
		t.Errorf("forecast parameters %s: want $schema and $id gone, the rest kept", params)
	}
	if tools["hidden_gem"] == nil {
		t.Error("a deferred tool is missing from /v1/tools")
	}
	for _, meta := range []string{toolSearchName, toolInvokeName} {
		if tools[meta] != nil {
			t.Errorf("the gateway's %s is exported", meta)
		}
	}
	if len(tools) != 9 {
		t.Errorf("%d tools exported, want the upstream's 9", len(tools))
	}
	if calls.Load() != 0 {
		t.Errorf("listing called tools")
	}
}

func TestOpenAIToolsCall(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	url, _ := startGateway(t, oaConfig(openAIUpstream(t, &calls), ""), Options{})
	base := strings.TrimSuffix(url, "/mcp")
	call := func(body string) (int, http.Header, map[string]any) {
		t.Helper()
		return oaDo(t, "POST", base+"/v1/tools/call", nil, body)
	}
	var long string
	for name := range oaTools(t, base, nil) {
		if strings.HasPrefix(name, oaLongName[:40]) {
			long = name
		}
	}

	t.Run("text", func(t *testing.T) {
		for _, name := range []string{"files_read", "files.read"} {
			code, _, res := call(`{"name":"` + name + `","arguments":{"path":"/etc/motd"}}`)
			if code != 200 || res["text"] != "line one of /etc/motd\nline two" || res["isError"] != false || res["content"] != nil {
				t.Errorf("%s: %d %v", name, code, res)
			}
		}
		// OpenAI's tool_calls carry the arguments as a JSON string.
		if code, _, res := call(`{"name":"files_read","arguments":"{\"path\":\"/x\"}"}`); code != 200 || res["text"] != "line one of /x\nline two" {
			t.Errorf("string arguments: %d %v", code, res)
		}
		if code, _, res := call(`{"name":"` + long + `"}`); code != 200 || res["text"] != "revenue" {
			t.Errorf("long name %s: %d %v", long, code, res)
		}
		if code, _, res := call(`{"name":"hidden_gem"}`); code != 200 || res["text"] != "gem" {
			t.Errorf("deferred tool: %d %v", code, res)
		}
	})
	t.Run("image", func(t *testing.T) {
		code, _, res := call(`{"name":"snapshot","arguments":{}}`)
		content, _ := res["content"].([]any)
		if code != 200 || res["text"] != "a picture" || len(content) != 1 {
			t.Fatalf("snapshot: %d %v", code, res)
		}
		img := content[0].(map[string]any)
		if img["type"] != "image" || img["mimeType"] != "image/png" || img["data"] != "iVBORw==" {
			t.Errorf("image item %v", img)
		}
	})
	t.Run("structured", func(t *testing.T) {
		code, _, res := call(`{"name":"forecast","arguments":{"city":"Berlin"}}`)
		sc, _ := res["structuredContent"].(map[string]any)
		if code != 200 || sc["temperature"] != 21.5 || sc["unit"] != "C" {
			t.Errorf("forecast: %d %v", code, res)
		}
	})
	t.Run("isError", func(t *testing.T) {
		if code, _, res := call(`{"name":"fail"}`); code != 200 || res["isError"] != true || res["text"] != "disk full" {
			t.Errorf("fail: %d %v", code, res)
		}
		// Refused by the chain (argument validation): a tool error too.
		before := calls.Load()
		code, _, res := call(`{"name":"files_read","arguments":{"path":7}}`)
		if code != 200 || res["isError"] != true || !strings.Contains(res["text"].(string), "invalid arguments") || calls.Load() != before {
			t.Errorf("invalid arguments: %d %v", code, res)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			method, path, body string
			code               int
			typ                string
		}{
			{"POST", "/v1/tools/call", `{"name":"nope"}`, 404, "not_found_error"},
			{"POST", "/v1/tools/call", `{"name":"tool_search","arguments":{"query":"x"}}`, 404, "not_found_error"},
			{"POST", "/v1/tools/call", `{"name":`, 400, "invalid_request_error"},
			{"POST", "/v1/tools/call", `[1,2]`, 400, "invalid_request_error"},
			{"POST", "/v1/tools/call", `{"arguments":{}}`, 400, "invalid_request_error"},
			{"POST", "/v1/tools/call", `{"name":"fail","arguments":[1]}`, 400, "invalid_request_error"},
			{"POST", "/v1/tools/call", `{"name":"fail","arguments":"not json"}`, 400, "invalid_request_error"},
			{"POST", "/v1/tools/call", `{"name":"files_read","arguments":{"path":"` + strings.Repeat("x", 5000) + `"}}`, 413, "invalid_request_error"},
			{"GET", "/v1/tools/call", ``, 405, "invalid_request_error"},
			{"POST", "/v1/tools", `{}`, 405, "invalid_request_error"},
			{"GET", "/v1/models", ``, 404, "not_found_error"},
			{"POST", "/v1/tools/call", `{"name":"rpcfail"}`, 502, "upstream_error"},
			{"POST", "/v1/tools/call", `{"name":"slow"}`, 504, "timeout_error"},
		} {
			code, _, res := oaDo(t, c.method, base+c.path, nil, c.body)
			e, _ := res["error"].(map[string]any)
			if code != c.code || e == nil || e["type"] != c.typ || e["message"] == "" {
				t.Errorf("%s %s %.60s: %d %v, want %d %s", c.method, c.path, c.body, code, res, c.code, c.typ)
			}
		}
	})
	t.Run("rate limit", func(t *testing.T) {
		if code, _, res := call(`{"name":"limited"}`); code != 200 {
			t.Fatalf("first call: %d %v", code, res)
		}
		code, h, res := call(`{"name":"limited"}`)
		if e, _ := res["error"].(map[string]any); code != 429 || e["type"] != "rate_limit_error" || h.Get("Retry-After") == "" {
			t.Errorf("second call: %d %v (Retry-After %q)", code, res, h.Get("Retry-After"))
		}
	})
}

// TestOpenAIConcurrentCalls: calls of many goroutines each get their own
// answer.
func TestOpenAIConcurrentCalls(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	url, _ := startGateway(t, oaConfig(openAIUpstream(t, &calls), ""), Options{})
	base := strings.TrimSuffix(url, "/mcp")
	errs := make(chan error, 40)
	for i := range 40 {
		go func() {
			path := fmt.Sprintf("/p%d", i)
			resp, err := http.Post(base+"/v1/tools/call", "application/json", strings.NewReader(`{"name":"files.read","arguments":{"path":"`+path+`"}}`))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"line one of `+path+`\nline two"`)) {
				errs <- fmt.Errorf("call %d: %d %s", i, resp.StatusCode, b)
				return
			}
			errs <- nil
		}()
	}
	for range 40 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := calls.Load(); n != 40 {
		t.Errorf("upstream answered %d calls, want 40", n)
	}
}

func TestOpenAIAuthAndAccess(t *testing.T) {
	t.Parallel()
	const aliceKey, bobKey = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef"
	var calls atomic.Int32
	url, _ := startGateway(t, oaConfig(openAIUpstream(t, &calls), fmt.Sprintf(`,
		"auth": {"mode": "api_key", "api_keys": [{"name": "alice", "key": %q}, {"name": "bob", "key": %q}]},
		"access": [{"identities": ["alice"]}, {"identities": ["bob"], "deny_tools": ["snapshot", "hidden_*"]}]`, aliceKey, bobKey)), Options{})
	base := strings.TrimSuffix(url, "/mcp")
	alice := http.Header{"Authorization": {"Bearer " + aliceKey}}
	bob := http.Header{"X-Api-Key": {bobKey}}

	for _, h := range []http.Header{nil, {"Authorization": {"Bearer wrong-key-0123456789abcdef"}}} {
		if code, _, _ := oaDo(t, "GET", base+"/v1/tools", h, ""); code != http.StatusUnauthorized {
			t.Errorf("GET /v1/tools with %v: %d, want 401", h, code)
		}
		if code, _, _ := oaDo(t, "POST", base+"/v1/tools/call", h, `{"name":"snapshot"}`); code != http.StatusUnauthorized {
			t.Errorf("POST /v1/tools/call with %v: %d, want 401", h, code)
		}
	}
	if calls.Load() != 0 {
		t.Fatal("an unauthenticated call reached the upstream")
	}

	at, bt := oaTools(t, base, alice), oaTools(t, base, bob)
	if at["snapshot"] == nil || at["hidden_gem"] == nil || len(at) != 9 {
		t.Errorf("alice's tools: %d, snapshot %v, hidden_gem %v", len(at), at["snapshot"] != nil, at["hidden_gem"] != nil)
	}
	if bt["snapshot"] != nil || bt["hidden_gem"] != nil || bt["files_read"] == nil || len(bt) != 7 {
		t.Errorf("bob's tools: %d, snapshot %v, hidden_gem %v", len(bt), bt["snapshot"] != nil, bt["hidden_gem"] != nil)
	}
	if code, _, res := oaDo(t, "POST", base+"/v1/tools/call", alice, `{"name":"snapshot"}`); code != 200 || res["text"] != "a picture" {
		t.Errorf("alice calls snapshot: %d %v", code, res)
	}
	before := calls.Load()
	for _, name := range []string{"snapshot", "hidden_gem"} {
		if code, _, res := oaDo(t, "POST", base+"/v1/tools/call", bob, `{"name":"`+name+`"}`); code != 404 {
			t.Errorf("bob calls %s: %d %v, want 404", name, code, res)
		}
	}
	if calls.Load() != before {
		t.Error("a denied call reached the upstream")
	}
	if code, _, res := oaDo(t, "POST", base+"/v1/tools/call", bob, `{"name":"files_read","arguments":{"path":"b"}}`); code != 200 || res["text"] != "line one of b\nline two" {
		t.Errorf("bob calls files_read: %d %v", code, res)
	}
}
