package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// extismPlugin hand-assembles an Extism plugin: imports from
// extism:host/env (function indices 0..), one page of memory and a
// tool_call export () -> i32 with body, which may use two i64 locals.
func extismPlugin(body []byte, imports ...w.Import) []byte {
	for i := range imports {
		imports[i].Module = extismModule
	}
	a := &w.Assembler{
		Imports:     imports,
		MemoryPages: 1,
		Funcs:       []w.Func{{Results: w.SigI32, Locals: []byte{w.I64, w.I64}, Body: body, Export: "tool_call"}},
	}
	return a.Bytes()
}

var (
	extAlloc  = w.Import{Name: "alloc", Params: []byte{w.I64}, Results: []byte{w.I64}}
	extVarSet = w.Import{Name: "var_set", Params: []byte{w.I64, w.I64}}
	extHTTP   = w.Import{Name: "http_request", Params: []byte{w.I64, w.I64}, Results: []byte{w.I64}}
)

// A plugin that calls a kernel function it may not, or imports one the
// adapter does not provide, gets an error naming the function and why.
func TestExtismRefusals(t *testing.T) {
	// var_set(alloc(8), alloc(4096)) past a 1 KiB var limit.
	varBody := w.Seq(
		w.I64Const(8), []byte{w.OpCall, 0, w.OpLocalSet, 0},
		w.I64Const(4096), []byte{w.OpCall, 0, w.OpLocalSet, 1},
		[]byte{w.OpLocalGet, 0, w.OpLocalGet, 1, w.OpCall, 1},
		w.I32Const(0),
	)
	httpBody := w.Seq(w.I64Const(0), w.I64Const(0), []byte{w.OpCall, 0, w.OpDrop}, w.I32Const(0))
	tests := []struct {
		name string
		wasm []byte
		want []string
	}{
		{"http_request without allowed_hosts", extismPlugin(httpBody, extHTTP),
			[]string{"extism:host/env.http_request", "no allowed_hosts"}},
		{"var past max_var_bytes", extismPlugin(varBody, extAlloc, extVarSet),
			[]string{"extism:host/env.var_set", "4096 bytes", "var limit of 1024 bytes (max_var_bytes)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := loadBytes(t, "plugin", tt.wasm, ModuleOptions{MemoryMB: 4, PoolSize: 1, MaxVarBytes: 1024})
			if m.Hooks() != 1<<HookToolCall {
				t.Fatalf("hooks = %v, want tool_call", m.Hooks())
			}
			_, err := m.call(context.Background(), HookToolCall, []byte(`{"server":"s","tool":"t","arguments":{}}`))
			if !errors.Is(err, ErrForbiddenCall) {
				t.Fatalf("call error = %v, want ErrForbiddenCall", err)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Fatalf("call error %q lacks %q", err, s)
				}
			}
		})
	}
	t.Run("unknown import", func(t *testing.T) {
		wasm := extismPlugin(w.I32Const(0), w.Import{Name: "fs_open", Params: []byte{w.I64}, Results: []byte{w.I64}})
		_, err := testEngine.Load(context.Background(), "plugin", wasm, ModuleOptions{MemoryMB: 4})
		if !errors.Is(err, ErrForbiddenImport) || !strings.Contains(err.Error(), "imports extism:host/env.fs_open, which the Extism adapter does not provide") {
			t.Fatalf("load error = %v", err)
		}
	})
	t.Run("wrong signature", func(t *testing.T) {
		wasm := extismPlugin(w.I32Const(0), w.Import{Name: "alloc", Params: []byte{w.I32}, Results: []byte{w.I32}})
		_, err := testEngine.Load(context.Background(), "plugin", wasm, ModuleOptions{MemoryMB: 4})
		if !errors.Is(err, ErrForbiddenImport) || !strings.Contains(err.Error(), "extism:host/env.alloc with signature (i32) -> (i32), want (i64) -> (i64)") {
			t.Fatalf("load error = %v", err)
		}
	})
}

// The redact-secrets Extism plugin (AssemblyScript PDK) reads its config
// through config_get: a replacement string and a disabled kind.
func TestExtismPluginConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Wasm module")
	}
	wasm := w.Port(t, "extism")
	m := loadBytes(t, "redact-extism", wasm, ModuleOptions{MemoryMB: 16, PoolSize: 1,
		Config: cfg(t, map[string]any{"replacement": `<"{kind}">`, "disable": []string{"email"}})})
	c := chainOf(t, OnErrorDeny, m)
	got, err := c.ToolResult(context.Background(), ResultInput{Server: "s", Tool: "t",
		Result: textResult("key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234 mail a@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if txt := texts(t, got); len(txt) != 1 || txt[0] != `key <"api_key"> mail a@example.com` {
		t.Fatalf("texts = %q", txt)
	}
}

// An Extism plugin runs under the limits of every module: a loop meets its
// deadline, a memory bomb its memory cap.
func TestExtismPluginLimits(t *testing.T) {
	tests := []struct {
		name string
		body []byte
		opts ModuleOptions
		want error
	}{
		{"loop", loopBody, ModuleOptions{MemoryMB: 4, PoolSize: 1, Timeout: 50 * time.Millisecond}, ErrTimeout},
		{"grow", growBody, ModuleOptions{MemoryMB: 4, PoolSize: 1}, ErrMemoryLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := loadBytes(t, "plugin", extismPlugin(tt.body, extAlloc), tt.opts)
			_, err := m.call(context.Background(), HookToolCall, []byte(`{"server":"s","tool":"t","arguments":{}}`))
			if !errors.Is(err, tt.want) {
				t.Fatalf("call error = %v, want %v", err, tt.want)
			}
		})
	}
}
