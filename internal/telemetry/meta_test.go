package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// testSpanContext returns a sampled remote span context with the given W3C
// tracestate ("" for none).
func testSpanContext(t testing.TB, state string) trace.SpanContext {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}
	if state != "" {
		ts, err := trace.ParseTraceState(state)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TraceState = ts
	}
	return trace.NewSpanContext(cfg)
}

const wantTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestInjectMeta(t *testing.T) {
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), testSpanContext(t, ""))
	ctxState := trace.ContextWithRemoteSpanContext(context.Background(), testSpanContext(t, "vendor=abc"))
	tp := `"traceparent":"` + wantTraceparent + `"`
	tests := []struct {
		name   string
		ctx    context.Context
		params string
		want   string
	}{
		{"no span keeps params", context.Background(), `{"a": 1}`, `{"a": 1}`},
		{"nil params", ctx, ``, `{"_meta":{` + tp + `}}`},
		{"null params", ctx, ` null `, `{"_meta":{` + tp + `}}`},
		{"empty object", ctx, `{ }`, `{"_meta":{` + tp + `}}`},
		{"creates _meta, keeps values byte for byte", ctx,
			`{"name":"read","arguments":{"b": [1, 2.50],  "a":"\u00e9"}}`,
			`{"name":"read","arguments":{"b": [1, 2.50],  "a":"\u00e9"},"_meta":{` + tp + `}}`},
		{"keeps unknown _meta fields", ctx,
			`{"_meta":{"progressToken":7,"x.dev/y":{"z":[true]}},"name":"t"}`,
			`{"_meta":{"progressToken":7,"x.dev/y":{"z":[true]},` + tp + `},"name":"t"}`},
		{"replaces old trace context", ctx,
			`{"_meta":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01","tracestate":"old=1","k":1}}`,
			`{"_meta":{"k":1,` + tp + `}}`},
		{"adds tracestate", ctxState, `{"_meta":null}`, `{"_meta":{` + tp + `,"tracestate":"vendor=abc"}}`},
		{"escaped key spelling kept", ctx, `{"n\u0061me":"x"}`, `{"n\u0061me":"x","_meta":{` + tp + `}}`},
		{"array unchanged", ctx, `[1,2]`, `[1,2]`},
		{"invalid unchanged", ctx, `{"a":`, `{"a":`},
		{"trailing data unchanged", ctx, `{} {}`, `{} {}`},
		{"non-object _meta unchanged", ctx, `{"_meta":"x"}`, `{"_meta":"x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := InjectMeta(tt.ctx, json.RawMessage(tt.params))
			if string(got) != tt.want {
				t.Errorf("InjectMeta(%s)\n got %s\nwant %s", tt.params, got, tt.want)
			}
		})
	}
}

func TestExtractMeta(t *testing.T) {
	tests := []struct {
		name, params string
		valid        bool
		state        string
	}{
		{"traceparent", `{"_meta":{"traceparent":"` + wantTraceparent + `"}}`, true, ""},
		{"with tracestate", `{"_meta":{"tracestate":"a=b","traceparent":"` + wantTraceparent + `"}}`, true, "a=b"},
		{"no _meta", `{"name":"x"}`, false, ""},
		{"no params", ``, false, ""},
		{"_meta not object", `{"_meta":[1]}`, false, ""},
		{"traceparent not string", `{"_meta":{"traceparent":1}}`, false, ""},
		{"malformed traceparent", `{"_meta":{"traceparent":"00-zz-yy-01"}}`, false, ""},
		{"key is case sensitive", `{"_META":{"traceparent":"` + wantTraceparent + `"}}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := trace.SpanContextFromContext(ExtractMeta(context.Background(), json.RawMessage(tt.params)))
			if sc.IsValid() != tt.valid {
				t.Fatalf("valid = %v, want %v", sc.IsValid(), tt.valid)
			}
			if !tt.valid {
				return
			}
			if !sc.IsRemote() || !sc.IsSampled() || sc.TraceID() != testSpanContext(t, "").TraceID() {
				t.Errorf("span context = %+v", sc)
			}
			if got := sc.TraceState().String(); got != tt.state {
				t.Errorf("tracestate = %q, want %q", got, tt.state)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	want := testSpanContext(t, "k1=v1,k2=v2")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), want)
	out := InjectMeta(ctx, json.RawMessage(`{"name":"t","_meta":{"progressToken":"p"}}`))
	got := trace.SpanContextFromContext(ExtractMeta(context.Background(), out))
	if !got.Equal(want) {
		t.Fatalf("round trip = %+v, want %+v", got, want)
	}
}

func ExampleInjectMeta() {
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	fmt.Println(string(InjectMeta(ctx, json.RawMessage(`{"name":"read_file","_meta":{"progressToken":1}}`))))
	// Output: {"name":"read_file","_meta":{"progressToken":1,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
}

// withoutMeta decodes a JSON object and drops its "_meta" member.
func withoutMeta(data []byte) (map[string]any, map[string]any, bool) {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil || m == nil {
		return nil, nil, false
	}
	meta, _ := m["_meta"].(map[string]any)
	delete(m, "_meta")
	if meta != nil {
		delete(meta, "traceparent")
		delete(meta, "tracestate")
	}
	return m, meta, true
}

func FuzzInjectMeta(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"a":1}`, `{"_meta":{}}`, `{"_meta":null}`,
		`{"_meta":{"traceparent":"x","k":[1,{"y":null}]},"b":"\u2028"}`,
		`{"_meta":1}`, `{"a":{"_meta":{}}}`, `{"_meta":{},"_meta":{"k":1}}`, `{"a" : 1 , "b":[ ]}`,
	} {
		f.Add([]byte(s))
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), testSpanContext(f, "v=1"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := InjectMeta(ctx, in)
		trimmed := bytes.TrimSpace(in)
		isObject := len(trimmed) == 0 || string(trimmed) == "null" ||
			(json.Valid(in) && trimmed[0] == '{')
		if !isObject {
			if !bytes.Equal(out, in) {
				t.Fatalf("non-object params changed: %q -> %q", in, out)
			}
			return
		}
		if bytes.Equal(out, in) {
			// Only a non-object, non-null _meta blocks injection.
			if !strings.Contains(string(in), "_meta") {
				t.Fatalf("object params without _meta unchanged: %q", in)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q -> %q", in, out)
		}
		sc := trace.SpanContextFromContext(ExtractMeta(context.Background(), out))
		if !sc.Equal(testSpanContext(t, "v=1")) {
			t.Fatalf("extracted %+v from %q", sc, out)
		}
		if len(trimmed) == 0 || string(trimmed) == "null" {
			return
		}
		inRest, inMeta, ok1 := withoutMeta(in)
		outRest, outMeta, ok2 := withoutMeta(out)
		if !ok1 || !ok2 {
			return // valid JSON that encoding/json cannot hold in a map (e.g. 1e999)
		}
		if !reflect.DeepEqual(inRest, outRest) {
			t.Fatalf("members other than _meta changed: %q -> %q", in, out)
		}
		if len(inMeta) > 0 && !reflect.DeepEqual(inMeta, outMeta) {
			t.Fatalf("_meta members changed: %q -> %q", in, out)
		}
	})
}
