package spec

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string // "" when valid
	}{
		{"minimal", Spec{Name: "x", Module: "m.wasm"}, ""},
		{"everything", Spec{Name: "x", Module: "m.wasm", Tools: []string{"*"}, Servers: []string{"gh*"}, Config: json.RawMessage(` {"a":1} `),
			OnError: "allow", TimeoutMS: 60_000, MemoryMB: 4, PoolSize: 1024, Grants: []string{"Clock"}, Mode: ModeShadow}, ""},
		{"no name", Spec{Module: "m.wasm"}, "name is required"},
		{"no module", Spec{Name: "x"}, "module (path to a .wasm file) is required"},
		{"on_error", Spec{Name: "x", Module: "m", OnError: "maybe"}, `policy "x": on_error "maybe"`},
		{"mode", Spec{Name: "x", Module: "m", Mode: "audit"}, `mode "audit"`},
		{"timeout", Spec{Name: "x", Module: "m", TimeoutMS: -5}, "timeout_ms -5 out of range"},
		{"grant", Spec{Name: "x", Module: "m", Grants: []string{"network"}}, `unknown grant "network"`},
		{"memory low", Spec{Name: "x", Module: "m", MemoryMB: 1}, "memory_mb 1 out of range"},
		{"memory high", Spec{Name: "x", Module: "m", MemoryMB: 100000}, "memory_mb 100000 out of range"},
		{"pool", Spec{Name: "x", Module: "m", PoolSize: 1025}, "pool size 1025 out of range"},
		{"config array", Spec{Name: "x", Module: "m", Config: json.RawMessage(`[1]`)}, "config must be a JSON object"},
		{"config broken", Spec{Name: "x", Module: "m", Config: json.RawMessage(`{`)}, "config must be a JSON object"},
		{"empty glob", Spec{Name: "x", Module: "m", Tools: []string{""}}, "tools: empty glob"},
		{"long glob", Spec{Name: "x", Module: "m", Servers: []string{strings.Repeat("a", 513)}}, "servers: glob longer than 512 bytes"},
		{"allowed hosts", Spec{Name: "x", Module: "m", AllowedHosts: []string{"api.example.com", "*.example.org", "127.0.0.1:8080"}}, ""},
		{"allowed host with a scheme", Spec{Name: "x", Module: "m", AllowedHosts: []string{"https://api.example.com"}}, `allowed_hosts: "https://api.example.com" is not a host name glob`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
