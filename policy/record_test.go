package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// recorder collects what an engine records.
type recorder struct {
	mu   sync.Mutex
	recs []Recorded
}

func (r *recorder) record(rec Recorded) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

func (r *recorder) all() []Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Recorded(nil), r.recs...)
}

func TestRecorder(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	e, err := NewEngine(ctx, EngineConfig{Recorder: rec.record})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	// Every hook, and a configure export: all answer "no change".
	exports := map[string][]byte{"edge_configure": w.Packed(0, 0)}
	for h := Hook(0); h < numHooks; h++ {
		exports[h.export()] = w.Packed(0, 0)
	}
	m, err := e.Load(ctx, "recorded", w.PolicyModule(abi10, exports).Bytes(), ModuleOptions{MemoryMB: 4, Config: []byte(`{"k":"v"}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := rec.all(); len(got) != 0 {
		t.Fatalf("configure was recorded: %+v", got)
	}
	c, err := NewChain(Attachment{Module: m})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	client := Client{ID: "alice", Name: "cli"}
	if _, err := c.ToolCall(ctx, CallInput{Client: client, Server: "s", Tool: "t", Arguments: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ToolCall(ctx, CallInput{Server: "s", Tool: "u", Arguments: []byte(`{"b":"a much longer argument that overwrites the buffer"}`)}); err != nil {
		t.Fatal(err)
	}
	c.ToolResult(ctx, ResultInput{Client: client, Server: "s", Tool: "t", Arguments: []byte(`{"a":1}`), Result: textResult("hi")})
	c.ResourceResult(ctx, ResourceInput{Server: "s", URI: "file:///a", Result: []byte(`{"contents":[]}`)})
	c.PromptResult(ctx, PromptInput{Server: "s", Prompt: "p", Arguments: []byte(`{"lang":"go"}`), Result: []byte(`{"messages":[]}`)})
	c.ToolsList(ctx, client, []ToolEntry{{Server: "s", Name: "t", Tool: []byte(`{"name":"t"}`)}, {Server: "s", Name: "u"}})
	c.Event(ctx, Event{Kind: EventToolExecuted, Client: client, Server: "s", Tool: "t", Duration: 1500 * time.Microsecond, IsError: true, Error: "boom", Time: time.UnixMilli(1764417600000)})
	c.Event(ctx, Event{Kind: EventServerDisconnected, Server: "s", Error: "EOF"})

	got := rec.all()
	want := []struct {
		hook  Hook
		input string
	}{
		{HookToolCall, `{"client":{"id":"alice","name":"cli"},"server":"s","tool":"t","arguments":{"a":1}}`},
		{HookToolCall, `{"server":"s","tool":"u","arguments":{"b":"a much longer argument that overwrites the buffer"}}`},
		{HookToolResult, `{"client":{"id":"alice","name":"cli"},"server":"s","tool":"t","arguments":{"a":1},"result":{"content":[{"type":"text","text":"hi"}]}}`},
		{HookResourceResult, `{"server":"s","uri":"file:///a","result":{"contents":[]}}`},
		{HookPromptResult, `{"server":"s","prompt":"p","arguments":{"lang":"go"},"result":{"messages":[]}}`},
		{HookToolsList, `{"client":{"id":"alice","name":"cli"},"tools":[{"server":"s","name":"t","tool":{"name":"t"}},{"server":"s","name":"u","tool":{}}]}`},
		{HookEvent, `{"event":"tool_executed","client":{"id":"alice","name":"cli"},"server":"s","tool":"t","duration_ms":1.500,"is_error":true,"error":"boom","time_ms":1764417600000}`},
		{HookEvent, `{"event":"server_disconnected","server":"s","error":"EOF","time_ms":`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(got), len(want), got)
	}
	for i, wt := range want {
		r := got[i]
		if r.Module != "recorded" || r.Hook != wt.hook || !strings.HasPrefix(string(r.Input), wt.input) || r.Time.Before(start) || r.Time.After(time.Now()) {
			t.Errorf("record %d = %s %v %s at %v; want %v %s", i, r.Module, r.Hook, r.Input, r.Time, wt.hook, wt.input)
		}
	}

	// Every recorded input is a valid test vector input, and replaying it
	// hands the guest the very same bytes.
	for i, r := range got {
		if _, err := m.Decide(ctx, r.Hook, r.Input); err != nil {
			t.Fatalf("replaying record %d: %v", i, err)
		}
		all := rec.all()
		if replay := all[len(all)-1]; replay.Hook != r.Hook || string(replay.Input) != string(r.Input) {
			t.Errorf("record %d replayed as\n%s\nwant\n%s", i, replay.Input, r.Input)
		}
	}
}

func TestRedactInput(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"password", `{"user":"bob","password":"hunter2"}`, `{"user":"bob","password":"[REDACTED]"}`},
		{"key names in any case and nesting", `{"headers":{"Authorization":"Basic YWxhZGRpbjpvcGVu","X-Api-Key":"k1","Cookie":"s=1"},"db":{"passwd":"p","Client_Secret":"c","privateKey":"pk1","private_key":"pk2","key":"k"}}`,
			`{"headers":{"Authorization":"[REDACTED]","X-Api-Key":"[REDACTED]","Cookie":"[REDACTED]"},"db":{"passwd":"[REDACTED]","Client_Secret":"[REDACTED]","privateKey":"[REDACTED]","private_key":"[REDACTED]","key":"k"}}`},
		{"only string values", `{"max_tokens":100,"token":null,"secret":{"kind":"x"},"credentials":[{"user":"u"}]}`,
			`{"max_tokens":100,"token":null,"secret":{"kind":"x"},"credentials":[{"user":"u"}]}`},
		{"strings in an array under a sensitive key", `{"cookies":["a=1",["b=2"],3],"apikey":"k","list":["a=1"]}`,
			`{"cookies":["[REDACTED]",["[REDACTED]"],3],"apikey":"[REDACTED]","list":["a=1"]}`},
		{"escaped key", `{"pass\u0077ord":"x"}`, `{"pass\u0077ord":"[REDACTED]"}`},
		{"sk key in text", `{"q":"use sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234 now"}`, `{"q":"use [REDACTED] now"}`},
		{"bearer keeps its scheme", `{"h":"Authorization: Bearer abcdef0123456789abcdef.x_y"}`, `{"h":"Authorization: Bearer [REDACTED]"}`},
		{"JWT", `["session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end"]`, `["session [REDACTED] end"]`},
		{"AWS key id", `{"cfg":"aws_access_key_id=AKIAIOSFODNN7EXAMPLE\n"}`, `{"cfg":"aws_access_key_id=[REDACTED]\n"}`},
		{"GitHub tokens", `{"a":"ghp_0123456789abcdefghijABCDEFGHIJ012345","b":"x gho_0123456789abcdefghij0123 y","c":"github_pat_11ABCDEFG0123456789_abcdefghij"}`,
			`{"a":"[REDACTED]","b":"x [REDACTED] y","c":"[REDACTED]"}`},
		{"top-level string", `"ghp_0123456789abcdefghijABCDEFGHIJ012345"`, `"[REDACTED]"`},
		{"keys are never changed", `{"AKIAIOSFODNN7EXAMPLE":"v"}`, `{"AKIAIOSFODNN7EXAMPLE":"v"}`},
		{"innocent text", `{"q":"sk-learn docs; Bearer tokens are short; AKIA is a prefix; eyJ.x; ghp_ short"}`,
			`{"q":"sk-learn docs; Bearer tokens are short; AKIA is a prefix; eyJ.x; ghp_ short"}`},
		{"formatting kept", "{ \"password\" : \"x\" ,\n  \"n\" : 1.50, \"s\":\"\\u00e9\" }", "{ \"password\" : \"[REDACTED]\" ,\n  \"n\" : 1.50, \"s\":\"\\u00e9\" }"},
		{"a rewritten string is re-encoded", `{"q":"\u00e9 AKIAIOSFODNN7EXAMPLE \"x\""}`, `{"q":"é [REDACTED] \"x\""}`},
		{"invalid JSON", `{"password":"x"`, `{"password":"x"`},
		{"empty", ``, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactInput(json.RawMessage(tt.in))
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if again := RedactInput(got); string(again) != string(got) {
				t.Fatalf("not idempotent: %s", again)
			}
		})
	}
	// Unchanged input is returned as is, without a copy.
	in := json.RawMessage(`{"q":"nothing to see"}`)
	if out := RedactInput(in); &out[0] != &in[0] {
		t.Fatal("unchanged input was copied")
	}
}

func FuzzRedactInput(f *testing.F) {
	for _, s := range []string{
		`{"password":"x","n":[1,{"token":["a",{"b":"c"}]}]}`,
		`["Bearer Bearer abcdefghijklmnopqrstuvwxyz","sk-aaaaaaaaaaaaaaaaaaaaaaaa"]`,
		`{"a":"eyJa.eyJb.c AKIAIOSFODNN7EXAMPLE ghp_aaaaaaaaaaaaaaaaaaaaaaaaa"}`,
		`"\ud800 github_pat_aaaaaaaaaaaaaaaaaaaaaaaaaa"`,
		`{"pass\"word":"\\"}`,
		`{"x":"[REDACTED]"}`,
		`12`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := RedactInput(in)
		if !json.Valid(in) {
			if string(out) != string(in) {
				t.Fatalf("invalid input changed: %q -> %q", in, out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON: %q -> %q", in, out)
		}
		if again := RedactInput(out); string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
		var a, b any
		_ = json.Unmarshal(in, &a)
		_ = json.Unmarshal(out, &b)
		if (a == nil) != (b == nil) || fmt.Sprintf("%T", a) != fmt.Sprintf("%T", b) {
			t.Fatalf("shape changed: %q -> %q", in, out)
		}
	})
}

func ExampleRedactInput() {
	in := json.RawMessage(`{"server":"github","tool":"create_issue","arguments":{"title":"key AKIAIOSFODNN7EXAMPLE leaked","api_key":"k-123","count":2}}`)
	fmt.Println(string(RedactInput(in)))
	// Output:
	// {"server":"github","tool":"create_issue","arguments":{"title":"key [REDACTED] leaked","api_key":"[REDACTED]","count":2}}
}
