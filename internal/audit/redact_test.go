package audit

import (
	"encoding/json"
	"regexp"
	"testing"
)

func TestRedactArguments(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"object", `{"a":"héllo","b":1.5e3,"c":true,"d":null}`, `{"a":"[string:5]","b":"[number]","c":"[bool]","d":null}`},
		{"key order kept", `{"z":1,"a":2}`, `{"z":"[number]","a":"[number]"}`},
		{"nested", `{"x":{"y":[1,"ab",[false,{}],[]]}}`, `{"x":{"y":["[number]","[string:2]",["[bool]",{}],[]]}}`},
		{"whitespace", " { \"k\" : [ 1 , 2 ] } ", `{"k":["[number]","[number]"]}`},
		{"escaped key", `{"a\"b\u00e9":"x"}`, `{"a\"bé":"[string:1]"}`},
		{"top-level string", `"secret"`, `"[string:6]"`},
		{"top-level null", `null`, `null`},
		{"huge number", `1e999`, `"[number]"`},
		{"empty", ``, `"[invalid json:0 bytes]"`},
		{"truncated", `{"a":`, `"[invalid json:5 bytes]"`},
		{"trailing data", `{} {}`, `"[invalid json:5 bytes]"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(RedactArguments(json.RawMessage(tt.in))); got != tt.want {
				t.Errorf("RedactArguments(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactSecrets(t *testing.T) {
	tests := []struct {
		name    string
		s       string
		secrets []string
		want    string
	}{
		{"none", "abc", nil, "abc"},
		{"empty secret ignored", "abc", []string{""}, "abc"},
		{"every occurrence", "tok tok", []string{"tok"}, "[REDACTED] [REDACTED]"},
		{"several", "user=alice pass=hunter2", []string{"alice", "hunter2"}, "user=[REDACTED] pass=[REDACTED]"},
		{"longest wins", "key=abcdef", []string{"abc", "abcdef"}, "key=[REDACTED]"},
		{"no partial leak", "xabcdefx", []string{"cd", "abcdef"}, "x[REDACTED]x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedactSecrets(tt.s, tt.secrets...); got != tt.want {
				t.Errorf("RedactSecrets(%q, %q) = %q, want %q", tt.s, tt.secrets, got, tt.want)
			}
		})
	}
}

var markerRE = regexp.MustCompile(`^\[(string:\d+|number|bool|invalid json:\d+ bytes)\]$`)

// checkLeaves fails unless every leaf of v is null or a redaction marker.
func checkLeaves(t *testing.T, v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			checkLeaves(t, e)
		}
	case []any:
		for _, e := range v {
			checkLeaves(t, e)
		}
	case nil:
	case string:
		if !markerRE.MatchString(v) {
			t.Fatalf("leaf %q survived redaction", v)
		}
	default:
		t.Fatalf("leaf %v (%T) survived redaction", v, v)
	}
}

// shape reduces a decoded JSON value to its structure: keys, array lengths
// and nulls.
func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range v {
			m[k] = shape(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = shape(e)
		}
		return s
	case nil:
		return nil
	default:
		return "leaf"
	}
}

func FuzzRedactArguments(f *testing.F) {
	for _, s := range []string{
		`{"a":"b","c":[1,true,null,{"d":"e"}]}`, `"x"`, `[]`, `{}`, `-0.5e-7`,
		`{"a":{"a":{"a":[[[]]]}}}`, `{"\u0000":"\ud800"}`, `{"a":1,"a":2}`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := RedactArguments(in)
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		checkLeaves(t, got)
		if !json.Valid(in) {
			return
		}
		var orig any
		if err := json.Unmarshal(in, &orig); err != nil {
			return // valid but not decodable by Unmarshal (e.g. 1e999)
		}
		a, _ := json.Marshal(shape(orig))
		b, _ := json.Marshal(shape(got))
		if string(a) != string(b) {
			t.Fatalf("shape changed:\n in  %s\n out %s", a, b)
		}
	})
}
