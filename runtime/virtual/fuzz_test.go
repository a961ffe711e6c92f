package virtual

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzArguments rewrites arbitrary arguments with the triage override:
// the result is refused with an ArgumentError, or it is a JSON object in
// which the fixed argument has its value, the default is present, the
// hidden argument absent, and every member the client sent is unchanged.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{"title":"x"}`, `{}`, ``, `null`, `{"repo":1}`, `{"labels":null,"a":{"b":[1,2]}}`, `[1]`, `"s"`, `{"a":1,"a":2}`, `{"\u0072epo":"x"}`} {
		f.Add(s)
	}
	s, err := Compile(triage())
	if err != nil {
		f.Fatal(err)
	}
	tool := s.overrides["github.create_issue"]
	f.Fuzz(func(t *testing.T, in string) {
		out, _, err := tool.Arguments(json.RawMessage(in))
		if err != nil {
			var ae *ArgumentError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v is not an ArgumentError", err)
			}
			return
		}
		var sent, got map[string]json.RawMessage
		if in != "" && in != "null" {
			if json.Unmarshal([]byte(in), &sent) != nil {
				t.Fatalf("accepted arguments that are not an object: %q", in)
			}
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("rewritten arguments %q are not an object: %v", out, err)
		}
		if string(got["repo"]) != `"acme/app"` {
			t.Errorf("repo = %s in %s", got["repo"], out)
		}
		if _, ok := got["assignee"]; ok {
			t.Errorf("hidden argument in %s", out)
		}
		if _, ok := got["labels"]; !ok {
			t.Errorf("no labels in %s", out)
		}
		for k, v := range sent {
			if k != "repo" && k != "assignee" && string(got[k]) != string(v) {
				t.Errorf("%s changed: %s → %s", k, v, got[k])
			}
		}
	})
}

// FuzzMatch checks the glob matcher against its definition on short
// inputs: it must not hang or panic, and "*" alone matches everything.
func FuzzMatch(f *testing.F) {
	f.Add("a*b", "aab")
	f.Add("**", "")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 64 || len(name) > 256 {
			return
		}
		m := match(pattern, name)
		if pattern == name && !m {
			t.Errorf("%q does not match itself", pattern)
		}
		if match("*"+pattern, "x"+name) != (m || match("*"+pattern, "x"+name)) {
			t.Errorf("inconsistent")
		}
	})
}
