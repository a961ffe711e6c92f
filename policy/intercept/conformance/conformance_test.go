package conformance

import (
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":1,"a":[true,null,"x"]}`, `{"a":[true,null,"x"],"b":1}`},
		{`{"€":1,"\u00e9":2,"a":3}`, `{"a":3,"é":2,"€":1}`},
		{`[1.0, 1e21, 1e-7, -0.5, 100]`, `[1,1e+21,1e-7,-0.5,100]`},
		{`"\u0001\n\"\\/"`, `"\u0001\n\"\\/"`},
		{`{"\ud83d\ude00":1,"\ufb33":2}`, "{\"\U0001F600\":1,\"\uFB33\":2}"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Canonical([]byte(tt.in))
			if err != nil || got != tt.want {
				t.Fatalf("got %s (%v), want %s", got, err, tt.want)
			}
		})
	}
}

func TestScrub(t *testing.T) {
	got, err := Scrub([]byte(`{"a":{"durationMs":3,"b":[{"info":{}}]},"durationMs":1}`), []string{"durationMs", "info"})
	if err != nil || string(got) != `{"a":{"b":[{}]}}` {
		t.Fatalf("got %s, %v", got, err)
	}
}

func TestParseFixtureRejects(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bad id", `{"id":"other/x","steps":[{"op":"list","expect":{"canonical":"{}"}}]}`, "does not match"},
		{"no steps", `{"id":"protocol/x","steps":[]}`, "no steps"},
		{"unknown op", `{"id":"protocol/x","steps":[{"op":"dance"}]}`, "unknown op"},
		{"invoke without expectation", `{"id":"protocol/x","steps":[{"op":"invoke","params":{},"expect":{}}]}`, "one of"},
		{"apply without decision", `{"id":"protocol/x","steps":[{"op":"apply","event":"tools/call","expect":{}}]}`, "decision"},
		{"not json", `{`, "fixture"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func FuzzParseFixture(f *testing.F) {
	f.Add([]byte(`{"id":"protocol/x","steps":[{"op":"apply","event":"tools/call","phase":"request","payload":{},"context":null,"expect":{"decision":"allow"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fx, err := Parse(b)
		if err != nil {
			return
		}
		if len(fx.Steps) == 0 {
			t.Fatal("accepted a fixture without steps")
		}
	})
}

func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"b":[1,2.5e3,"x\u0000"],"a":{"c":null}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Canonical(b)
		if err != nil {
			return
		}
		// Canonical form is a fixed point.
		c2, err := Canonical([]byte(c))
		if err != nil || c2 != c {
			t.Fatalf("%s -> %s -> %s (%v)", b, c, c2, err)
		}
	})
}
