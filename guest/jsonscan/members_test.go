package jsonscan

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// stdMembers walks an object with encoding/json's Decoder, as the host
// packages did before they shared ObjectMembers.
func stdMembers(raw []byte) ([]KeyValue, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	out := []KeyValue{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out, false
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return out, false
		}
		out = append(out, KeyValue{tok.(string), val})
	}
	return out, true
}

func TestObjectMembers(t *testing.T) {
	tests := []struct {
		name, in string
		want     []KeyValue // nil: not an object
		err      bool
	}{
		{"members in order, duplicates kept", ` {"a": 1, "b\u0021" : [true], "a":"x"} `, []KeyValue{{"a", []byte("1")}, {"b!", []byte("[true]")}, {"a", []byte(`"x"`)}}, false},
		{"empty object", `{}`, []KeyValue{}, false},
		{"not an object", `[1]`, nil, true},
		{"empty input", ``, nil, true},
		{"malformed after one member", `{"a":1,"b":}`, []KeyValue{{"a", []byte("1")}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ObjectMembers([]byte(tc.in))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if (got == nil) != (tc.want == nil) || !slices.EqualFunc(got, tc.want, kvEqual) {
				t.Fatalf("members = %q, want %q", got, tc.want)
			}
		})
	}
	m, _ := ObjectMembers([]byte(`{"k":"caf\u00e9","n":2,"k":"last"}`))
	if s, ok := StringValue(Lookup(m, "k")); !ok || s != "last" {
		t.Errorf("Lookup k = %q %v, want the last member's string", s, ok)
	}
	if _, ok := StringValue(Lookup(m, "n")); ok {
		t.Error("StringValue of a number reported a string")
	}
	if Lookup(m, "missing") != nil {
		t.Error("Lookup of a missing key is not nil")
	}
	elems, err := ArrayElements([]byte(` [1, {"a":[]}, "s"] `))
	if err != nil || len(elems) != 3 || string(elems[1]) != `{"a":[]}` {
		t.Errorf("ArrayElements = %q, %v", elems, err)
	}
	if e, err := ArrayElements([]byte(`{}`)); e != nil || err == nil {
		t.Errorf("ArrayElements of an object = %q, %v", e, err)
	}
}

// FuzzObjectMembers checks ObjectMembers against encoding/json's Decoder
// on valid input: the same keys, decoded the same way, and the same raw
// values.
func FuzzObjectMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"\ud800x":"\u00e9","b":{"c":[1,2]}}`, "{\"\xff\":null}", `[1]`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ObjectMembers(data)
		if !json.Valid(data) {
			return
		}
		want, ok := stdMembers(data)
		if !ok { // valid JSON that is not an object
			if got != nil || err == nil {
				t.Fatalf("%q: not an object, ObjectMembers = %q, %v", data, got, err)
			}
			return
		}
		if err != nil || !slices.EqualFunc(got, want, kvEqual) {
			t.Fatalf("%q: ObjectMembers = %q, %v; encoding/json = %q", data, got, err, want)
		}
	})
}

func kvEqual(a, b KeyValue) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }
