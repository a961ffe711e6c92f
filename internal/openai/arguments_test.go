package openai

import (
	"encoding/json"
	"reflect"
	"testing"
)

func FuzzObjectArguments(f *testing.F) {
	for _, s := range []string{``, `null`, ` {"a":1} `, `"{\"a\":1}"`, `""`, `"x"`, `[1]`, `1`, `{"a":`, `"\u007b}"`, `"{\"a\":\"\\\"\"}"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := ObjectArguments(json.RawMessage(s))
		if err != nil {
			if out != nil {
				t.Fatalf("%q: error %v with output %q", s, err, out)
			}
			return
		}
		if out == nil {
			return
		}
		var m map[string]any
		if !json.Valid(out) || json.Unmarshal(out, &m) != nil {
			t.Fatalf("%q: output %q is not a JSON object", s, out)
		}
		var direct map[string]any
		if json.Unmarshal([]byte(s), &direct) == nil && direct != nil {
			var got map[string]any
			json.Unmarshal(out, &got)
			if !reflect.DeepEqual(got, direct) {
				t.Fatalf("%q: object changed to %q", s, out)
			}
		}
	})
}
