package toolsearch

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestInvocation(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		tool         string // "": none named
		call, args   string // "": refused
		problem      string
	}{
		{"no name", `{"name":"tool_invoke","arguments":{}}`, "", "", "", `needs "name"`},
		{"object", `{"name":"tool_invoke","arguments":{"name":"echo","arguments":{"x":1}},"_meta":{"progressToken":3}}`,
			"echo", `{"name":"echo","arguments":{"x":1},"_meta":{"progressToken":3}}`, `{"x":1}`, ""},
		{"string holding an object", `{"arguments":{"name":"echo","arguments":"{\"x\":2}"}}`, "echo", `{"name":"echo","arguments":{"x":2}}`, `{"x":2}`, ""},
		{"no arguments", `{"arguments":{"name":"a\"b"}}`, `a"b`, `{"name":"a\"b"}`, "", ""},
		{"not an object", `{"arguments":{"name":"echo","arguments":[1]}}`, "echo", "", "", `the arguments of "echo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, problem := Invoked(json.RawMessage(tc.params))
			if name != tc.tool || (tc.tool == "" && !strings.Contains(problem, tc.problem)) {
				t.Fatalf("Invoked = %q, %q", name, problem)
			}
			if name == "" {
				return
			}
			call, args, problem := Invocation(json.RawMessage(tc.params), name)
			if string(call) != tc.call || string(args) != tc.args || (tc.problem != "" && !strings.Contains(problem, tc.problem)) {
				t.Fatalf("Invocation = %s, %s, %q; want %s, %s, %q", call, args, problem, tc.call, tc.args, tc.problem)
			}
		})
	}
}
