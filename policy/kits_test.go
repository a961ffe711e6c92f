package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// redactFragments are the pieces the differential test strings together:
// secrets of every kind, near misses, words, separators, escapes, quotes
// and multi-byte text, so that matches fall on every offset of the ports'
// eight-byte tiles.
var redactFragments = []string{
	"sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234", "sk-learn", "sk_live_51HabcdefghijklmnopQRST1234", "rk_test_51Habcdefghijklmnop",
	"ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_short", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
	"xoxb-123456789012-123456789012-AbCdEfGhIjKl", "xoxb-", "AKIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPLE1",
	"AIzaSyA-1234567890abcdefghijklmnopqrstu", "Bearer abcdef0123456789abcdef0123456789", "bearer\tshort",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig-nature_x", "eyJhbGci",
	"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----\nMIIEv",
	"-----BEGIN PUBLIC KEY-----", "jane.doe+tag@example.co.uk", "a@b.c", "user@localhost", "x@y..com", "@example.com",
	"4111 1111 1111 1111", "5500-0000-0000-0004", "378282246310005", "4111111111111112", "1700000000000",
	"task-management", "the", "key", "they", "because", "number", "gh", "AKIA", " ", "  ", "\n", "\t", "\\", "\"", ".", "-",
	"_", "/", "=", "(", ")", "<", ">", "&", "日本語", "🎉", "é", "\u2028", "0", "42", "2", "e", "s", "@",
}

// The Rust, C and AssemblyScript ports answer exactly what the Go module
// answers, on texts strung together at random from secrets, near misses
// and separators (the ports skip eight bytes at a time; the Go module has
// a tiled scanner of its own).
func TestRedactPortsAgreeWithGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	ctx := context.Background()
	goMod := load(t, "redact", ModuleOptions{PoolSize: 1})
	rng := rand.New(rand.NewPCG(29, 1))
	inputs := make([]json.RawMessage, 400)
	for i := range inputs {
		var b strings.Builder
		for range 1 + rng.IntN(40) {
			b.WriteString(redactFragments[rng.IntN(len(redactFragments))])
		}
		r, _ := json.Marshal(map[string]any{"server": "s", "tool": "t",
			"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": b.String()}}}})
		inputs[i] = r
	}
	want := make([][]byte, len(inputs))
	for i, in := range inputs {
		out, err := goMod.Decide(ctx, HookToolResult, in)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = out
	}
	for _, lang := range wasmtest.PortLangs {
		t.Run(lang, func(t *testing.T) {
			m := loadBytes(t, "redact-"+lang, wasmtest.Port(t, lang), ModuleOptions{PoolSize: 1})
			differ := 0
			for i, in := range inputs {
				got, err := m.Decide(ctx, HookToolResult, in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want[i]) {
					if differ++; differ <= 3 {
						t.Errorf("input %s\n%s answers %s\nGo answers %s", in, lang, got, want[i])
					}
				}
			}
			if differ > 0 {
				t.Errorf("%d of %d inputs answered differently", differ, len(inputs))
			}
		})
	}
}
