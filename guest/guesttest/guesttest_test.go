package guesttest

import (
	"encoding/json"
	"testing"
)

func TestEncode(t *testing.T) {
	tests := []struct{ name, hook, in, want string }{
		{"abi order, compact", "tool_result", `{"result": {"content": []}, "tool": "t", "server": "s", "client": {"id": "a"}}`,
			`{"client":{"id":"a"},"server":"s","tool":"t","result":{"content":[]}}`},
		{"tool_call arguments default", "tool_call", `{"tool":"t","server":"s"}`, `{"server":"s","tool":"t","arguments":{}}`},
		{"null members dropped", "event", `{"event":"server_connected","server":"s","client":null}`, `{"event":"server_connected","server":"s"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Encode(tc.hook, tc.in)
			if err != nil || string(got) != tc.want {
				t.Fatalf("Encode = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
	for _, bad := range []struct{ hook, in string }{{"tool_call", `{"x":1}`}, {"nope", `{}`}, {"tool_call", `[1]`}, {"tool_call", `{`}} {
		if _, err := Encode(bad.hook, bad.in); err == nil {
			t.Errorf("Encode(%s, %s) accepted", bad.hook, bad.in)
		}
	}
}

// FuzzEncode: any input either fails or encodes to a JSON object.
func FuzzEncode(f *testing.F) {
	f.Add("tool_call", `{"server":"s","tool":"t","arguments":{"q":"x"}}`)
	f.Add("tools_list", `{"tools":[{"server":"s","name":"n","tool":{}}]}`)
	f.Add("event", `{"event":"e","server":"s","time_ms":1}`)
	f.Fuzz(func(t *testing.T, hook, in string) {
		out, err := Encode(hook, in)
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(out, &m) != nil {
			t.Fatalf("Encode(%q, %q) = %s, not a JSON object", hook, in, out)
		}
	})
}
