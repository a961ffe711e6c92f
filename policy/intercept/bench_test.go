package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

var benchPayload = json.RawMessage(`{"name":"echo","arguments":{"message":"hello","note":"a note of some length to copy around"}}`)

func benchRun(b *testing.B, c *Chain) {
	b.Helper()
	ctx := context.Background()
	ev := Event{Event: "tools/call", Phase: Request, Payload: benchPayload, Context: &Context{SessionID: "s"}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Run(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChainGo: the executor's own cost with in-process Go
// interceptors: none, one validator, a mutator and two validators.
func BenchmarkChainGo(b *testing.B) {
	for _, n := range []int{0, 1, 3} {
		b.Run(fmt.Sprintf("interceptors=%d", n), func(b *testing.B) {
			var ms []Member
			for i := range n {
				ic := Interceptor(validator(fmt.Sprint("v", i), "forbidden", "tools/call"))
				if i == 0 && n > 1 {
					ic = replacer("m", "zzz", "y", "tools/call")
				}
				ms = append(ms, Member{Interceptor: ic})
			}
			c, err := NewChain(Options{}, ms...)
			if err != nil {
				b.Fatal(err)
			}
			benchRun(b, c)
		})
	}
}

// BenchmarkSlowValidators: four validators of 5 ms each cost about 5 ms,
// not 20 (they run concurrently).
func BenchmarkSlowValidators(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("validators=%d", n), func(b *testing.B) {
			var ms []Member
			for i := range n {
				ms = append(ms, Member{Interceptor: &Func{Desc: desc(fmt.Sprint("slow", i), Validation, "*"), Fn: func(ctx context.Context, _ *Invocation) (*Result, error) {
					time.Sleep(5 * time.Millisecond)
					return Pass(), nil
				}}})
			}
			c, err := NewChain(Options{}, ms...)
			if err != nil {
				b.Fatal(err)
			}
			benchRun(b, c)
		})
	}
}
