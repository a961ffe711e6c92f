package schema

import (
	"encoding/json"
	"testing"
)

func TestWithoutOptionalNulls(t *testing.T) {
	const sch = `{"type":"object","properties":{"region":{"type":"string"},"verbose":{"type":"boolean"}},"required":["region"]}`
	for _, tc := range []struct {
		name, args, want string
		valid            bool // the result against sch
	}{
		{"optional null is absent", `{"region":"us","verbose":null}`, `{"region":"us"}`, true},
		{"required null stays", `{"region":null}`, `{"region":null}`, false},
		{"no null: the same bytes", `{"region":"us","verbose":true}`, `{"region":"us","verbose":true}`, true},
		{"a string \"null\" is no null", `{"region":"null"}`, `{"region":"null"}`, true},
		{"nested nulls stay", `{"region":"us","verbose":{"x":null}}`, `{"region":"us","verbose":{"x":null}}`, false},
		{"not an object", `null`, `null`, false},
		{"wrong type still refused", `{"region":"us","verbose":"yes"}`, `{"region":"us","verbose":"yes"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := WithoutOptionalNulls([]byte(sch), []byte(tc.args))
			if !jsonEqual(t, string(got), tc.want) {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			err := NewValidator(0).Validate(json.RawMessage(sch), got)
			if (err == nil) != tc.valid {
				t.Fatalf("validating %s: %v, want valid %v", got, err, tc.valid)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func FuzzWithoutOptionalNulls(f *testing.F) {
	f.Add([]byte(`{"required":["a"]}`), []byte(`{"a":null,"b":null,"c":1}`))
	f.Add([]byte(`{}`), []byte(`[null]`))
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		out := WithoutOptionalNulls(schema, args)
		if json.Valid(args) && !json.Valid(out) {
			t.Fatalf("valid %q became invalid %q", args, out)
		}
	})
}
