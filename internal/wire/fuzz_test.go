package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// seedMessages are realistic MCP messages used to seed every fuzz corpus.
var seedMessages = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"sampling":{}},"clientInfo":{"name":"claude","version":"1.2.3"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":"c7f1-42","method":"tools/call","params":{"name":"github.search_issues","arguments":{"query":"is:open label:bug","limit":10},"_meta":{"progressToken":"tok-1"}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":17},"name":"echo","arguments":{"text":"h\u00e9llo \"w\"\n\ud83d\ude00"}}}`,
	`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"{\"temp\":21.5}"}],"structuredContent":{"temp":21.5,"unit":"C"},"isError":false,"x-unknown":[1,2.5e3,-0,null,true]}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok-1","progress":0.5,"total":1,"message":"half way"}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Unknown tool: nope","data":{"tool":"nope","hint":["a","b"]}}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c7f1-42","reason":"user"}}`,
	"{ \"id\" : 9007199254740992 ,\n\t\"result\" : { } , \"jsonrpc\" : \"2.0\" }\r\n",
	`{"jsonrpc":"2.0","id":"\u0031","method":"tools\/list","params":{"cursor":"abc"},"method":"resources/list"}`,
	`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","inputSchema":{"type":"object","properties":{}}}],"nextCursor":"x"}}`,
}

// errCode returns the code of the *jsonrpc.Error that err wraps, or 0.
func errCode(err error) int64 {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

// topLevelValues returns every value of the top-level key in the JSON object
// data, in order (duplicates included). data must be valid JSON.
func topLevelValues(data []byte, key string) []json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out
		}
		if tok == key {
			out = append(out, v)
		}
	}
	return out
}

// topLevelKeys returns the member names of the JSON object data in order.
func topLevelKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %q", data)
	}
	keys := []string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reading key of %q: %v", data, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("reading value of %q: %v", data, err)
		}
		keys = append(keys, tok.(string))
	}
	return keys
}

// strictIDRejects reports whether Decode's id rules (stricter than the
// go-sdk's) reject some "id" occurrence in data: the go-sdk accepts any
// number (truncating fractions, rounding through float64) and any value in an
// earlier duplicate.
func strictIDRejects(data []byte) bool {
	for _, v := range topLevelValues(data, "id") {
		switch c := v[0]; {
		case c == '"' || c == 'n':
		case c == '-' || isDigit(c):
			if _, err := parseID(v); err != nil {
				return true
			}
		default:
			return true
		}
	}
	return false
}

func compact(t *testing.T, raw []byte) string {
	t.Helper()
	if raw == nil {
		return "<nil>"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compacting %q: %v", raw, err)
	}
	return b.String()
}

// sameMessage fails the test unless got and want carry the same kind, id,
// method, raw params/result and error.
func sameMessage(t *testing.T, input []byte, got, want jsonrpc.Message) {
	t.Helper()
	switch w := want.(type) {
	case *jsonrpc.Request:
		g, ok := got.(*jsonrpc.Request)
		if !ok {
			t.Fatalf("%q: got %T, want request", input, got)
		}
		if g.ID != w.ID || g.Method != w.Method || compact(t, g.Params) != compact(t, w.Params) {
			t.Fatalf("%q: got request {%v %q %s}, want {%v %q %s}", input,
				g.ID.Raw(), g.Method, g.Params, w.ID.Raw(), w.Method, w.Params)
		}
	case *jsonrpc.Response:
		g, ok := got.(*jsonrpc.Response)
		if !ok {
			t.Fatalf("%q: got %T, want response", input, got)
		}
		if g.ID != w.ID || compact(t, g.Result) != compact(t, w.Result) {
			t.Fatalf("%q: got response {%v %s}, want {%v %s}", input, g.ID.Raw(), g.Result, w.ID.Raw(), w.Result)
		}
		if (g.Error == nil) != (w.Error == nil) {
			t.Fatalf("%q: got error %v, want %v", input, g.Error, w.Error)
		}
		if w.Error != nil {
			ge, we := g.Error.(*jsonrpc.Error), w.Error.(*jsonrpc.Error)
			if ge.Code != we.Code || ge.Message != we.Message || compact(t, ge.Data) != compact(t, we.Data) {
				t.Fatalf("%q: got error %+v, want %+v", input, *ge, *we)
			}
		}
	default:
		t.Fatalf("unexpected reference message %T", want)
	}
}

// FuzzDecode checks Decode against the go-sdk's jsonrpc.DecodeMessage and
// encoding/json.Valid, and that Encode(Decode(x)) decodes to the same message.
//
// Intentional divergences, allowed below:
//   - Decode rejects trailing data after the object; the go-sdk ignores it
//     (hence the json.Valid condition).
//   - Decode allows nesting up to 10000 like encoding/json; the go-sdk stops
//     at 1000.
//   - Decode accepts only string, integer (within ±2^53) and null ids, in every
//     occurrence of a duplicated "id"; the go-sdk truncates fractions
//     (1.5 → 1), rounds large integers through float64 and ignores invalid
//     values in earlier duplicates.
func FuzzDecode(f *testing.F) {
	for _, s := range seedMessages {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1.5,"result":1}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"a"},"error":{"data":5}}`,
		`{"jsonrpc":"2.0","jsonrpc":null,"id":1,"method":null}`,
		`{"\u006asonrpc":"2\u002e0","id":"a\ud800b","method":"m"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"m\xc3\"}",
		`{"jsonrpc":"2.0","id":1,"result":1} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Decode(data)
		want, werr := jsonrpc.DecodeMessage(data)
		valid := json.Valid(data)
		if err != nil {
			code := errCode(err)
			if valid && code != jsonrpc.CodeInvalidRequest || !valid && code != jsonrpc.CodeParseError {
				t.Fatalf("%q: error %q has code %d (json.Valid=%v)", data, err, code, valid)
			}
			if !strings.HasPrefix(err.Error(), "wire: ") {
				t.Fatalf("error without package prefix: %q", err)
			}
		}
		refOK := werr == nil && valid
		switch {
		case err == nil && !valid:
			t.Fatalf("%q: accepted invalid JSON", data)
		case err == nil && !refOK:
			if !strings.Contains(werr.Error(), "exceeded maximum nesting depth") {
				t.Fatalf("%q: accepted, but the go-sdk says %v", data, werr)
			}
		case err != nil && refOK:
			if !strings.Contains(err.Error(), "invalid id") || !strictIDRejects(data) {
				t.Fatalf("%q: rejected with %q, but the go-sdk accepts it", data, err)
			}
		}
		if err != nil {
			return
		}
		if refOK {
			sameMessage(t, data, got, want)
		}

		// Round trip.
		enc, err := Encode(got)
		if err != nil {
			t.Fatalf("encoding %q: %v", data, err)
		}
		if !json.Valid(enc) {
			t.Fatalf("encoding %q gave invalid JSON %q", data, enc)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("decoding %q (encoded from %q): %v", enc, data, err)
		}
		expect := got
		if r, ok := got.(*jsonrpc.Response); ok {
			n := *r
			if n.Error != nil {
				n.Result = nil
			} else if n.Result == nil {
				n.Result = json.RawMessage(`{}`)
			}
			expect = &n
		}
		sameMessage(t, enc, again, expect)
		// The go-sdk reads our encoding the same way.
		ref, err := jsonrpc.DecodeMessage(enc)
		if err != nil {
			if !strings.Contains(err.Error(), "nesting depth") {
				t.Fatalf("go-sdk cannot decode %q: %v", enc, err)
			}
			return
		}
		sameMessage(t, enc, ref, expect)
	})
}

// FuzzValid checks Valid against json.Valid, Unquote against json.Unmarshal,
// and AppendString against json.Marshal.
func FuzzValid(f *testing.F) {
	for _, s := range seedMessages {
		f.Add([]byte(s))
	}
	for _, s := range []string{`"a\u00e9\ud83d\ude00\ud800x"`, `""`, `"\/\b\f\n\r\t\"\\"`, "\"\xff\xc3\x28\"", `1e5`, `-0.5E+2`, `[1,[2,{}],""]`, ` "x" `, `tru`, `01`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v", data, got, want)
		}
		s, ok := Unquote(data)
		trimmed := bytes.TrimLeft(data, " \t\r\n")
		var want string
		wantOK := json.Valid(data) && len(trimmed) > 0 && trimmed[0] == '"'
		if wantOK {
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatalf("json.Unmarshal(%q): %v", data, err)
			}
		}
		if ok != wantOK || s != want {
			t.Fatalf("Unquote(%q) = %q, %v; want %q, %v", data, s, ok, want, wantOK)
		}

		str := string(data)
		enc := AppendString([]byte("prefix"), str)
		if !bytes.HasPrefix(enc, []byte("prefix")) {
			t.Fatalf("AppendString dropped dst")
		}
		enc = enc[len("prefix"):]
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("AppendString(%q) = %q: %v", str, enc, err)
		}
		ref, _ := json.Marshal(str)
		var refBack string
		if err := json.Unmarshal(ref, &refBack); err != nil {
			t.Fatal(err)
		}
		if back != refBack {
			t.Fatalf("AppendString(%q) decodes to %q, json.Marshal to %q", str, back, refBack)
		}
		if utf8.ValidString(str) && back != str {
			t.Fatalf("AppendString(%q) decodes to %q", str, back)
		}
	})
}

// canonical decodes a JSON object into a map (last duplicate wins).
func canonical(t *testing.T, obj []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decoding %q: %v", obj, err)
	}
	return m
}

// FuzzFields checks Field, String, SetField and DeleteField against a
// map-based reference built on encoding/json.
func FuzzFields(f *testing.F) {
	for _, s := range seedMessages {
		f.Add([]byte(s), "params", []byte(`{"x":1}`))
		f.Add([]byte(s), "id", []byte(`"new"`))
	}
	f.Add([]byte(`{"name":"echo","arguments":{},"_meta":{"progressToken":1}}`), "_meta", []byte(` null `))
	f.Add([]byte(`{"a":1,"a":2,"b":3}`), "a", []byte(`[]`))
	f.Add([]byte(`{ }`), "k", []byte(`true`))
	f.Add([]byte(" {\n  \"a\": 1,\n  \"b\": \"x\"\n}\n"), "b", []byte(`{}`))
	f.Add([]byte(`{"\u0061":"\u00e9"}`), "a", []byte(`0`))
	f.Add([]byte(`[1]`), "a", []byte(`1`))
	f.Add([]byte(``), "a", []byte(`1`))
	f.Fuzz(func(t *testing.T, obj []byte, key string, value []byte) {
		var ref map[string]json.RawMessage
		trimmed := bytes.TrimLeft(obj, " \t\r\n")
		isObj := json.Unmarshal(obj, &ref) == nil && len(trimmed) > 0 && trimmed[0] == '{'

		// Field and String.
		v, ok, err := Field(obj, key)
		if (err == nil) != isObj {
			t.Fatalf("Field(%q): error %v, want object=%v", obj, err, isObj)
		}
		if !isObj {
			if _, _, err := Field(obj, key); errCode(err) == 0 {
				t.Fatalf("Field(%q) error %v wraps no code", obj, err)
			}
			if _, err := DeleteField(obj, key); err == nil {
				t.Fatalf("DeleteField(%q) accepted a non-object", obj)
			}
			if _, err := SetField(obj, key, value); (err == nil) != (len(obj) == 0 && json.Valid(value)) {
				t.Fatalf("SetField(%q): error %v", obj, err)
			}
			return
		}
		rv, rok := ref[key]
		if ok != rok || !bytes.Equal(v, rv) {
			t.Fatalf("Field(%q, %q) = %q, %v; want %q, %v", obj, key, v, ok, rv, rok)
		}
		s, sok := String(obj, key)
		var rs string
		rsok := rok && rv[0] == '"' && json.Unmarshal(rv, &rs) == nil
		if s != rs || sok != rsok {
			t.Fatalf("String(%q, %q) = %q, %v; want %q, %v", obj, key, s, sok, rs, rsok)
		}
		if !utf8.ValidString(key) {
			return // such a key never matches; the map reference would mangle it
		}
		keys := topLevelKeys(t, obj)

		// SetField.
		out, err := SetField(obj, key, value)
		if (err == nil) != json.Valid(value) {
			t.Fatalf("SetField(%q, %q, %q): error %v", obj, key, value, err)
		}
		if err == nil {
			if !json.Valid(out) {
				t.Fatalf("SetField(%q, %q, %q) = invalid %q", obj, key, value, out)
			}
			want := canonical(t, obj)
			var vv any
			dec := json.NewDecoder(bytes.NewReader(value))
			dec.UseNumber()
			if err := dec.Decode(&vv); err != nil {
				t.Fatal(err)
			}
			want[key] = vv
			if got := canonical(t, out); !reflect.DeepEqual(got, want) {
				t.Fatalf("SetField(%q, %q, %q) = %q: got %v, want %v", obj, key, value, out, got, want)
			}
			wantKeys := keys
			if !rok {
				wantKeys = append(append([]string{}, keys...), key)
			}
			if gotKeys := topLevelKeys(t, out); !reflect.DeepEqual(gotKeys, wantKeys) {
				t.Fatalf("SetField(%q, %q, %q) = %q: keys %q, want %q", obj, key, value, out, gotKeys, wantKeys)
			}
			if rok && len(topLevelValues(obj, key)) == 1 {
				// Setting the current value again changes no byte.
				same, err := SetField(obj, key, rv)
				if err != nil || !bytes.Equal(same, obj) {
					t.Fatalf("SetField(%q, %q, its own value) = %q, %v", obj, key, same, err)
				}
			}
		}

		// DeleteField.
		out, err = DeleteField(obj, key)
		if err != nil {
			t.Fatalf("DeleteField(%q, %q): %v", obj, key, err)
		}
		if !json.Valid(out) {
			t.Fatalf("DeleteField(%q, %q) = invalid %q", obj, key, out)
		}
		if !rok && !bytes.Equal(out, obj) {
			t.Fatalf("DeleteField(%q, %q) changed bytes: %q", obj, key, out)
		}
		want := canonical(t, obj)
		delete(want, key)
		if got := canonical(t, out); !reflect.DeepEqual(got, want) {
			t.Fatalf("DeleteField(%q, %q) = %q: got %v, want %v", obj, key, out, got, want)
		}
		wantKeys := []string{}
		for _, k := range keys {
			if k != key {
				wantKeys = append(wantKeys, k)
			}
		}
		if gotKeys := topLevelKeys(t, out); !reflect.DeepEqual(gotKeys, wantKeys) {
			t.Fatalf("DeleteField(%q, %q) = %q: keys %q, want %q", obj, key, out, gotKeys, wantKeys)
		}
	})
}
