package interceptors

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// BenchmarkRemoteValidator: one validator hosted by an interceptor server
// over streamable HTTP on loopback, against the same validator in process.
func BenchmarkRemoteValidator(b *testing.B) {
	v := &intercept.Func{
		Desc: intercept.Descriptor{Name: "v", Type: intercept.Validation, Hooks: []intercept.Hook{{Events: []string{"tools/call"}, Phase: intercept.Request}}},
		Fn:   func(context.Context, *intercept.Invocation) (*intercept.Result, error) { return intercept.Pass(), nil },
	}
	reg, err := intercept.NewRegistry(0, v)
	if err != nil {
		b.Fatal(err)
	}
	url := serveRegistryB(b, reg)
	c, err := Dial(context.Background(), "bench", ServerOptions{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ics, _, err := c.Interceptors(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	payload := json.RawMessage(`{"name":"echo","arguments":{"message":"hello"}}`)
	for _, tc := range []struct {
		name string
		ic   intercept.Interceptor
	}{{"in-process", v}, {"remote", ics[0]}} {
		b.Run(tc.name, func(b *testing.B) {
			chain, err := intercept.NewChain(intercept.Options{}, intercept.Member{Interceptor: tc.ic})
			if err != nil {
				b.Fatal(err)
			}
			ev := intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: payload, Context: &intercept.Context{SessionID: "s"}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := chain.Run(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
