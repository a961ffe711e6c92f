package jsonlite

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScan(t *testing.T) {
	doc := []byte(` {"a" : 1, "b\u0021":[true,null,"x\"y"], "c":{"d":-1.5e3}} `)
	var keys []string
	var vals []string
	if err := Members(doc, func(k, v []byte) bool {
		keys = append(keys, string(k))
		vals = append(vals, string(v))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != "a,b!,c" || vals[1] != `[true,null,"x\"y"]` || vals[2] != `{"d":-1.5e3}` {
		t.Fatalf("keys %q vals %q", keys, vals)
	}
	var elems []string
	if err := Elements([]byte(vals[1]), func(v []byte) bool { elems = append(elems, string(v)); return true }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(elems, "|") != `true|null|"x\"y"` {
		t.Fatalf("elems %q", elems)
	}
	if v, ok := Lookup(doc, "c"); !ok || string(v) != `{"d":-1.5e3}` {
		t.Fatalf("Lookup = %q %v", v, ok)
	}
	if _, ok := Lookup(doc, "zz"); ok {
		t.Fatal("Lookup found a missing key")
	}
	for _, bad := range []string{``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `"\x01"`, `"\q"`, `01`, `1.`, `-`, `tru`, `{"a":1} x`, `"\ud800"x`} {
		if Valid([]byte(bad)) {
			t.Errorf("Valid(%q) = true", bad)
		}
	}
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	if _, err := SkipValue([]byte(deep), 0); !errors.Is(err, ErrSyntax) {
		t.Fatalf("deep nesting: %v", err)
	}
}

func TestUnquoteAndAppendString(t *testing.T) {
	tests := []struct{ lit, want string }{
		{`"plain"`, "plain"},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t"},
		{`"\u00e9\ud83c\udf89"`, "é🎉"},
		{`"\ud800x"`, "\ufffdx"},
	}
	for _, tt := range tests {
		got, err := Unquote([]byte(tt.lit))
		if err != nil || got != tt.want {
			t.Errorf("Unquote(%s) = %q, %v; want %q", tt.lit, got, err, tt.want)
		}
	}
	for _, s := range []string{"", "a\"b\\c\n\x01\u2028é🎉", "\xff\xfe"} {
		enc := AppendString(nil, s)
		if !json.Valid(enc) || string(AppendBytes(nil, []byte(s))) != string(enc) {
			t.Fatalf("AppendString(%q) = %s", s, enc)
		}
		var back string
		_ = json.Unmarshal(enc, &back)
		if utf8.ValidString(s) && back != s {
			t.Fatalf("round trip of %q gave %q", s, back)
		}
	}
}

func TestValue(t *testing.T) {
	v, err := Parse([]byte(`{"a":[1,"two",{"three":true}],"b":null,"a":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Get("a").Len() != 3 || v.Get("a").Elems()[1].Str() != "two" || !v.Get("a").Elems()[2].Get("three").Truthy() {
		t.Fatal("accessors")
	}
	if n, ok := v.Get("a").Elems()[0].Int(); !ok || n != 1 {
		t.Fatal("Int")
	}
	if v.Get("missing").Get("deeper").Str() != "" || v.Get("b").Kind() != Null {
		t.Fatal("nil-safe accessors")
	}
	v.Set("b", NewString("B"))
	v.Set("c", NewArray(NewInt(7), NewBool(false), NewNull(), NewObject()))
	v.Delete("a")
	if got := string(v.AppendJSON(nil)); got != `{"b":"B","c":[7,false,null,{}]}` {
		t.Fatalf("got %s", got)
	}
}

func TestRewriteStrings(t *testing.T) {
	src := []byte(`{"k":"secret","n":1,"list":["a","secret"],"o":{"secret":"x\n"}}`)
	out, changed, err := RewriteStrings([]byte("prefix:"), src, func(key, s []byte) ([]byte, bool) {
		if string(s) == "secret" {
			return []byte("[" + string(key) + "]"), true
		}
		return nil, false
	})
	if err != nil || !changed {
		t.Fatal(err)
	}
	if got := string(out); got != `prefix:{"k":"[k]","n":1,"list":["a","[list]"],"o":{"secret":"x\n"}}` {
		t.Fatalf("got %s", got)
	}
	out, changed, err = RewriteStrings(nil, []byte(`{"a":"b"}`), func(_, _ []byte) ([]byte, bool) { return nil, false })
	if err != nil || changed || out != nil {
		t.Fatal("unchanged document should return dst untouched")
	}
}

// FuzzParse checks the reader against encoding/json: same validity (below
// the nesting limit), and Parse → AppendJSON → encoding/json yields the
// same data.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `[1,2.5e-3,"x\u00e9",true,null,{"a":[]}]`, `"\ud83c\udf89"`, `{"a":1,"a":2}`, ` -0 `, `[`, `{"\u0000":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		mine := Valid(b)
		theirs := json.Valid(b)
		if mine && !theirs {
			t.Fatalf("Valid(%q) = true, encoding/json disagrees", b)
		}
		if !mine && theirs {
			if _, err := SkipValue(b, 0); err == nil || !strings.Contains(err.Error(), "nesting") {
				if utf8.Valid(b) {
					t.Fatalf("Valid(%q) = false, encoding/json says valid", b)
				}
			}
			return
		}
		if !mine || !utf8.Valid(b) {
			return
		}
		v, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(%q): %v", b, err)
		}
		var want, got any
		if err := decode(b, &want); err != nil {
			t.Fatal(err)
		}
		if err := decode(v.AppendJSON(nil), &got); err != nil {
			t.Fatalf("AppendJSON output invalid: %v", err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("round trip of %q: %v != %v", b, got, want)
		}
		out, changed, err := RewriteStrings(nil, b, func(k, s []byte) ([]byte, bool) { return s, true })
		if err != nil {
			t.Fatalf("RewriteStrings(%q): %v", b, err)
		}
		if changed {
			var rw any
			if err := decode(out, &rw); err != nil || !reflect.DeepEqual(want, rw) {
				t.Fatalf("identity rewrite of %q gave %q", b, out)
			}
		}
	})
}

// decode unmarshals keeping numbers as their literal text.
func decode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}
