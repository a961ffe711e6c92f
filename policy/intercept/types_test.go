package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseDescriptor(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // re-marshalled, or the error substring
		err      bool
	}{
		{name: "hooks list", in: `{"name":"a","type":"validation","hooks":[{"events":["tools/call"],"phase":"request"}]}`,
			want: `{"name":"a","type":"validation","hooks":[{"events":["tools/call"],"phase":"request"}]}`},
		{name: "SEP hook both", in: `{"name":"a","type":"mutation","hook":{"events":["*"],"phase":"both"},"mode":"enforce","priorityHint":-5}`,
			want: `{"name":"a","type":"mutation","hooks":[{"events":["*"],"phase":"request"},{"events":["*"],"phase":"response"}],"priorityHint":-5}`},
		{name: "audit and failOpen kept", in: `{"name":"a","type":"validation","hooks":[{"events":["x/y"],"phase":"response"}],"mode":"audit","failOpen":true,"priorityHint":{"request":1}}`,
			want: `{"name":"a","type":"validation","hooks":[{"events":["x/y"],"phase":"response"}],"mode":"audit","failOpen":true,"priorityHint":{"request":1,"response":0}}`},
		{name: "no name", in: `{"type":"validation","hooks":[{"events":["x"],"phase":"request"}]}`, want: "name", err: true},
		{name: "bad type", in: `{"name":"a","type":"validator","hooks":[{"events":["x"],"phase":"request"}]}`, want: "want validation or mutation", err: true},
		{name: "no hooks", in: `{"name":"a","type":"validation"}`, want: "no hooks", err: true},
		{name: "empty events", in: `{"name":"a","type":"validation","hooks":[{"events":[],"phase":"request"}]}`, want: "0 events", err: true},
		{name: "bad phase", in: `{"name":"a","type":"validation","hooks":[{"events":["x"],"phase":"sideways"}]}`, want: "sideways", err: true},
		{name: "bad mode", in: `{"name":"a","type":"validation","mode":"loud","hooks":[{"events":["x"],"phase":"request"}]}`, want: "loud", err: true},
		{name: "priority too big", in: `{"name":"a","type":"mutation","priorityHint":3e10,"hooks":[{"events":["x"],"phase":"request"}]}`, want: "32-bit", err: true},
		{name: "event with space", in: `{"name":"a","type":"validation","hooks":[{"events":["a b"],"phase":"request"}]}`, want: "printable", err: true},
		{name: "not an object", in: `[1]`, want: "descriptor", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseDescriptor([]byte(tt.in))
			if tt.err {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(d)
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParseResult(t *testing.T) {
	tests := []struct {
		name, in string
		typ      Type
		err      string
		blocks   bool
	}{
		{name: "pass", in: `{"valid":true}`, typ: Validation},
		{name: "deny", in: `{"interceptor":"x","type":"validation","valid":false,"severity":"error","messages":[{"message":"no","severity":"error"}]}`, typ: Validation, blocks: true},
		{name: "warn", in: `{"valid":false,"severity":"warn"}`, typ: Validation},
		{name: "nested reference SDK shape", in: `{"interceptor":"x","type":"validation","validation":{"valid":false,"severity":"error"}}`, typ: Validation, blocks: true},
		{name: "mutation", in: `{"modified":true,"payload":{"a":1}}`, typ: Mutation},
		{name: "mutation unmodified", in: `{"modified":false}`, typ: Mutation},
		{name: "wrong type", in: `{"type":"mutation","modified":true,"payload":{}}`, typ: Validation, err: `type "mutation"`},
		{name: "validation without valid", in: `{"type":"validation"}`, typ: Validation, err: `"valid"`},
		{name: "valid not a boolean", in: `{"valid":"yes"}`, typ: Validation, err: "right shape"},
		{name: "bad severity", in: `{"valid":false,"severity":"fatal"}`, typ: Validation, err: "fatal"},
		{name: "modified without payload", in: `{"modified":true}`, typ: Mutation, err: "without a payload"},
		{name: "garbage", in: `<html>`, typ: Mutation, err: "JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseResult([]byte(tt.in), tt.typ)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Blocks() != tt.blocks {
				t.Fatalf("blocks = %v", r.Blocks())
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	r, err := NewRegistry(0, validator("conf/v", "bad", "tools/call"), replacer("conf/m", "a", "A", "*"))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := json.Marshal(r.List("prompts/get"))
	if want := `{"interceptors":[{"name":"conf/m","type":"mutation","hooks":[{"events":["*"],"phase":"request"},{"events":["*"],"phase":"response"}]}]}`; string(list) != want {
		t.Fatalf("list = %s\nwant %s", list, want)
	}
	res, err := r.Invoke(context.Background(), &Invocation{Name: "conf/m", Event: "tools/call", Phase: Request, Payload: json.RawMessage(`{"b":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	res.DurationMs = 0
	if got, _ := json.Marshal(res); string(got) != `{"interceptor":"conf/m","type":"mutation","phase":"request","modified":false,"payload":{"b":1}}` {
		t.Fatalf("invoke = %s", got)
	}
	_, err = r.Invoke(context.Background(), &Invocation{Name: "nope", Event: "tools/call", Phase: Request})
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != CodeInvalidParams {
		t.Fatalf("err = %v, want -32602", err)
	}
}

func FuzzParseDescriptor(f *testing.F) {
	f.Add([]byte(`{"name":"a","type":"validation","hooks":[{"events":["tools/call"],"phase":"both"}],"priorityHint":{"request":-1}}`))
	f.Add([]byte(`{"name":"a","type":"mutation","hook":{"events":["*"],"phase":"request"},"mode":"audit"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDescriptor(b)
		if err != nil {
			return
		}
		// What parses re-encodes and parses to the same descriptor.
		enc, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := ParseDescriptor(enc)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", enc, err)
		}
		enc2, _ := json.Marshal(d2)
		if string(enc) != string(enc2) {
			t.Fatalf("not stable: %s vs %s", enc, enc2)
		}
		for _, h := range d.Hooks {
			if h.Phase != Request && h.Phase != Response {
				t.Fatalf("phase %q", h.Phase)
			}
		}
	})
}

func FuzzParseResult(f *testing.F) {
	f.Add([]byte(`{"valid":false,"severity":"error","messages":[{"message":"x","severity":"error"}]}`), true)
	f.Add([]byte(`{"modified":true,"payload":{"a":1}}`), false)
	f.Fuzz(func(t *testing.T, b []byte, validation bool) {
		typ := Mutation
		if validation {
			typ = Validation
		}
		r, err := ParseResult(b, typ)
		if err != nil {
			return
		}
		if r.Type != typ {
			t.Fatalf("type %q", r.Type)
		}
		if typ == Mutation && r.Modified && len(r.Payload) == 0 {
			t.Fatal("modified without payload")
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseInvocation(f *testing.F) {
	f.Add([]byte(`{"name":"a","event":"tools/call","phase":"request","payload":{},"context":{"sessionId":"s"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		inv, err := ParseInvocation(b)
		if err != nil {
			return
		}
		if inv.Name == "" || (inv.Phase != Request && inv.Phase != Response) || len(inv.Payload) == 0 {
			t.Fatalf("accepted %+v", inv)
		}
	})
}

func FuzzMatchEvent(f *testing.F) {
	f.Add("tools/*", "tools/call", true)
	f.Fuzz(func(t *testing.T, pattern, event string, req bool) {
		ph := Response
		if req {
			ph = Request
		}
		got := MatchEvent(pattern, event, ph)
		if pattern == event && !strings.HasPrefix(pattern, "*/") && !got {
			t.Fatalf("%q does not match itself", pattern)
		}
		if pattern == "*" && !got {
			t.Fatal("* must match everything")
		}
	})
}
