package tasks

import (
	"encoding/json"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// TestTaskIDRewrites: the task id is found and replaced where each shape
// of task result carries it, and nothing else changes.
func TestTaskIDRewrites(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		created        bool // Created finds "up" in it
	}{
		{"2025-11-25 CreateTaskResult", `{"task":{"taskId":"up","status":"working","ttl":60000},"x":1}`,
			`{"task":{"taskId":"gw","status":"working","ttl":60000},"x":1}`, true},
		{"extension CreateTaskResult", `{"resultType":"task","taskId":"up","status":"working","ttlMs":null}`,
			`{"resultType":"task","taskId":"gw","status":"working","ttlMs":null}`, true},
		{"tool result naming a taskId", `{"content":[{"type":"text","text":"\"taskId\""}],"taskId":"up"}`,
			`{"content":[{"type":"text","text":"\"taskId\""}],"taskId":"gw"}`, false},
		{"related-task _meta", `{"content":[],"_meta":{"a":1,"io.modelcontextprotocol/related-task":{"taskId":"up"}}}`,
			`{"content":[],"_meta":{"a":1,"io.modelcontextprotocol/related-task":{"taskId":"gw"}}}`, false},
		{"another task's id", `{"taskId":"other","status":"working"}`, `{"taskId":"other","status":"working"}`, false},
		{"not an object", `[1,2]`, `[1,2]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(RewriteID(json.RawMessage(tc.in), "up", "gw")); got != tc.want {
				t.Errorf("RewriteID:\n got %s\nwant %s", got, tc.want)
			}
			upID, _, ok := Created(json.RawMessage(tc.in))
			if ok != tc.created || ok && upID != "up" {
				t.Errorf("Created = %q, %v; want created %v", upID, ok, tc.created)
			}
		})
	}
}

// FuzzTaskResult feeds untrusted upstream results to the task decoders:
// they never panic, a rewrite keeps valid JSON valid, and an id found is
// the one the rewrite replaces.
func FuzzTaskResult(f *testing.F) {
	for _, s := range []string{`{"task":{"taskId":"a","ttl":1}}`, `{"resultType":"task","taskId":"a","ttlMs":5}`,
		`{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"a"}}}`, `{"task":[]}`, `{"taskId":1}`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		upID, _, ok := Created(data)
		out := RewriteID(data, upID, "gw")
		if wire.Valid(data) && !wire.Valid(out) {
			t.Fatalf("rewrite of valid %q is invalid: %q", data, out)
		}
		if ok {
			if id, _, _ := Created(out); id != "gw" {
				t.Fatalf("after the rewrite of %q the task id is %q", data, id)
			}
		}
	})
}
