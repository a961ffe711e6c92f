package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValid(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, in string
		want     bool
	}{
		{"object", ` {"a" : 1, "b\u0021":[true,null,"x\"y"], "c":{"d":-1.5e3}} `, true},
		{"escapes", `"\"\\\/\b\f\n\r\t\u00e9\ud83c\udf89"`, true},
		{"unpaired surrogate escape", `"\ud800"`, true},
		{"invalid UTF-8", "\"\xff\xfe\"", true},
		{"numbers", `[0,-0,1.5,-2e10,3E-2,4.0e+1]`, true},
		{"empty", ``, false},
		{"open object", `{`, false},
		{"key without value", `{"a"}`, false},
		{"missing value", `{"a":}`, false},
		{"trailing comma in object", `{"a":1,}`, false},
		{"trailing comma in array", `[1,]`, false},
		{"control character", "\"\x01\"", false},
		{"bad escape", `"\q"`, false},
		{"short unicode escape", `"\u12"`, false},
		{"leading zero", `01`, false},
		{"no fraction digits", `1.`, false},
		{"bare minus", `-`, false},
		{"no exponent digits", `1e+`, false},
		{"plus sign", `+1`, false},
		{"truncated literal", `tru`, false},
		{"trailing data", `{"a":1} x`, false},
		{"mismatched close", `[1}`, false},
		{"max depth", deep(MaxDepth), true},
		{"too deep", deep(MaxDepth + 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Valid([]byte(tt.in)); got != tt.want {
				t.Errorf("Valid(%.40q) = %v, want %v", tt.in, got, tt.want)
			}
			if got := json.Valid([]byte(tt.in)); got != tt.want {
				t.Fatalf("test case disagrees with encoding/json.Valid (%v)", got)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, "jsonscan: invalid JSON at offset 0: unexpected end of input looking for beginning of value"},
		{`[1,2}`, "offset 4: invalid character '}' after array element"},
		{`{"a" 1}`, "offset 5: invalid character '1' after object key"},
		{"\"a\tb\"", `offset 2: invalid character '\t' in string literal`},
		{`"\u00zz"`, `offset 5: invalid character 'z' in \u escape`},
		{`nul`, "offset 3: unexpected end of input in literal null"},
		{"\xff", `offset 0: invalid character '\xff' looking for beginning of value`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := SkipValue([]byte(tt.in), 0)
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain <&> text", `"plain <&> text"`},
		{"a\"b\\c/d", `"a\"b\\c/d"`},
		{"\b\f\n\r\t\x00\x1f\x7f", `"\b\f\n\r\t\u0000\u001f` + "\x7f\""},
		{"é🎉\u2028", "\"é🎉\u2028\""},
		{"a\xffb\xe2\x82", `"a\ufffdb\ufffd\ufffd"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := string(AppendString([]byte("x"), tt.in)); got != "x"+tt.want {
				t.Errorf("AppendString(%q) = %s, want %s", tt.in, got[1:], tt.want)
			}
			if got := string(AppendBytes(nil, []byte(tt.in))); got != tt.want {
				t.Errorf("AppendBytes(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct{ lit, want string }{
		{`"plain"`, "plain"},
		{` "spaced" `, "spaced"},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t"},
		{`"\u00e9\ud83c\udf89"`, "é🎉"},
		{`"\ud800x"`, "\ufffdx"},
		{`"\udc00\ud800"`, "\ufffd\ufffd"},
		{`"\ud800\u0041"`, "\ufffdA"},
		{"\"\xff\"", "\ufffd"},
	}
	for _, tt := range tests {
		t.Run(tt.lit, func(t *testing.T) {
			got, err := Unquote([]byte(tt.lit))
			if err != nil || got != tt.want {
				t.Errorf("Unquote(%s) = %q, %v; want %q", tt.lit, got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{``, `x`, `"a`, `"a" "b"`, `1`} {
		if s, err := Unquote([]byte(bad)); !errors.Is(err, ErrSyntax) {
			t.Errorf("Unquote(%q) = %q, %v; want a syntax error", bad, s, err)
		}
	}
}

func TestKeyEquals(t *testing.T) {
	tests := []struct {
		lit, key string
		want     bool
	}{
		{`"id"`, "id", true},
		{`"\u0069d"`, "id", true},
		{`"id"`, "Id", false},
		{"\"\xff\"", "\xff", false},
		{"\"\xff\"", "\ufffd", true},
		{`"\ud800"`, "\ufffd", true},
	}
	for _, tt := range tests {
		t.Run(tt.lit+"="+tt.key, func(t *testing.T) {
			end, esc, err := SkipString([]byte(tt.lit), 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := KeyEquals([]byte(tt.lit)[1:end-1], esc, tt.key); got != tt.want {
				t.Errorf("KeyEquals = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIterators(t *testing.T) {
	doc := []byte(` {"a" : 1, "b\u0021":[true, null ,"x\"y"], "c":{"d":-1.5e3}} `)
	var keys, vals []string
	end, err := Members(doc, 0, func(m Member) bool {
		keys = append(keys, UnquoteContent(m.Key(doc), m.KeyEscaped))
		vals = append(vals, string(m.Value(doc)))
		return true
	})
	if err != nil || Finish(doc, end) != nil {
		t.Fatalf("Members: %v (end %d)", err, end)
	}
	if strings.Join(keys, ",") != "a,b!,c" || strings.Join(vals, "|") != `1|[true, null ,"x\"y"]|{"d":-1.5e3}` {
		t.Fatalf("keys %q vals %q", keys, vals)
	}
	var elems []string
	if _, err := Elements([]byte(vals[1]), 0, func(e []byte) bool { elems = append(elems, string(e)); return len(elems) < 2 }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(elems, "|") != `true|null` {
		t.Fatalf("elems %q (should stop after two)", elems)
	}
	for _, bad := range []string{`[]`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":[}`} {
		if _, err := Members([]byte(bad), 0, func(Member) bool { return true }); err == nil {
			t.Errorf("Members(%s) accepted it", bad)
		}
	}
}

// FuzzScanner checks jsonscan against encoding/json: Valid agrees with
// json.Valid; every string literal SkipValue accepts unquotes to what
// json.Unmarshal gives; every number it accepts is one json.Unmarshal
// accepts; AppendString output unmarshals to the input (each invalid UTF-8
// byte replaced by U+FFFD) and equals json.Marshal's output but for the escapes
// encoding/json adds for HTML and U+2028/U+2029.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{`{}`, `[1,-2.5e+3,"a\"\\\u00e9",true,false,null]`, `{"a":{"b":[{}]}}`,
		`"\b\f\u0008\u000C\ud83c\udf89\ud800\udc00x"`, `"\ud800"`, "\"\x01\"", "\"\xff\xc3\"", `01`, `-0.0e-0`,
		`1.`, `[1,]`, `{"a" 1}`, `"\u00zz"`, "\"<&>\u2028\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
		checkScalar(t, b)
		checkAppendString(t, string(b))
	})
}

// checkScalar compares how b, when it is a single string or number, is
// read by jsonscan and by encoding/json.
func checkScalar(t *testing.T, b []byte) {
	i := SkipSpace(b, 0)
	if i >= len(b) || (b[i] != '"' && b[i] != '-' && !isDigit(b[i])) {
		return
	}
	end, err := SkipValue(b, i)
	if err != nil || Finish(b, end) != nil {
		return
	}
	if b[i] != '"' {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil || string(n) != string(b[i:end]) {
			t.Fatalf("number %q: encoding/json gives %q, %v", b, n, err)
		}
		return
	}
	var want string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("string %q: encoding/json fails: %v", b, err)
	}
	if got, err := Unquote(b); err != nil || got != want {
		t.Fatalf("Unquote(%q) = %q, %v; encoding/json gives %q", b, got, err, want)
	}
}

func checkAppendString(t *testing.T, s string) {
	enc := AppendString(nil, s)
	if !utf8.Valid(enc) || !json.Valid(enc) {
		t.Fatalf("AppendString(%q) = %q: not valid UTF-8 JSON", s, enc)
	}
	var back string
	if err := json.Unmarshal(enc, &back); err != nil || back != string([]rune(s)) {
		t.Fatalf("AppendString(%q) = %s reads back as %q, %v", s, enc, back, err)
	}
	if strings.ContainsAny(s, "<>&\u2028\u2029") {
		return
	}
	var std bytes.Buffer
	e := json.NewEncoder(&std)
	e.SetEscapeHTML(false)
	if err := e.Encode(s); err != nil {
		t.Fatal(err)
	}
	if want := bytes.TrimSuffix(std.Bytes(), []byte("\n")); !bytes.Equal(enc, want) {
		t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", s, enc, want)
	}
}
