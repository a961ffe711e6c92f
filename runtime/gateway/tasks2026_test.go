package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/tasks"
)

// extUpstream serves a go-sdk server (2026-07-28, stateless) that offers
// the tasks extension; its tool "slow" creates a task for a request that
// declares the extension. go-sdk v1.8.0 has no tasks, so tools/call of
// "slow" and tasks/* are answered in front of it, by hand, from a task
// table of its own; everything else is the SDK's. saw records the task
// ids its tasks/* requests named.
type extUpstream struct {
	mu    sync.Mutex
	tasks map[string]string // id → status
	saw   []string
	n     int
	// badNames are tasks/* requests whose Mcp-Name header did not name
	// their taskId (the extension requires it).
	badNames []string
}

func startExtUpstream(t *testing.T) (*extUpstream, string) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "ext", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Extensions: map[string]any{tasks.Extension: map[string]any{}}}})
	for _, name := range []string{"greet", "slow"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sync " + name}}}, nil, nil
		})
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	up := &extUpstream{tasks: map[string]string{}}
	return up, serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage
			Method string
			Params json.RawMessage
		}
		json.Unmarshal(body, &req)
		if id, ok := wire.String(req.Params, "taskId"); ok && r.Header.Get("Mcp-Name") != id {
			up.mu.Lock()
			up.badNames = append(up.badNames, req.Method+" Mcp-Name "+r.Header.Get("Mcp-Name")+" for "+id)
			up.mu.Unlock()
		}
		if result, rerr, ok := up.answer(req.Method, req.Params); ok {
			w.Header().Set("Content-Type", "application/json")
			if rerr != "" {
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":%s}`, req.ID, rerr)
				return
			}
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sdk.ServeHTTP(w, r)
	}))
}

// answer answers the task surface: a tools/call of "slow" from a client
// that declared the extension, and tasks/get, tasks/cancel.
func (up *extUpstream) answer(method string, params json.RawMessage) (result, rerr string, ok bool) {
	up.mu.Lock()
	defer up.mu.Unlock()
	id, _ := wire.String(params, "taskId")
	switch method {
	case "tools/call":
		meta, _, _ := wire.Field(params, "_meta")
		caps, _, _ := wire.Field(meta, metaClientCapabilities)
		_, v1, _ := wire.Field(params, "task")
		if name, _ := wire.String(params, "name"); name != "slow" || !v1 && !tasks.DeclaresExtension(caps) {
			return "", "", false
		}
		up.n++
		id = "up-" + strconv.Itoa(up.n)
		up.tasks[id] = "working"
		if v1 { // 2025-11-25: the client asked for a task
			return `{"task":{"taskId":"` + id + `","status":"working","ttl":60000}}`, "", true
		}
		return `{"resultType":"task","taskId":"` + id + `","status":"working","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:00Z","ttlMs":60000,"pollIntervalMs":100}`, "", true
	case "tasks/get", "tasks/cancel", "tasks/update", "tasks/result":
		up.saw = append(up.saw, id)
		status, known := up.tasks[id]
		if !known {
			return "", `{"code":-32602,"message":"unknown task"}`, true
		}
		if method == "tasks/cancel" {
			up.tasks[id] = "cancelled"
			return `{"resultType":"complete"}`, "", true
		}
		if method == "tasks/update" {
			return `{"resultType":"complete"}`, "", true
		}
		if method == "tasks/result" {
			return `{"content":[{"type":"text","text":"slow done, key ` + secretKey + `"}]}`, "", true
		}
		if status == "working" {
			up.tasks[id] = "completed" // done by the next look
		}
		res := `{"resultType":"complete","taskId":"` + id + `","status":"` + status + `"`
		if status == "completed" {
			res += `,"result":{"content":[{"type":"text","text":"slow done, key ` + secretKey + `"}],"isError":false}`
		}
		return res + "}", "", true
	}
	return "", "", false
}

// modernCall posts one 2026-07-28 request as the client holding key and
// returns the JSON-RPC response.
func modernCall(t *testing.T, url, key, method, params string, declare bool) (res json.RawMessage, code int64) {
	t.Helper()
	caps := `{}`
	if declare {
		caps = `{"extensions":{"` + tasks.Extension + `":{}}}`
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps +
		`,"io.modelcontextprotocol/clientInfo":{"name":"modern","version":"1"}}`
	params = strings.TrimSuffix(params, "}")
	if params != "{" {
		params += ","
	}
	h := bearer(key)
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", method)
	if name, ok := wire.String(json.RawMessage(params+meta+"}"), "name"); ok {
		h.Set("Mcp-Name", name)
	}
	if id, ok := wire.String(json.RawMessage(params+meta+"}"), "taskId"); ok && strings.HasPrefix(method, "tasks/") {
		h.Set("Mcp-Name", id)
	}
	resp := rawPost(t, url, h, `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":`+params+meta+`}}`)
	body, _ := io.ReadAll(resp.Body)
	if i := bytes.LastIndex(body, []byte("data:")); i >= 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body = bytes.TrimSpace(body[i+5:])
	}
	var m struct {
		Result json.RawMessage
		Error  *struct{ Code int64 }
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: HTTP %d %q: %v", method, resp.StatusCode, body, err)
	}
	if m.Error != nil {
		return nil, m.Error.Code
	}
	return m.Result, 0
}

// TestTasksExtension2026: a 2026-07-28 client that declares the tasks
// extension gets it in server/discover, has it declared upstream, gets a
// gateway task id from tools/call, and gets, cancels and updates its task
// through it; another client (another identity) replaying the id gets
// "unknown task"; tasks/list and tasks/result are not part of the
// extension (-32601); tasks/* without declaring it get -32021.
func TestTasksExtension2026(t *testing.T) {
	t.Parallel()
	up, upURL := startExtUpstream(t)
	const alice, bob = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef"
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"ext": {"url": %q}},
		"auth": {"mode": "api_key", "api_keys": [{"name": "alice", "key": %q}, {"name": "bob", "key": %q}]}}`, upURL, alice, bob), Options{})

	disc, _ := modernCall(t, url, alice, "server/discover", `{}`, true)
	caps := decodeInto[struct{ Capabilities map[string]json.RawMessage }](t, disc).Capabilities
	if _, ok, _ := wire.Field(caps["extensions"], tasks.Extension); !ok || caps["tasks"] != nil {
		t.Errorf("server/discover capabilities: %s; want extensions[%s] and no tasks", disc, tasks.Extension)
	}
	res, code := modernCall(t, url, alice, "tools/call", `{"name":"slow","arguments":{}}`, true)
	created := decodeInto[struct{ ResultType, TaskID string }](t, res)
	if code != 0 || created.ResultType != "task" || !strings.HasPrefix(created.TaskID, "edge-") {
		t.Fatalf("tools/call of a task tool: %s (%d); want resultType task and a gateway id", res, code)
	}
	id := `{"taskId":"` + created.TaskID + `"}`
	if res, code := modernCall(t, url, alice, "tools/call", `{"name":"slow","arguments":{}}`, false); code != 0 || strings.Contains(string(res), "taskId") {
		t.Errorf("tools/call without the extension: %s (%d); want a sync result", res, code)
	}
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		if _, code := modernCall(t, url, bob, m, id, true); code != -32602 {
			t.Errorf("bob's %s of alice's task: code %d, want -32602", m, code)
		}
		if _, code := modernCall(t, url, alice, m, id, false); code != bridge.CodeMissingCapability {
			t.Errorf("%s without declaring the extension: code %d, want %d", m, code, bridge.CodeMissingCapability)
		}
	}
	for _, m := range []string{"tasks/list", "tasks/result"} {
		if _, code := modernCall(t, url, alice, m, id, true); code != -32601 {
			t.Errorf("%s: code %d, want -32601", m, code)
		}
	}
	for _, want := range []string{"working", "completed"} {
		res, code := modernCall(t, url, alice, "tasks/get", id, true)
		got := decodeInto[struct{ TaskID, Status, ResultType string }](t, res)
		if code != 0 || got.TaskID != created.TaskID || got.Status != want || got.ResultType != "complete" {
			t.Errorf("tasks/get: %s (%d); want %s in status %s", res, code, created.TaskID, want)
		}
	}
	if res, code := modernCall(t, url, alice, "tasks/cancel", id, true); code != 0 || string(res) != `{"resultType":"complete"}` {
		t.Errorf("tasks/cancel: %s (%d)", res, code)
	}
	h := bearer(alice)
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tasks/get")
	h.Set("Mcp-Name", "edge-not-this-one")
	body := `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"` + created.TaskID + `","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"` + tasks.Extension + `":{}}}}}}`
	if resp := rawPost(t, url, h, body); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("tasks/get with an Mcp-Name header naming another task: HTTP %d, want 400 (HeaderMismatch)", resp.StatusCode)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.badNames) > 0 {
		t.Errorf("the upstream got tasks/* requests without their Mcp-Name: %v", up.badNames)
	}
	for _, s := range up.saw {
		if s != "up-1" {
			t.Errorf("the upstream was asked for task %q; only up-1 is alice's", s)
		}
	}
}

// TestTasksCapabilityFollowsUpstreams: with no upstream offering tasks the
// gateway offers none, to 2025 clients (initialize) nor to 2026-07-28
// clients (server/discover); with the TypeScript server-everything (its
// 2025-11-25 tasks) a 2025 client is offered tasks and a 2026-07-28 client
// is not (that server does not offer the extension).
func TestTasksCapabilityFollowsUpstreams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		url            func(t *testing.T) string
		v2025, v2026ok bool
	}{
		{"no tasks upstream", func(t *testing.T) string {
			url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, modernUpstream(t))), Options{})
			return url
		}, false, false},
		{"2025-11-25 tasks upstream", func(t *testing.T) string { return startTasksGateway(t, "") }, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url(t)
			c := &rawClient{t: t, url: url}
			init := must(t)(c.rpc("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`))
			caps := decodeInto[struct{ Capabilities map[string]json.RawMessage }](t, init).Capabilities
			if (caps["tasks"] != nil) != tc.v2025 {
				t.Errorf("initialize capabilities %s: tasks offered %v, want %v", init, caps["tasks"] != nil, tc.v2025)
			}
			disc, _ := modernCall(t, url, "", "server/discover", `{}`, true)
			caps = decodeInto[struct{ Capabilities map[string]json.RawMessage }](t, disc).Capabilities
			_, ext, _ := wire.Field(caps["extensions"], tasks.Extension)
			if ext != tc.v2026ok || caps["tasks"] != nil {
				t.Errorf("server/discover capabilities %s: extension offered %v, want %v; no tasks slot", disc, ext, tc.v2026ok)
			}
		})
	}
}

// TestTaskResultsPassPolicies: a task's result, fetched later (2025-11-25
// tasks/result; the extension's tasks/get inlines it), passes the result
// policies of the tool that created the task, as the tools/call result
// would have: the redact-secrets example masks the key in both.
func TestTaskResultsPassPolicies(t *testing.T) {
	t.Parallel()
	_, upURL := startExtUpstream(t)
	mod := writeModule(t, wasmtest.Example(t, "redact-secrets"))
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"ext": {"url": %q}},
		"policies": [{"name": "redact", "module": %q, "tools": ["*"], "config": {"replacement": "[REDACTED]"}}]}`, upURL, mod), policyOptions(t))
	check := func(how string, res json.RawMessage) {
		t.Helper()
		if strings.Contains(string(res), secretKey) || !strings.Contains(string(res), "slow done, key [REDACTED]") {
			t.Errorf("%s: %s; want the key redacted", how, res)
		}
	}

	c := newRawClient(t, url)
	created := decodeInto[struct{ Task taskStatus }](t, must(t)(c.rpc("tools/call", `{"name":"slow","arguments":{},"task":{"ttl":60000}}`)))
	check("2025-11-25 tasks/result", must(t)(c.rpc("tasks/result", `{"taskId":"`+created.Task.TaskID+`"}`)))

	res, _ := modernCall(t, url, "", "tools/call", `{"name":"slow","arguments":{}}`, true)
	id := `{"taskId":"` + decodeInto[taskStatus](t, res).TaskID + `"}`
	modernCall(t, url, "", "tasks/get", id, true) // working
	res, code := modernCall(t, url, "", "tasks/get", id, true)
	if code != 0 || decodeInto[taskStatus](t, res).Status != "completed" {
		t.Fatalf("tasks/get: %s (%d), want completed", res, code)
	}
	check("extension tasks/get", res)
}
