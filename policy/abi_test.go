package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

const abi10 = 1 << 16

// constOutput is a hook body returning a constant output placed at 2048.
func constOutput(a *w.Assembler, hook string, out string) *w.Assembler {
	a.Funcs = append(a.Funcs, w.Func{Params: w.SigI32I32, Results: w.SigI64, Body: w.Packed(2048, uint32(len(out))), Export: hook})
	a.Data = append(a.Data, w.Data{Offset: 2048, Bytes: []byte(out)})
	return a
}

// denyAllWasm is a policy module written without any SDK, by hand, in the
// WebAssembly binary format: it denies every tool call. It proves the ABI
// needs nothing Go-specific.
func denyAllWasm() []byte {
	a := w.PolicyModule(abi10, nil)
	return constOutput(a, "edge_hook_tool_call", `{"action":"deny","reason":"denied by a hand-assembled module"}`).Bytes()
}

func TestHandAssembledDenyAll(t *testing.T) {
	m := loadBytes(t, "deny-all", denyAllWasm(), ModuleOptions{MemoryMB: 4, Timeout: 5 * time.Second})
	if got := m.Hooks(); got != 1<<HookToolCall {
		t.Fatalf("hooks = %v, want tool_call only", got)
	}
	c := chainOf(t, OnErrorAllow, m)
	d, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: "anything", Arguments: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != Deny || d.Reason != "denied by a hand-assembled module" || d.Module != "deny-all" {
		t.Fatalf("decision = %+v", d)
	}
	// Hooks the module does not export are skipped without a call.
	res, err := c.ToolResult(context.Background(), ResultInput{Server: "s", Tool: "anything", Result: textResult("x")})
	if err != nil || string(res) != string(textResult("x")) {
		t.Fatalf("tool result = %s, %v", res, err)
	}
	if s := m.Stats(); s.Calls != 1 || s.Failures != 0 || s.ABIVersion != "1.0" || !strings.HasPrefix(s.Digest, "sha256:") {
		t.Fatalf("stats = %+v", s)
	}
}

func TestLoadRejects(t *testing.T) {
	hook := map[string][]byte{"edge_hook_tool_call": w.Packed(0, 0)}
	tests := []struct {
		name string
		wasm func() []byte
		want string
	}{
		{"wrong ABI major", func() []byte { return w.PolicyModule(2<<16, hook).Bytes() }, "speaks policy ABI 2.0; this gateway supports ABI 1.1"},
		{"newer ABI minor", func() []byte { return w.PolicyModule(1<<16|7, hook).Bytes() }, "speaks policy ABI 1.7, newer than this gateway's 1.1"},
		{"missing edge_alloc", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Funcs[1].Export = ""
			return a.Bytes()
		}, "does not export edge_alloc (i32) -> (i32)"},
		{"missing edge_abi_version", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Funcs[0].Export = ""
			return a.Bytes()
		}, "does not export edge_abi_version"},
		{"no memory", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.MemoryPages = 0
			return a.Bytes()
		}, `does not export its memory as "memory"`},
		{"no hooks", func() []byte { return w.PolicyModule(abi10, nil).Bytes() }, "exports no hook"},
		{"wrong hook signature", func() []byte {
			a := w.PolicyModule(abi10, nil)
			a.Funcs = append(a.Funcs, w.Func{Results: w.SigI32, Body: w.I32Const(0), Export: "edge_hook_tool_call"})
			return a.Bytes()
		}, "exports edge_hook_tool_call with signature () -> (i32), want (i32, i32) -> (i64)"},
		{"forbidden import", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Imports = []w.Import{{Module: "env", Name: "http_get", Params: w.SigI32I32, Results: w.SigI32}}
			return a.Bytes()
		}, "imports env.http_get, which policy modules may not import"},
		{"WASI function outside the allow list", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Imports = []w.Import{{Module: "wasi_snapshot_preview1", Name: "sock_accept", Params: []byte{w.I32, w.I32, w.I32}, Results: w.SigI32}}
			return a.Bytes()
		}, "imports wasi_snapshot_preview1.sock_accept"},
		{"command module", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Funcs = append(a.Funcs, w.Func{Export: "_start"})
			return a.Bytes()
		}, "exports _start (a WASI command); build it as a reactor"},
		{"edge_hooks reports none", func() []byte {
			a := w.PolicyModule(abi10, hook)
			a.Funcs = append(a.Funcs, w.Func{Results: w.SigI32, Body: w.I32Const(1 << HookEvent), Export: "edge_hooks"})
			return a.Bytes()
		}, "implements no hook"},
		{"configure rejects", func() []byte {
			a := w.PolicyModule(abi10, hook)
			return constOutput(a, "edge_configure", `{"error":"missing api_url"}`).Bytes()
		}, "configure rejected the config: missing api_url"},
		{"native code", func() []byte { return []byte("\x7fELF\x02\x01\x01\x00 precompiled native code") }, "not a WebAssembly 1.0 binary"},
		{"text format", func() []byte { return []byte(`(module (func (export "edge_alloc")))`) }, "not a WebAssembly 1.0 binary"},
		{"corrupt binary", func() []byte { return append(w.PolicyModule(abi10, hook).Bytes()[:20], 0xff, 0xff) }, "compiling"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := testEngine.Instances()
			m, err := testEngine.Load(context.Background(), "bad", tt.wasm(), ModuleOptions{MemoryMB: 4})
			if err == nil {
				m.Close()
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `policy "bad"`) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if got := testEngine.Instances(); got != before {
				t.Fatalf("instances %d after failed load, want %d", got, before)
			}
		})
	}
}

func TestLoadOptionErrors(t *testing.T) {
	wasm := denyAllWasm()
	tests := []struct {
		name string
		opts ModuleOptions
		want string
	}{
		{"memory too small", ModuleOptions{MemoryMB: 1}, "memory_mb 1 out of range"},
		{"config not object", ModuleOptions{Config: []byte(`[1]`)}, "config must be a JSON object"},
		{"config invalid", ModuleOptions{Config: []byte(`{`)}, "config must be a JSON object"},
		{"negative timeout", ModuleOptions{Timeout: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := testEngine.Load(context.Background(), "opts", wasm, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// hostileWAT builds a one-hook module whose tool_call does something bad.
func hostileWAT(body []byte, data ...w.Data) []byte {
	a := w.PolicyModule(abi10, map[string][]byte{"edge_hook_tool_call": body})
	a.Data = data
	return a.Bytes()
}

var (
	loopBody = []byte{w.OpLoop, w.OpBlockTypeVoid, w.OpBr, 0, w.OpEnd, w.OpUnreachable}
	// growBody grows memory a page at a time until memory.grow fails, then
	// traps.
	growBody = w.Seq(
		[]byte{w.OpBlock, w.OpBlockTypeVoid, w.OpLoop, w.OpBlockTypeVoid},
		w.I32Const(1), []byte{w.OpMemoryGrow, 0}, w.I32Const(-1), []byte{0x46 /* i32.eq */, w.OpBrIf, 1, w.OpBr, 0, w.OpEnd, w.OpEnd, w.OpUnreachable},
	)
)

func TestHostileHandAssembled(t *testing.T) {
	tests := []struct {
		name     string
		wasm     []byte
		opts     ModuleOptions
		kind     error
		detail   string
		recycled bool
	}{
		{"trap", hostileWAT([]byte{w.OpUnreachable}), ModuleOptions{}, ErrTrap, "unreachable", true},
		{"infinite loop", hostileWAT(loopBody), ModuleOptions{Timeout: 30 * time.Millisecond}, ErrTimeout, "", true},
		{"memory bomb", hostileWAT(growBody), ModuleOptions{}, ErrMemoryLimit, "", true},
		{"out-of-bounds output", hostileWAT(w.Packed(0xffff0000, 100)), ModuleOptions{}, ErrBadOutput, "outside guest memory", true},
		{"output past memory end", hostileWAT(w.Packed(65536-10, 100)), ModuleOptions{}, ErrBadOutput, "outside guest memory", true},
		{"oversized output", hostileWAT(w.Packed(0, 4096)), ModuleOptions{MaxOutput: 1024}, ErrOutputTooLarge, "4096 bytes, limit 1024", true},
		{"invalid JSON", hostileWAT(w.Packed(2048, 17), w.Data{Offset: 2048, Bytes: []byte("this is {not json")}), ModuleOptions{}, ErrBadOutput, "not valid JSON", true},
		{"invalid UTF-8", hostileWAT(w.Packed(2048, 6), w.Data{Offset: 2048, Bytes: []byte("{\"a\":\xff}")}), ModuleOptions{}, ErrBadOutput, "not valid JSON", true},
		{"not an object", hostileWAT(w.Packed(2048, 5), w.Data{Offset: 2048, Bytes: []byte("[1,2]")}), ModuleOptions{}, ErrBadOutput, "not a JSON object", true},
		{"unknown action", hostileWAT(w.Packed(2048, 19), w.Data{Offset: 2048, Bytes: []byte(`{"action":"launch"}`)}), ModuleOptions{}, ErrBadOutput, `unknown action "launch"`, false},
		{"guest error", hostileWAT(w.Packed(2048, 16), w.Data{Offset: 2048, Bytes: []byte(`{"error":"nope"}`)}), ModuleOptions{}, ErrGuest, "nope", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.MemoryMB = 4
			opts.PoolSize = 1
			if opts.Timeout == 0 {
				opts.Timeout = 5 * time.Second
			}
			m := loadBytes(t, "hostile", tt.wasm, opts)
			for _, onErr := range []OnError{OnErrorDeny, OnErrorAllow} {
				c := chainOf(t, onErr, m)
				d, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: "t"})
				if err != nil {
					t.Fatal(err)
				}
				if onErr == OnErrorAllow && (d.Action != Allow || d.Arguments != nil) {
					t.Fatalf("on_error allow: decision %+v", d)
				}
				if onErr == OnErrorDeny && (d.Action != Deny || !strings.Contains(d.Reason, `policy "hostile" failed (`+tt.kind.Error()+")")) {
					t.Fatalf("on_error deny: decision %+v", d)
				}
			}
			// The call (plus the decoding the chain does) returns the typed
			// error.
			out, err := m.call(context.Background(), HookToolCall, []byte(`{"server":"s","tool":"t","arguments":{}}`))
			if err == nil {
				if _, derr := decodeDecision(out); derr != nil {
					err = &CallError{Module: m.Name(), Hook: "tool_call", Kind: ErrBadOutput, Err: derr}
				}
			}
			if !errors.Is(err, tt.kind) {
				t.Fatalf("error %v is not %v", err, tt.kind)
			}
			var ce *CallError
			if !errors.As(err, &ce) || ce.Module != "hostile" || ce.Hook != "tool_call" {
				t.Fatalf("error %#v is not a CallError for hostile/tool_call", err)
			}
			if tt.detail != "" && !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("error %q lacks %q", err, tt.detail)
			}
			s := m.Stats()
			if s.Failures == 0 || s.LastError == "" {
				t.Fatalf("stats = %+v", s)
			}
			if tt.recycled != (s.Recycled > 0) {
				t.Fatalf("recycled = %d, want recycled=%v", s.Recycled, tt.recycled)
			}
			waitFor(t, "replacement instance", 5*time.Second, func() bool { return m.Stats().Instances == 1 })
		})
	}
}

func TestAllocOutOfBounds(t *testing.T) {
	a := w.PolicyModule(abi10, map[string][]byte{"edge_hook_tool_call": w.Packed(0, 0)})
	a.Funcs[1].Body = w.I32Const(-16)
	m := loadBytes(t, "bad-alloc", a.Bytes(), ModuleOptions{MemoryMB: 4, PoolSize: 1})
	_, err := m.call(context.Background(), HookToolCall, []byte(`{}`))
	if !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), "edge_alloc") {
		t.Fatalf("err = %v", err)
	}
}

func TestInputTooLarge(t *testing.T) {
	m := loadBytes(t, "small-input", denyAllWasm(), ModuleOptions{MemoryMB: 4, MaxInput: 64})
	c := chainOf(t, OnErrorDeny, m)
	d, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: "t", Arguments: []byte(`{"x":"` + strings.Repeat("a", 100) + `"}`)})
	if err != nil || d.Action != Deny || !strings.Contains(d.Reason, ErrInputTooLarge.Error()) {
		t.Fatalf("decision %+v, %v", d, err)
	}
	if m.Stats().Recycled != 0 {
		t.Fatal("an oversized input must not cost an instance")
	}
}

// TestCloseOnContextDoneMode runs the engine with wazero's own deadline
// enforcement instead of metering: a runaway guest is stopped, the
// instance replaced, and ordinary calls work.
func TestCloseOnContextDoneMode(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(ctx, EngineConfig{CloseOnContextDone: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	loop, err := e.Load(ctx, "loop", hostileWAT(loopBody), ModuleOptions{MemoryMB: 4, PoolSize: 1, Timeout: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer loop.Close()
	if _, err := loop.call(ctx, HookToolCall, []byte(`{}`)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("loop: %v", err)
	}
	deny, err := e.Load(ctx, "deny", denyAllWasm(), ModuleOptions{MemoryMB: 4, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer deny.Close()
	c, _ := NewChain(Attachment{Module: deny})
	if d, err := c.ToolCall(ctx, CallInput{Server: "s", Tool: "t"}); err != nil || d.Action != Deny {
		t.Fatalf("decision %+v, %v", d, err)
	}
	waitFor(t, "loop instance replaced", 5*time.Second, func() bool { return loop.Stats().Instances == 1 })
}
