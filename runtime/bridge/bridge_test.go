package bridge

import (
	"encoding/json"
	"testing"
)

// TestApplyReadHints: a resources/read result keeps its upstream's TTL
// and the stricter scope.
func TestApplyReadHints(t *testing.T) {
	tests := []struct {
		name    string
		hints   Hints
		result  string
		wantTTL string
		wantSc  string
	}{
		{name: "no upstream hints", hints: Hints{TTLSettled, "public"}, result: `{"contents":[]}`, wantTTL: "0", wantSc: `"public"`},
		{name: "upstream hints kept", hints: Hints{TTLSettled, "public"}, result: `{"contents":[],"ttlMs":5000,"cacheScope":"private"}`, wantTTL: "5000", wantSc: `"private"`},
		{name: "gateway private wins", hints: Hints{TTLSettled, "private"}, result: `{"contents":[],"ttlMs":5000,"cacheScope":"public"}`, wantTTL: "5000", wantSc: `"private"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.hints.ApplyRead(json.RawMessage(tt.result))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				TTL   json.RawMessage `json:"ttlMs"`
				Scope json.RawMessage `json:"cacheScope"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if string(got.TTL) != tt.wantTTL || string(got.Scope) != tt.wantSc {
				t.Errorf("%s: ttlMs %s cacheScope %s, want %s %s", out, got.TTL, got.Scope, tt.wantTTL, tt.wantSc)
			}
		})
	}
}

// TestDerivedParamHeaders: go-sdk's rules for x-mcp-header values.
func TestDerivedParamHeaders(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"s":{"type":"string","x-mcp-header":"S"},
		"n":{"type":"integer","x-mcp-header":"n-val"},
		"b":{"type":"boolean","x-mcp-header":"B"},
		"u":{"type":"string","x-mcp-header":"U"},
		"z":{"type":"string","x-mcp-header":"Z"},
		"f":{"type":"integer","x-mcp-header":"F"},
		"o":{"type":"object","properties":{"deep":{"type":"string","x-mcp-header":"Deep"}}},
		"plain":{"type":"string"}}}`)
	params := json.RawMessage(`{"name":"t","arguments":{"s":"a b","n":42,"b":true,"u":"é","z":null,"f":1.5,"o":{"deep":"x"},"plain":"p"}}`)
	got := DerivedParamHeaders(schema, params)
	want := map[string]string{"Mcp-Param-S": "a b", "Mcp-Param-N-Val": "42", "Mcp-Param-B": "true",
		"Mcp-Param-U": "=?base64?w6k=?=", "Mcp-Param-Deep": "x"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if g := got[k]; len(g) != 1 || g[0] != v {
			t.Errorf("%s: %q, want %q", k, g, v)
		}
	}
	if h := DerivedParamHeaders(json.RawMessage(`{"type":"object"}`), params); h != nil {
		t.Errorf("no annotation: %v", h)
	}
}
