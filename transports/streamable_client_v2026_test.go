package transports

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestMethodHeaders: a 2026-07-28 POST names its method, and the tool,
// prompt or resource it is about; responses get no such headers and the
// shared header map is not modified.
func TestMethodHeaders(t *testing.T) {
	t.Parallel()
	id, _ := jsonrpc.MakeID(float64(1))
	for _, tc := range []struct {
		name         string
		msg          jsonrpc.Message
		method, mcpN string
	}{
		{"tools/call", &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{}}`)}, "tools/call", "echo"},
		{"prompts/get", &jsonrpc.Request{ID: id, Method: "prompts/get", Params: json.RawMessage(`{"name":"greet"}`)}, "prompts/get", "greet"},
		{"resources/read", &jsonrpc.Request{ID: id, Method: "resources/read", Params: json.RawMessage(`{"uri":"test://doc"}`)}, "resources/read", "test://doc"},
		{"tasks/get", &jsonrpc.Request{ID: id, Method: "tasks/get", Params: json.RawMessage(`{"taskId":"t-1"}`)}, "tasks/get", "t-1"},
		{"tasks/cancel", &jsonrpc.Request{ID: id, Method: "tasks/cancel", Params: json.RawMessage(`{"taskId":"t-2"}`)}, "tasks/cancel", "t-2"},
		{"tools/list", &jsonrpc.Request{ID: id, Method: "tools/list"}, "tools/list", ""},
		{"notification", &jsonrpc.Request{Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":1}`)}, "notifications/cancelled", ""},
		{"response", &jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := http.Header{"Accept": {"application/json, text/event-stream"}}
			h := methodHeaders(shared, tc.msg)
			if got := h.Get(hdrMethod); got != tc.method {
				t.Errorf("Mcp-Method %q, want %q", got, tc.method)
			}
			if got := h.Get(hdrName); got != tc.mcpN {
				t.Errorf("Mcp-Name %q, want %q", got, tc.mcpN)
			}
			if len(shared) != 1 {
				t.Errorf("shared headers modified: %v", shared)
			}
		})
	}
}

// TestMethodHeadersParams: the Mcp-Param-* headers a request carries in
// Extra go on its POST unchanged; anything else in them does not.
func TestMethodHeadersParams(t *testing.T) {
	t.Parallel()
	id, _ := jsonrpc.MakeID(float64(1))
	req := &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`),
		Extra: ParamHeaders{"Mcp-Param-Region": {"eu-west"}, "Mcp-Param-X": {"a", "b"}, "Authorization": {"no"}}}
	shared := http.Header{"Accept": {"application/json, text/event-stream"}}
	h := methodHeaders(shared, req)
	if got := h.Values("Mcp-Param-Region"); len(got) != 1 || got[0] != "eu-west" {
		t.Errorf("Mcp-Param-Region %q", got)
	}
	if got := h.Values("Mcp-Param-X"); len(got) != 2 || got[1] != "b" {
		t.Errorf("Mcp-Param-X %q", got)
	}
	if h.Get("Authorization") != "" || len(shared) != 1 {
		t.Errorf("headers %v, shared %v", h, shared)
	}
}
