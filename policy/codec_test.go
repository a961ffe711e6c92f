package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEncodeInputs(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"tool_call", encodeToolCall(nil, Client{ID: "u\"1", Name: "cli"}, "srv", "t\n", nil),
			`{"client":{"id":"u\"1","name":"cli"},"server":"srv","tool":"t\n","arguments":{}}`},
		{"tool_call anonymous", encodeToolCall(nil, Client{}, "s", "t", json.RawMessage(`{"a":[1]}`)),
			`{"server":"s","tool":"t","arguments":{"a":[1]}}`},
		{"tool_result", encodeToolResult(nil, &ResultInput{Client: Client{Name: "n"}, Server: "s", Tool: "t", Arguments: json.RawMessage(`{"x":1}`)}, json.RawMessage(`{"content":[]}`)),
			`{"client":{"name":"n"},"server":"s","tool":"t","arguments":{"x":1},"result":{"content":[]}}`},
		{"resource_result", encodeResourceResult(nil, &ResourceInput{Server: "s", URI: "file:///a b"}, json.RawMessage(`{"contents":[]}`)),
			`{"server":"s","uri":"file:///a b","result":{"contents":[]}}`},
		{"prompt_result", encodePromptResult(nil, &PromptInput{Server: "s", Prompt: "p"}, json.RawMessage(`{"messages":[]}`)),
			`{"server":"s","prompt":"p","result":{"messages":[]}}`},
		{"tools_list", encodeToolsList(nil, Client{ID: "a"}, []ToolEntry{{Server: "s", Name: "x", Tool: json.RawMessage(`{"name":"x"}`)}, {Server: "s", Name: "y"}}, []int{1}),
			`{"client":{"id":"a"},"tools":[{"server":"s","name":"y","tool":{}}]}`},
		{"event", encodeEvent(nil, &Event{Kind: EventToolExecuted, Server: "s", Tool: "t", Duration: 1500 * time.Microsecond, Time: time.UnixMilli(42)}),
			`{"event":"tool_executed","server":"s","tool":"t","duration_ms":1.500,"is_error":false,"time_ms":42}`},
		{"invalid UTF-8 in names", encodeToolCall(nil, Client{ID: "\xff"}, "s", "t", nil),
			`{"client":{"id":"\ufffd"},"server":"s","tool":"t","arguments":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Fatalf("got  %s\nwant %s", tt.got, tt.want)
			}
			if !json.Valid(tt.got) {
				t.Fatal("not valid JSON")
			}
		})
	}
}

func TestDecodeDecision(t *testing.T) {
	tests := []struct {
		out     string
		want    callOutput
		wantErr string
	}{
		{``, callOutput{}, ""},
		{`{"action":"allow","arguments":{"ignored":1}}`, callOutput{}, ""},
		{`{"action":"deny"}`, callOutput{action: actionDeny, reason: "denied by policy"}, ""},
		{`{"action":"deny","reason":"no \u00e9"}`, callOutput{action: actionDeny, reason: "no é"}, ""},
		{`{"action":"rewrite","arguments":{"a":1}}`, callOutput{action: actionRewrite, arguments: json.RawMessage(`{"a":1}`)}, ""},
		{`{"action":"route","server":"x","tool":"y","require_approval":true}`, callOutput{action: actionRoute, server: "x", tool: "y", requireApproval: true}, ""},
		{`{"action":"rewrite"}`, callOutput{}, `"rewrite" needs an "arguments" object`},
		{`{"action":"rewrite","arguments":[1]}`, callOutput{}, "arguments must be a JSON object"},
		{`{"action":"route"}`, callOutput{}, `"route" needs a "server"`},
		{`{"action":"route","server":"x","tool":"bad tool"}`, callOutput{}, "not a valid tool name"},
		{`{"action":7}`, callOutput{}, "action must be a string"},
		{`{"reason":"x"}`, callOutput{}, `no "action"`},
		{`{"action":"allow","require_approval":"yes"}`, callOutput{}, "require_approval must be a boolean"},
	}
	for _, tt := range tests {
		got, err := decodeDecision([]byte(tt.out))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want %q", tt.out, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.action != tt.want.action || got.reason != tt.want.reason || got.server != tt.want.server ||
			got.tool != tt.want.tool || string(got.arguments) != string(tt.want.arguments) || got.requireApproval != tt.want.requireApproval {
			t.Errorf("%s: got %+v, %v; want %+v", tt.out, got, err, tt.want)
		}
	}
}

func TestResultShapes(t *testing.T) {
	tests := []struct {
		check func([]byte) error
		in    string
		ok    bool
	}{
		{checkToolResult, `{"content":[{"type":"text","text":"x"}],"structuredContent":{},"isError":true,"_meta":{}}`, true},
		{checkToolResult, `{}`, true},
		{checkToolResult, `{"content":"x"}`, false},
		{checkToolResult, `{"content":[{"text":"no type"}]}`, false},
		{checkToolResult, `{"content":[1]}`, false},
		{checkToolResult, `{"structuredContent":[1]}`, false},
		{checkToolResult, `{"isError":"no"}`, false},
		{checkToolResult, `[]`, false},
		{checkResourceResult, `{"contents":[{"uri":"a","text":"b"}]}`, true},
		{checkResourceResult, `{"contents":[{"text":"b"}]}`, false},
		{checkPromptResult, `{"messages":[{"role":"user","content":{"type":"text","text":"x"}}]}`, true},
		{checkPromptResult, `{"messages":[{"role":"user"}]}`, false},
		{checkPromptResult, `{"messages":[{"role":"user","content":"x"}]}`, false},
	}
	for _, tt := range tests {
		if err := tt.check([]byte(tt.in)); (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
	if _, err := decodeResult([]byte(`{"other":1}`), checkToolResult); err == nil {
		t.Error(`output without "result" accepted`)
	}
}

func TestValidateOutput(t *testing.T) {
	tests := []struct {
		out  string
		kind error
	}{
		{`{"action":"allow"}`, nil},
		{`{"error":"boom"}`, ErrGuest},
		{`{"error":{"code":1}}`, ErrGuest},
		{`{"action":`, ErrBadOutput},
		{`"string"`, ErrBadOutput},
		{"{\"a\":\"\xc3\x28\"}", ErrBadOutput},
	}
	for _, tt := range tests {
		kind, detail := validateOutput([]byte(tt.out))
		if kind != tt.kind || (kind != nil) != (detail != nil) {
			t.Errorf("%q: kind %v detail %v, want %v", tt.out, kind, detail, tt.kind)
		}
	}
}

func TestApplyPatch(t *testing.T) {
	desc, title := "new \"desc\"", "T"
	tests := []struct {
		tool  string
		patch toolPatch
		want  string
	}{
		{`{"name":"a","description":"old","x":[1,{"y":2}]}`, toolPatch{rename: "b", description: &desc},
			`{"name":"b","description":"new \"desc\"","x":[1,{"y":2}]}`},
		{`{"name":"a"}`, toolPatch{title: &title, annotations: json.RawMessage(`{"readOnlyHint":true}`)},
			`{"name":"a","title":"T","annotations":{"readOnlyHint":true}}`},
		{`{"name":"a","annotations":{"readOnlyHint":false,"x":1}}`, toolPatch{annotations: json.RawMessage(`{"readOnlyHint":true,"readOnlyHint":null,"z":"w"}`)},
			`{"name":"a","annotations":{"readOnlyHint":null,"x":1,"z":"w"}}`},
		{``, toolPatch{rename: "n"}, `{"name":"n"}`},
	}
	for _, tt := range tests {
		got, err := applyPatch(json.RawMessage(tt.tool), &tt.patch)
		if err != nil || string(got) != tt.want {
			t.Errorf("applyPatch(%s) = %s, %v\nwant %s", tt.tool, got, err, tt.want)
		}
	}
}

// FuzzGuestOutput feeds arbitrary bytes to the host-side validation and
// decoding of every hook's output, as a hostile guest could. It must never
// panic, and must yield either a usable value or an error of a known kind.
func FuzzGuestOutput(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"action":"allow"}`, `{"action":"deny","reason":"r"}`, `{"action":"rewrite","arguments":{"a":[1,2,{"b":null}]}}`,
		`{"action":"route","server":"s","tool":"t","arguments":{}}`, `{"error":"e"}`, `{"result":{"content":[{"type":"text","text":"x"}]}}`,
		`{"result":{"contents":[{"uri":"u"}]}}`, `{"result":{"messages":[{"role":"user","content":{}}]}}`,
		`{"tools":[{"server":"s","name":"n","rename":"m","annotations":{"x":1},"hide":false,"title":"t","description":"d"}]}`,
		`{"a":"\ud800"}`, `[`, `{"action":"deny","reason":"\u0000"}`, "{\"\\u0061ction\":\"deny\"}",
	} {
		f.Add([]byte(s))
	}
	tool := json.RawMessage(`{"name":"n","annotations":{"a":1}}`)
	f.Fuzz(func(t *testing.T, out []byte) {
		kind, detail := validateOutput(out)
		if kind != nil {
			if !errors.Is(kind, ErrBadOutput) && !errors.Is(kind, ErrGuest) || detail == nil {
				t.Fatalf("kind %v detail %v", kind, detail)
			}
			return
		}
		if d, err := decodeDecision(out); err == nil {
			if d.action > actionRoute {
				t.Fatalf("unknown action %d", d.action)
			}
			if d.arguments != nil && (!json.Valid(d.arguments) || d.arguments[0] != '{') {
				t.Fatalf("arguments %q", d.arguments)
			}
		}
		for _, check := range []func([]byte) error{checkToolResult, checkResourceResult, checkPromptResult} {
			if r, err := decodeResult(out, check); err == nil && r != nil && !json.Valid(r) {
				t.Fatalf("result %q is not JSON", r)
			}
		}
		patches, err := decodeToolsList(out)
		if err != nil {
			return
		}
		for i := range patches {
			p := &patches[i]
			if p.rename != "" && !validToolName(p.rename) {
				t.Fatalf("invalid rename %q accepted", p.rename)
			}
			got, err := applyPatch(tool, p)
			if err != nil || !json.Valid(got) {
				t.Fatalf("applyPatch(%+v) = %q, %v", p, got, err)
			}
		}
	})
}
