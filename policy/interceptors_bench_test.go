package policy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// BenchmarkWasmInterceptors: a tools/call request through a chain of Wasm
// interceptors: none (the executor alone), the cross-boundary guard (one
// validator), and guard + secretless redactor + redact-secrets' tool_call
// as an ABI 1.0 validator (three).
func BenchmarkWasmInterceptors(b *testing.B) {
	opts := ModuleOptions{PoolSize: 1, RecycleAfterCalls: -1}
	guard, err := loadBytes(b, "guard", w.Example(b, "cross-boundary-guard"), opts).Interceptors(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	redactor, err := loadBytes(b, "redactor", w.Example(b, "secretless-redactor"), opts).Interceptors(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	legacyRedact := load(b, "redact", ModuleOptions{}).LegacyInterceptors()[0] // redact/tool_call
	asm, err := loadBytes(b, "asm", interceptorModule(`{"interceptors":[{"name":"v","type":"validation","hooks":[{"events":["tools/call"],"phase":"request"}]}]}`, ""), ModuleOptions{MemoryMB: 4}).Interceptors(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	noop, err := loadBytes(b, "noop", w.Build(b, "policy/testdata/noop-validator"), opts).Interceptors(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		ics  []intercept.Interceptor
	}{
		{"none", nil},
		{"assembled-validator=1", asm},
		{"go-noop-validator=1", noop},
		{"abi10-tool_call=1", []intercept.Interceptor{legacyRedact}},
		{"redactor=1", redactor},
		{"validator=1", guard},
		{"interceptors=3", []intercept.Interceptor{guard[0], redactor[0], legacyRedact}},
	}
	payload := json.RawMessage(`{"name":"write_query","arguments":{"query":"INSERT INTO notes (body) VALUES ('hello, world')"}}`)
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var ms []intercept.Member
			for _, ic := range tc.ics {
				ms = append(ms, intercept.Member{Interceptor: ic})
			}
			c, err := intercept.NewChain(intercept.Options{}, ms...)
			if err != nil {
				b.Fatal(err)
			}
			ev := intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: payload, Context: &intercept.Context{SessionID: "s", Server: "db"}}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Run(ctx, ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
