package jsonx

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestWalkers(t *testing.T) {
	doc := []byte(`{"a":"x\\\"y","b\u0021":[1,{"c":"}"},"]"],"d":null}`)
	var keys, vals []string
	if err := Members(doc, func(k, v []byte) error {
		s, err := Unquote(k)
		keys = append(keys, s)
		vals = append(vals, string(v))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != "a,b!,d" || vals[0] != `"x\\\"y"` || vals[1] != `[1,{"c":"}"},"]"]` {
		t.Fatalf("keys %q vals %q", keys, vals)
	}
	var elems []string
	_ = Elements([]byte(vals[1]), func(v []byte) error { elems = append(elems, string(v)); return nil })
	if strings.Join(elems, "|") != `1|{"c":"}"}|"]"` {
		t.Fatalf("elems %q", elems)
	}
	if !KeyIs([]byte(`"\u0061"`), "a") || KeyIs([]byte(`"a"`), "b") {
		t.Fatal("KeyIs")
	}
}

// FuzzValid checks Valid against encoding/json.Valid, and that the
// walkers never panic on what Valid accepts.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{}`, `[1,-2.5e+3,"a\"\\\u00e9",true,false,null]`, `{"a":{"b":[{}]}}`, `"\x01"`, `01`, `[1,]`, `{"a" 1}`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := Valid(b), json.Valid(b)
		if got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
		if !got {
			return
		}
		walk := func(v []byte) error { return nil }
		_ = Members(b, func(_, v []byte) error {
			_ = Elements(v, walk)
			return Members(v, func(_, _ []byte) error { return nil })
		})
		_ = Elements(b, walk)
	})
}
