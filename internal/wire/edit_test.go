package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// editSequential is what EditFields must equal: DeleteField of each key
// of drop, then SetField of each member of set.
func editSequential(obj []byte, drop []string, set []Member) (json.RawMessage, error) {
	out := json.RawMessage(obj)
	if len(out) == 0 {
		out = json.RawMessage(`{}`)
	}
	var err error
	for _, k := range drop {
		if out, err = DeleteField(out, k); err != nil {
			return nil, err
		}
	}
	for _, kv := range set {
		if out, err = SetField(out, kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	return out, nil
}

var editDrop = []string{"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientInfo", "b"}

var editSet = []Member{
	{"progressToken", json.RawMessage(`7`)},
	{"io.modelcontextprotocol/clientInfo", json.RawMessage(`{"name":"edge-mcp"}`)},
	{"z", json.RawMessage(`[1,2]`)},
}

func TestEditFields(t *testing.T) {
	tests := []struct {
		name, obj string
		drop      []string
		set       []Member
		want      string
	}{
		{"drop and stamp", `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","a":1,"io.modelcontextprotocol/clientInfo":{"name":"c"}}`,
			editDrop, editSet, `{"a":1,"progressToken":7,"io.modelcontextprotocol/clientInfo":{"name":"edge-mcp"},"z":[1,2]}`},
		{"replace in place", `{"progressToken":"t","a":1}`, nil, editSet[:1], `{"progressToken":7,"a":1}`},
		{"replace every duplicate", `{"z":1,"a":2,"z":3}`, nil, editSet[2:], `{"z":[1,2],"a":2,"z":[1,2]}`},
		{"nothing to do keeps bytes", ` { "a" : 1 ,"c":2 } `, []string{"x"}, nil, ` { "a" : 1 ,"c":2 } `},
		{"drop all", `{"b":1,"b":2}`, editDrop, nil, `{}`},
		{"empty", ``, nil, editSet[2:], `{"z":[1,2]}`},
		{"empty object with space", `{ }`, nil, editSet[2:], `{"z":[1,2] }`},
		{"pretty", "{\n  \"a\": 1,\n  \"b\": 2\n}", editDrop, editSet[2:], "{\n  \"a\": 1,\"z\":[1,2]\n}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EditFields([]byte(tt.obj), tt.drop, tt.set)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			seq, err := editSequential([]byte(tt.obj), tt.drop, tt.set)
			if err != nil {
				t.Fatal(err)
			}
			if !sameCompact(got, seq) {
				t.Fatalf("differs from DeleteField+SetField: %s vs %s", got, seq)
			}
		})
	}
}

func TestEditFieldsErrors(t *testing.T) {
	tests := []struct {
		name, obj string
		set       []Member
	}{
		{"not an object", `[1]`, nil},
		{"invalid JSON", `{"a":`, nil},
		{"trailing garbage", `{"a":1} x`, nil},
		{"invalid value", `{}`, []Member{{"k", json.RawMessage(`{`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := EditFields([]byte(tt.obj), nil, tt.set); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func sameCompact(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// FuzzEditFields checks EditFields against DeleteField and SetField done
// one after another: both fail, or both succeed with the same JSON (up to
// whitespace around dropped members).
func FuzzEditFields(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":2}`, `{"progressToken":1,"z":2,"b":3}`, " {\n\"a\" : [1] } ", `[]`, `{"a":}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		got, err := EditFields(obj, editDrop, editSet)
		want, werr := editSequential(obj, editDrop, editSet)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: EditFields error %v, sequential error %v", obj, err, werr)
		}
		if err == nil && !sameCompact(got, want) {
			t.Fatalf("%q: EditFields %s, sequential %s", obj, got, want)
		}
	})
}

// TestEditFieldsAllocs: one allocation, the result.
func TestEditFieldsAllocs(t *testing.T) {
	obj := []byte(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","a":1,"progressToken":"x"}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := EditFields(obj, editDrop, editSet); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 {
		t.Fatalf("%v allocations, want 1", allocs)
	}
}

func TestAppendKey(t *testing.T) {
	for _, k := range []string{"", "progressToken", "io.modelcontextprotocol/clientInfo", "a-b_c.d/e", "a b", `q"uote`, "back\\slash", "<html>&", "é", "\x01", "\xff"} {
		if got, want := string(appendKey(nil, k)), string(AppendString(nil, k)); got != want {
			t.Errorf("appendKey(%q) = %s, want %s", k, got, want)
		}
	}
}
