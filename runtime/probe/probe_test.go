package probe

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestStampMeta: the per-request _meta keys of a 2026-07-28 link are added
// to the params, replacing keys of the same name and keeping the others.
func TestStampMeta(t *testing.T) {
	keys := []Meta{{MetaProtocolVersion, json.RawMessage(`"2026-07-28"`)}}
	for _, tc := range []struct{ name, params, want string }{
		{"no params", ``, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`},
		{"null", `null`, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`},
		{"no _meta", `{"name":"t"}`, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"t"}`},
		{"other keys kept, same key replaced", `{"_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`,
			`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StampMeta(json.RawMessage(tc.params), keys)
			if err != nil || !jsonEqual(got, []byte(tc.want)) {
				t.Fatalf("StampMeta(%s) = %s, %v; want %s", tc.params, got, err, tc.want)
			}
		})
	}
	if _, err := StampMeta(json.RawMessage(`[1]`), keys); err == nil {
		t.Fatal("stampMeta of an array: no error")
	}
	// Lossless: the other members keep their bytes and their order.
	params := `{"name":"t","arguments":{"b":1,"a":2.50},"_meta":{"progressToken":7}}`
	want := `{"name":"t","arguments":{"b":1,"a":2.50},"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`
	if got, err := StampMeta(json.RawMessage(params), keys); err != nil || string(got) != want {
		t.Fatalf("StampMeta(%s) = %s, %v; want %s", params, got, err, want)
	}
}

// TestListenParams: subscriptions/listen asks for the list_changed
// notifications the server's capabilities announce, and nothing when none.
func TestListenParams(t *testing.T) {
	for _, tc := range []struct{ name, caps, want string }{
		{"none", `{"tools":{}}`, ""},
		{"tools and resources", `{"tools":{"listChanged":true},"prompts":{"listChanged":false},"resources":{"listChanged":true}}`,
			`{"notifications":{"toolsListChanged":true,"resourcesListChanged":true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var caps map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.caps), &caps); err != nil {
				t.Fatal(err)
			}
			got, ok := ListenParams(caps)
			if string(got) != tc.want || ok != (tc.want != "") {
				t.Fatalf("ListenParams(%s) = %s, %v; want %q", tc.caps, got, ok, tc.want)
			}
		})
	}
}

// TestRetryDiscover: only UnsupportedProtocolVersion naming 2026-07-28
// among the supported versions is retried.
func TestRetryDiscover(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"names 2026", &jsonrpc.Error{Code: codeUnsupportedVersion, Data: json.RawMessage(`{"supported":["2026-07-28"]}`)}, true},
		{"names others", &jsonrpc.Error{Code: codeUnsupportedVersion, Data: json.RawMessage(`{"supported":["2025-11-25"]}`)}, false},
		{"other code", &jsonrpc.Error{Code: -32601, Data: json.RawMessage(`{"supported":["2026-07-28"]}`)}, false},
		{"not an rpc error", errors.New("eof"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryDiscover(tc.err); got != tc.want {
				t.Fatalf("retryDiscover(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestBudget: the probe takes half the handshake's time, at most 10 s.
func TestBudget(t *testing.T) {
	if d := budget(context.Background()); d != 10*time.Second {
		t.Fatalf("no deadline: %s, want 10s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if d := budget(ctx); d > 2*time.Second || d < time.Second {
		t.Fatalf("4 s deadline: %s, want about 2s", d)
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct{ requested, want string }{
		{"2025-11-25", "2025-11-25"},
		{"2024-11-05", "2024-11-05"},
		{"2025-06-18", "2025-06-18"},
		{"2026-07-28", "2025-11-25"}, // not an initialize revision
		{"1999-01-01", "2025-11-25"},
		{"", "2025-11-25"},
	} {
		t.Run(tc.requested, func(t *testing.T) {
			if got := Negotiate(tc.requested); got != tc.want {
				t.Errorf("Negotiate(%q) = %q, want %q", tc.requested, got, tc.want)
			}
		})
	}
}
