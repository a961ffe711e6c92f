package policy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

var loadKinds = []error{ErrCompile, ErrABIVersion, ErrMissingExport, ErrForbiddenImport, ErrInstantiate, ErrConfigure, ErrTestVector}

func TestLoadErrorStages(t *testing.T) {
	hook := map[string][]byte{"edge_hook_tool_call": w.Packed(0, 0)}
	withImport := func(im w.Import) func() []byte {
		return func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Imports = []w.Import{im}
			return a.Bytes()
		}
	}
	tests := []struct {
		name   string
		wasm   func() []byte
		opts   ModuleOptions
		kind   error
		detail string
	}{
		{"corrupt binary", func() []byte { return append(w.PolicyModule(abi10, hook).Bytes()[:20], 0xff, 0xff) }, ModuleOptions{}, ErrCompile, "compiling"},
		{"native code", func() []byte { return []byte("\x7fELF\x02\x01\x01\x00") }, ModuleOptions{}, ErrCompile, "not a WebAssembly 1.0 binary"},
		{"invalid function body", func() []byte {
			a := w.PolicyModule(abi10, map[string][]byte{"edge_hook_tool_call": w.I32Const(1)}) // i32 where i64 is due
			return a.Bytes()
		}, ModuleOptions{}, ErrCompile, "compiling"},
		{"ABI major 2", func() []byte { return w.PolicyModule(2<<16, hook).Bytes() }, ModuleOptions{}, ErrABIVersion, "speaks policy ABI 2.0; this gateway supports ABI 1.1"},
		{"newer ABI minor", func() []byte { return w.PolicyModule(1<<16|3, hook).Bytes() }, ModuleOptions{}, ErrABIVersion, "speaks policy ABI 1.3, newer"},
		{"no edge_alloc", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Funcs[1].Export = ""
			return a.Bytes()
		}, ModuleOptions{}, ErrMissingExport, "does not export edge_alloc (i32) -> (i32)"},
		{"hook with the wrong signature", func() []byte {
			a := w.PolicyModule(abi10, nil)
			a.Funcs = append(a.Funcs, w.Func{Results: w.SigI32, Body: w.I32Const(0), Export: "edge_hook_tool_result"})
			return a.Bytes()
		}, ModuleOptions{}, ErrMissingExport, "exports edge_hook_tool_result with signature () -> (i32), want (i32, i32) -> (i64)"},
		{"no memory", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.MemoryPages = 0
			return a.Bytes()
		}, ModuleOptions{}, ErrMissingExport, `does not export its memory as "memory"`},
		{"no hook", func() []byte { return w.PolicyModule(abi10, nil).Bytes() }, ModuleOptions{}, ErrMissingExport, "exports no hook"},
		{"edge_hooks reports none", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Funcs = append(a.Funcs, w.Func{Results: w.SigI32, Body: w.I32Const(1 << HookEvent), Export: "edge_hooks"})
			return a.Bytes()
		}, ModuleOptions{}, ErrMissingExport, "implements no hook"},
		{"network import", withImport(w.Import{Module: "env", Name: "http_get", Params: w.SigI32I32, Results: w.SigI32}), ModuleOptions{}, ErrForbiddenImport, "imports env.http_get, which policy modules may not import"},
		{"WASI socket", withImport(w.Import{Module: "wasi_snapshot_preview1", Name: "sock_accept", Params: []byte{w.I32, w.I32, w.I32}, Results: w.SigI32}), ModuleOptions{}, ErrForbiddenImport, "imports wasi_snapshot_preview1.sock_accept"},
		{"the host's meter", withImport(w.Import{Module: "edge_meter", Name: "tick"}), ModuleOptions{}, ErrForbiddenImport, "imports edge_meter.tick, which policy modules may not import"},
		{"_initialize traps", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Funcs = append(a.Funcs, w.Func{Body: []byte{w.OpUnreachable}, Export: "_initialize"})
			return a.Bytes()
		}, ModuleOptions{}, ErrInstantiate, "running _initialize"},
		{"configure rejects", func() []byte {
			return constOutput(w.PolicyModule(abi10, hook), "edge_configure", `{"error":"missing api_url"}`).Bytes()
		}, ModuleOptions{}, ErrConfigure, "configure rejected the config: missing api_url"},
		{"configure traps", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Funcs = append(a.Funcs, w.Func{Params: w.SigI32I32, Results: w.SigI64, Body: []byte{w.OpUnreachable}, Export: "edge_configure"})
			return a.Bytes()
		}, ModuleOptions{}, ErrConfigure, "configure: " + ErrTrap.Error()},
		{"config not an object", func() []byte { return w.PolicyModule(abi10, hook).Bytes() }, ModuleOptions{Config: []byte(`["a"]`)}, ErrConfigure, "config must be a JSON object"},
		{"option out of range", func() []byte { return w.PolicyModule(abi10, hook).Bytes() }, ModuleOptions{MemoryMB: 1}, nil, "memory_mb 1 out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts.MemoryMB == 0 {
				opts.MemoryMB = 4
			}
			before := testEngine.Instances()
			m, err := testEngine.Load(context.Background(), "bad", tt.wasm(), opts)
			if err == nil {
				m.Close()
				t.Fatal("Load succeeded")
			}
			var le *LoadError
			if !errors.As(err, &le) || le.Module != "bad" || le.Kind != tt.kind {
				t.Fatalf("error %#v: want a *LoadError for \"bad\" of kind %v", err, tt.kind)
			}
			for _, k := range loadKinds {
				if errors.Is(err, k) != (k == tt.kind) {
					t.Errorf("errors.Is(err, %v) = %v", k, !(k == tt.kind))
				}
			}
			if msg := err.Error(); !strings.HasPrefix(msg, `loading policy "bad": `) || !strings.Contains(msg, tt.detail) {
				t.Fatalf("error %q lacks %q", msg, tt.detail)
			}
			if got := testEngine.Instances(); got != before {
				t.Fatalf("%d instances left after a failed load", got-before)
			}
		})
	}
	t.Run("Go guest rejects its config", func(t *testing.T) {
		_, err := testEngine.Load(context.Background(), "router", guestWasm(t, "router"), ModuleOptions{Config: []byte(`{"colour":"blue"}`)})
		if !errors.Is(err, ErrConfigure) || !strings.Contains(err.Error(), "config: unknown key colour") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("closed engine", func(t *testing.T) {
		e, err := NewEngine(context.Background(), EngineConfig{})
		if err != nil {
			t.Fatal(err)
		}
		e.Close(context.Background())
		_, err = e.Load(context.Background(), "late", denyAllWasm(), ModuleOptions{MemoryMB: 4})
		var le *LoadError
		if !errors.Is(err, ErrClosed) || !errors.As(err, &le) || le.Kind != nil {
			t.Fatalf("err = %#v", err)
		}
	})
}

func FuzzCheckImports(f *testing.F) {
	f.Add(denyAllWasm())
	a := w.PolicyModule(abi10, map[string][]byte{"edge_hook_tool_call": w.Packed(0, 0)})
	a.Imports = []w.Import{{Module: "wasi_snapshot_preview1", Name: "fd_write", Params: []byte{w.I32, w.I32, w.I32, w.I32}, Results: w.SigI32}, {Module: "env", Name: "x"}}
	f.Add(a.Bytes())
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x80"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		err := checkImports(wasm)
		if err != nil && !errors.Is(err, ErrForbiddenImport) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}

func TestParseHook(t *testing.T) {
	for h := Hook(0); h < numHooks; h++ {
		if got, err := ParseHook(h.String()); err != nil || got != h {
			t.Errorf("ParseHook(%q) = %v, %v", h, got, err)
		}
	}
	if _, err := ParseHook("Tool_Call"); err == nil || !strings.Contains(err.Error(), "tool_call") {
		t.Errorf("unknown hook: %v", err)
	}
}

func TestParseTestVectors(t *testing.T) {
	good := `[
	  {"name":"deny delete","hook":"tool_call",
	   "input":{"client":{"id":"bob"},"server":"files","tool":"delete_all","arguments":{}},
	   "expect":{"action":"deny","reason":"not allowed"}},
	  {"name":"route eu","hook":"tool_call","input":{"arguments":{"region":"eu"},"tool":"search","server":"web"},
	   "expect":{"action":"route","server":"search-eu"}},
	  {"name":"redact","hook":"tool_result","input":{"server":"s","tool":"t","result":{"content":[]}},"expect":{"result":{"content":[]}}},
	  {"name":"hide all","hook":"tools_list","input":{"tools":[{"server":"s","name":"x","tool":{"name":"x"}}]},"expect":{"tools":[]}},
	  {"name":"fails","hook":"resource_result","input":{"server":"s","uri":"file:///x","result":{"contents":[]}},"expect":{"error":true,"reason":"trap"}},
	  {"name":"event","hook":"event","input":{"event":"server_connected","server":"s","time_ms":1},"expect":{}}
	]`
	vs, err := ParseTestVectors([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 6 || vs[0].Name != "deny delete" || vs[0].Expect.Reason != "not allowed" || vs[3].Expect.Tools == nil || len(vs[3].Expect.Tools) != 0 {
		t.Fatalf("vectors %+v", vs)
	}
	if vs, err := ParseTestVectors([]byte(" [] ")); err != nil || vs == nil || len(vs) != 0 {
		t.Fatalf("empty array: %v, %v", vs, err)
	}
	vec := func(hook, input, expect string) string {
		return `[{"name":"v","hook":"` + hook + `","input":` + input + `,"expect":` + expect + `}]`
	}
	call := `{"server":"s","tool":"t"}`
	bad := []struct {
		name, data, want string
	}{
		{"not an array", `{"name":"v"}`, "want a JSON array"},
		{"null", `null`, "want a JSON array"},
		{"trailing data", `[] []`, "unexpected data after the array"},
		{"unknown field", `[{"name":"v","hook":"tool_call","input":{"server":"s","tool":"t"},"expected":{}}]`, `unknown field "expected"`},
		{"unknown expect field", vec("tool_call", call, `{"decision":"deny"}`), `unknown field "decision"`},
		{"unknown hook", vec("tool_calls", call, `{}`), `unknown hook "tool_calls"`},
		{"no name", `[{"hook":"tool_call","input":{"server":"s","tool":"t"}}]`, "name is required"},
		{"duplicate name", `[` + strings.Trim(vec("tool_call", call, `{}`), "[]") + `,` + strings.Trim(vec("tool_call", call, `{}`), "[]") + `]`, `duplicate name "v"`},
		{"no input", `[{"name":"v","hook":"tool_call","input":null}]`, "input is required"},
		{"input not an object", vec("tool_call", `[1]`, `{}`), "tool_call input must be a JSON object"},
		{"unknown input member", vec("tool_call", `{"server":"s","tool":"t","argument":{}}`, `{}`), `unknown member "argument"`},
		{"input member case", vec("tool_call", `{"Server":"s","tool":"t"}`, `{}`), `unknown member "Server"`},
		{"input lacks tool", vec("tool_call", `{"server":"s"}`, `{}`), `lacks "tool"`},
		{"arguments not an object", vec("tool_call", `{"server":"s","tool":"t","arguments":"x"}`, `{}`), "arguments must be a JSON object"},
		{"client member", vec("tool_call", `{"client":{"id":"a","token":"x"},"server":"s","tool":"t"}`, `{}`), `client has unknown member "token"`},
		{"result missing", vec("tool_result", call, `{}`), `lacks "result"`},
		{"tools item", vec("tools_list", `{"tools":[{"server":"s"}]}`, `{}`), `tools item lacks "name"`},
		{"time_ms", vec("event", `{"event":"e","server":"s","time_ms":1.5}`, `{}`), "time_ms must be a non-negative integer"},
		{"bad action", vec("tool_call", call, `{"action":"rewrite"}`), `action "rewrite"`},
		{"action on a result hook", vec("tool_result", `{"server":"s","tool":"t","result":{}}`, `{"action":"allow"}`), "tool_call only"},
		{"result on tool_call", vec("tool_call", call, `{"result":{}}`), "result applies to"},
		{"tools on tool_call", vec("tool_call", call, `{"tools":["a"]}`), "tools applies to tools_list only"},
		{"error with action", vec("tool_call", call, `{"error":true,"action":"deny"}`), "takes only a reason"},
		{"reason with allow", vec("tool_call", call, `{"action":"allow","reason":"x"}`), "needs action deny"},
		{"server with deny", vec("tool_call", call, `{"action":"deny","server":"x"}`), "need action route"},
		{"arguments with deny", vec("tool_call", call, `{"action":"deny","arguments":{}}`), "no arguments"},
		{"arguments not an object", vec("tool_call", call, `{"arguments":[1]}`), "arguments must be a JSON object"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTestVectors([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func FuzzParseTestVectors(f *testing.F) {
	f.Add([]byte(`[{"name":"a","hook":"tool_call","input":{"client":{"id":"x"},"server":"s","tool":"t","arguments":{"q":1}},"expect":{"action":"allow","arguments":{"q":1}}}]`))
	f.Add([]byte(`[{"name":"b","hook":"tools_list","input":{"tools":[{"server":"s","name":"n","tool":{}}]},"expect":{"tools":[]}}]`))
	f.Add([]byte(`[{"name":"c","hook":"event","input":{"event":"tool_executed","server":"s","tool":"t","duration_ms":1.5,"is_error":true,"time_ms":5},"expect":{"error":true}}]`))
	f.Add([]byte(`[{"name":"d","hook":"prompt_result","input":{"server":"s","prompt":"p","result":{"messages":[]}},"expect":{"result":{"messages":[]}}}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		vs, err := ParseTestVectors(data)
		if err != nil {
			return
		}
		// What parses survives a round trip unchanged in meaning.
		again, err := json.Marshal(vs)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		vs2, err := ParseTestVectors(again)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", again, err)
		}
		if len(vs2) != len(vs) {
			t.Fatalf("%d vectors, then %d", len(vs), len(vs2))
		}
		for i := range vs {
			a, b := vs[i], vs2[i]
			if a.Name != b.Name || a.Hook != b.Hook || !jsonEqual(a.Input, b.Input) ||
				!jsonEqual(orNull(a.Expect.Arguments), orNull(b.Expect.Arguments)) || !jsonEqual(orNull(a.Expect.Result), orNull(b.Expect.Result)) ||
				(a.Expect.Tools == nil) != (b.Expect.Tools == nil) || strings.Join(a.Expect.Tools, "\x00") != strings.Join(b.Expect.Tools, "\x00") ||
				a.Expect.Action != b.Expect.Action || a.Expect.Reason != b.Expect.Reason || a.Expect.Error != b.Expect.Error {
				t.Fatalf("vector %d changed: %+v -> %+v", i, a, b)
			}
			hook, _ := ParseHook(a.Hook)
			in1, err1 := parseHookInput(hook, a.Input)
			in2, err2 := parseHookInput(hook, b.Input)
			if err1 != nil || err2 != nil {
				t.Fatalf("inputs: %v, %v", err1, err2)
			}
			if hook != HookEvent && string(in1.encoded) != string(in2.encoded) {
				t.Fatalf("encodings differ: %s vs %s", in1.encoded, in2.encoded)
			}
			if !json.Valid(in1.encoded) {
				t.Fatalf("encoded input is not JSON: %s", in1.encoded)
			}
		}
	})
}

func orNull(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}

func TestDecide(t *testing.T) {
	ctx := context.Background()
	deny := loadBytes(t, "deny-all", denyAllWasm(), ModuleOptions{MemoryMB: 4})
	redact := load(t, "redact", ModuleOptions{})
	router := load(t, "router", ModuleOptions{Config: []byte(routerConfig)})
	hostile := load(t, "gohostile", ModuleOptions{PoolSize: 1})
	tests := []struct {
		name  string
		m     *Module
		hook  Hook
		input string
		want  string
	}{
		{"deny", deny, HookToolCall, `{"server":"s","tool":"t"}`, `{"action":"deny","reason":"denied by a hand-assembled module"}`},
		{"allow unchanged", redact, HookToolCall, `{"server":"s","tool":"t","arguments":{"q":"hello"}}`, `{"action":"allow"}`},
		{"rewrite", redact, HookToolCall, `{"server":"s","tool":"t","arguments":{"q":"AKIAIOSFODNN7EXAMPLE"}}`, `{"action":"allow","arguments":{"q":"[REDACTED]"}}`},
		// Members out of order and pretty-printed: the guest still gets the
		// gateway's encoding (the Go SDK relies on arguments being last).
		{"route, members in any order", router, HookToolCall, "{\n  \"arguments\": {\"tier\": 2},\n  \"tool\": \"search\",\n  \"server\": \"web\",\n  \"client\": {\"id\": \"alice\"}\n}", `{"action":"route","server":"search-premium","tool":"search_v2"}`},
		{"tools_list", router, HookToolsList, `{"client":{"id":"intern-bob"},"tools":[{"server":"web","name":"search","tool":{"name":"search"}},{"server":"web","name":"fetch","tool":{"name":"fetch"}},{"server":"files","name":"read"}]}`,
			`{"tools":[{"server":"web","name":"search","exposed":"web_search"},{"server":"files","name":"read","exposed":"read_file"}]}`},
		{"result rewritten", redact, HookToolResult, `{"server":"s","tool":"t","result":{"content":[{"type":"text","text":"key AKIAIOSFODNN7EXAMPLE"}]}}`, `{"result":{"content":[{"type":"text","text":"key [REDACTED]"}]}}`},
		{"result unchanged", redact, HookResourceResult, `{"server":"s","uri":"file:///a","result":{ "contents": [] }}`, `{"result":{"contents":[]}}`},
		{"event", hostile, HookEvent, `{"event":"server_connected","server":"web","time_ms":1}`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := tt.m.Stats().Calls
			got, err := tt.m.Decide(ctx, tt.hook, json.RawMessage(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if n := tt.m.Stats().Calls; n != calls {
				t.Fatalf("Decide counted as a call (%d -> %d)", calls, n)
			}
		})
	}
	t.Run("the event reached the guest", func(t *testing.T) {
		if d := callTool(t, hostile, OnErrorDeny, "lastevent"); d.Reason != "server_connected|web|||false||false|true" {
			t.Fatalf("guest saw %q", d.Reason)
		}
	})
	failures := []struct {
		name  string
		m     *Module
		hook  Hook
		input string
		kind  error
		want  string
	}{
		{"guest error", hostile, HookToolResult, `{"server":"s","tool":"fail","result":{"content":[]}}`, ErrGuest, "tool_result refused on purpose"},
		{"bad shape", hostile, HookToolResult, `{"server":"s","tool":"badshape","result":{"content":[]}}`, ErrBadOutput, "content must be an array"},
		{"trap", hostile, HookToolCall, `{"server":"s","tool":"panic"}`, ErrTrap, ""},
		{"hook not implemented", deny, HookToolResult, `{"server":"s","tool":"t","result":{}}`, nil, `does not implement the tool_result hook (it implements tool_call)`},
		{"invalid input", deny, HookToolCall, `{"server":"s"}`, nil, `invalid input: tool_call input lacks "tool"`},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.m.Stats()
			_, err := tt.m.Decide(ctx, tt.hook, json.RawMessage(tt.input))
			if err == nil || (tt.kind != nil && !errors.Is(err, tt.kind)) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %v %q", err, tt.kind, tt.want)
			}
			if s := tt.m.Stats(); s.Failures != before.Failures || s.ConsecutiveFailures != before.ConsecutiveFailures {
				t.Fatalf("Decide counted a failure: %+v", s)
			}
		})
	}
}

// TestDecideAgreesWithChain runs the same calls through a chain and through
// Decide: the normalized decision must describe what the chain did.
func TestDecideAgreesWithChain(t *testing.T) {
	ctx := context.Background()
	m := load(t, "router", ModuleOptions{Config: []byte(routerConfig)})
	c := chainOf(t, OnErrorDeny, m)
	for _, in := range []CallInput{
		{Client: Client{ID: "alice"}, Server: "web", Tool: "search", Arguments: []byte(`{"region":"eu"}`)},
		{Client: Client{ID: "intern-x"}, Server: "web", Tool: "fetch"},
		{Client: Client{ID: "alice"}, Server: "web", Tool: "fetch"},
	} {
		d, err := c.ToolCall(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Decide(ctx, HookToolCall, encodeToolCall(nil, in.Client, in.Server, in.Tool, in.Arguments))
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Action, Reason, Server, Tool string }
		if err := json.Unmarshal(got, &v); err != nil {
			t.Fatal(err)
		}
		if v.Action != d.Action.String() || v.Reason != d.Reason || v.Server != d.Server || v.Tool != d.Tool {
			t.Errorf("%s: Decide %s, chain %+v", in.Tool, got, d)
		}
	}
}

const redactVectors = `[
  {"name":"aws key in arguments","hook":"tool_call",
   "input":{"server":"s","tool":"t","arguments":{"q":"key AKIAIOSFODNN7EXAMPLE","n":1}},
   "expect":{"action":"allow","arguments":{"n":1.0,"q":"key [REDACTED]"}}},
  {"name":"clean arguments pass","hook":"tool_call","input":{"server":"s","tool":"t","arguments":{"q":"hello"}},
   "expect":{"action":"allow","arguments":{"q":"hello"}}},
  {"name":"token in a result","hook":"tool_result",
   "input":{"server":"s","tool":"t","result":{"content":[{"type":"text","text":"t=ghp_0123456789abcdefghijABCDEFGHIJ012345"}],"isError":false}},
   "expect":{"result":{"isError":false,"content":[{"text":"t=[REDACTED]","type":"text"}]}}}
]`

func TestRunVectors(t *testing.T) {
	ctx := context.Background()
	vs, err := ParseTestVectors([]byte(redactVectors))
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, "redact", ModuleOptions{})
	if err := m.RunVectors(ctx, vs); err != nil {
		t.Fatal(err)
	}
	failing := []struct {
		name   string
		vector string
		want   []string
	}{
		{"arguments differ", `{"name":"expects no rewrite","hook":"tool_call","input":{"server":"s","tool":"t","arguments":{"q":"AKIAIOSFODNN7EXAMPLE"}},"expect":{"arguments":{"q":"AKIAIOSFODNN7EXAMPLE"}}}`,
			[]string{`"expects no rewrite" (tool_call)`, `arguments: expected {"q":"AKIAIOSFODNN7EXAMPLE"}, got {"q":"[REDACTED]"}`}},
		{"action differs", `{"name":"expects deny","hook":"tool_call","input":{"server":"s","tool":"t"},"expect":{"action":"deny","reason":"no"}}`,
			[]string{`"expects deny"`, `action: expected "deny", got "allow"`, `reason: expected a deny reason containing "no", got ""`, `(decision {"action":"allow"})`}},
		{"expects an error", `{"name":"expects failure","hook":"tool_call","input":{"server":"s","tool":"t"},"expect":{"error":true}}`,
			[]string{`"expects failure"`, `expected the hook to fail, got {"action":"allow"}`}},
		{"result differs", `{"name":"expects result","hook":"tool_result","input":{"server":"s","tool":"t","result":{"content":[]}},"expect":{"result":{"content":[],"isError":true}}}`,
			[]string{`"expects result" (tool_result)`, `result: expected {"content":[],"isError":true}, got {"content":[]}`}},
		{"hook not implemented", `{"name":"catalogue","hook":"tools_list","input":{"tools":[]},"expect":{}}`,
			[]string{`"catalogue"`, "does not implement the tools_list hook"}},
	}
	for _, tt := range failing {
		t.Run(tt.name, func(t *testing.T) {
			vs, err := ParseTestVectors([]byte("[" + tt.vector + "]"))
			if err != nil {
				t.Fatal(err)
			}
			err = m.RunVectors(ctx, vs)
			if !errors.Is(err, ErrTestVector) {
				t.Fatalf("err = %v", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
	t.Run("error vectors", func(t *testing.T) {
		hostile := load(t, "gohostile", ModuleOptions{PoolSize: 1})
		vs, err := ParseTestVectors([]byte(`[
			{"name":"refuses","hook":"tool_result","input":{"server":"s","tool":"fail","result":{"content":[]}},"expect":{"error":true,"reason":"refused on purpose"}},
			{"name":"wrong reason","hook":"tool_result","input":{"server":"s","tool":"fail","result":{"content":[]}},"expect":{"error":true,"reason":"timeout"}},
			{"name":"router tools","hook":"tool_call","input":{"server":"s","tool":"echo","arguments":{"a":[1,2]}},"expect":{"arguments":{"a":[1,2]}}}
		]`))
		if err != nil {
			t.Fatal(err)
		}
		err = hostile.RunVectors(context.Background(), vs)
		if err == nil || strings.Contains(err.Error(), `"refuses"`) || strings.Contains(err.Error(), `"router tools"`) ||
			!strings.Contains(err.Error(), `"wrong reason" (tool_result): expected an error containing "timeout"`) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	vs, err := ParseTestVectors([]byte(redactVectors))
	if err != nil {
		t.Fatal(err)
	}
	before := testEngine.Instances()
	m, err := testEngine.Verify(ctx, "redact-v2", guestWasm(t, "redact"), ModuleOptions{PoolSize: 2}, vs)
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.Instances != 2 || s.Name != "redact-v2" {
		t.Fatalf("stats %+v", s)
	}
	c := chainOf(t, OnErrorDeny, m)
	if d, err := c.ToolCall(ctx, CallInput{Server: "s", Tool: "t", Arguments: []byte(`{"k":"AKIAIOSFODNN7EXAMPLE"}`)}); err != nil || string(d.Arguments) != `{"k":"[REDACTED]"}` {
		t.Fatalf("verified module: %+v, %v", d, err)
	}
	m.Close()

	t.Run("failing vector", func(t *testing.T) {
		bad := append(vs[:1:1], TestVector{Name: "secrets stay", Hook: "tool_call",
			Input:  json.RawMessage(`{"server":"s","tool":"t","arguments":{"q":"AKIAIOSFODNN7EXAMPLE"}}`),
			Expect: Expectation{Action: "allow", Arguments: json.RawMessage(`{"q":"AKIAIOSFODNN7EXAMPLE"}`)}})
		m, err := testEngine.Verify(ctx, "redact-v3", guestWasm(t, "redact"), ModuleOptions{}, bad)
		var le *LoadError
		if m != nil || !errors.As(err, &le) || le.Kind != ErrTestVector || le.Module != "redact-v3" || !errors.Is(err, ErrTestVector) {
			t.Fatalf("Verify = %v, %#v", m, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, `verifying policy "redact-v3": `) || !strings.Contains(msg, `"secrets stay"`) ||
			!strings.Contains(msg, `expected {"q":"AKIAIOSFODNN7EXAMPLE"}, got {"q":"[REDACTED]"}`) || strings.Contains(msg, "aws key in arguments") {
			t.Fatalf("message %q", msg)
		}
		if got := testEngine.Instances(); got != before {
			t.Fatalf("%d instances left open by a failed Verify", got-before)
		}
	})
	t.Run("tool-router rejects its config", func(t *testing.T) {
		_, err := testEngine.Verify(ctx, "router", guestWasm(t, "router"), ModuleOptions{Config: []byte(`{"route":[{"tool":"search"}]}`)}, nil)
		var le *LoadError
		if !errors.As(err, &le) || le.Kind != ErrConfigure || !strings.Contains(err.Error(), "each route needs tool, argument, equals and server") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("tool-router vectors from a file", func(t *testing.T) {
		path := filepath.Join("testdata", "tool-router.vectors.json")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := ParseTestVectors(data)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		m, err := testEngine.Verify(ctx, "router", guestWasm(t, "router"), ModuleOptions{Config: []byte(routerConfig), PoolSize: 1}, vs)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
	})
	t.Run("canceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		m, err := testEngine.Load(cctx, "redact", guestWasm(t, "redact"), ModuleOptions{PoolSize: 1, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		cancel()
		if err := m.RunVectors(cctx, vs); !errors.Is(err, context.Canceled) || errors.Is(err, ErrTestVector) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestJSONEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":[true,null,"x"]}`, ` { "b" : [ true , null , "x" ] , "a" : 1 } `, true},
		{`1`, `1.0`, true},
		{`100`, `1e2`, true},
		{`-0.50`, `-5E-1`, true},
		{`0`, `-0.0`, true},
		{`12345678901234567890123`, `12345678901234567890124`, false},
		{`{"a":1}`, `{"a":1,"b":1}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`"a"`, `"\u0061"`, true},
		{`{"a":"1"}`, `{"a":1}`, false},
		{`{`, `{`, true},
		{`{`, `{}`, false},
		{``, `{}`, false},
	}
	for _, tt := range tests {
		if got := jsonEqual([]byte(tt.a), []byte(tt.b)); got != tt.want {
			t.Errorf("jsonEqual(%s, %s) = %v", tt.a, tt.b, got)
		}
		if got := jsonEqual([]byte(tt.b), []byte(tt.a)); got != tt.want {
			t.Errorf("jsonEqual(%s, %s) = %v", tt.b, tt.a, got)
		}
	}
}
