package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// redactSlow is the reference: the same matchers tried at every position.
func (r *Redactor) redactSlow(dst, s []byte) ([]byte, bool) {
	st := state{s: s, dst: dst}
	r.scan(&st, 0, len(s))
	if !st.changed {
		return dst, false
	}
	return append(st.dst, s[st.last:]...), true
}

func mustNew(t testing.TB, cfg Config) *Redactor {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// quoted returns the JSON encoding of s without escaping HTML characters.
func quoted(t testing.TB, s string) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func redactString(t testing.TB, r *Redactor, text string) string {
	t.Helper()
	in := quoted(t, text)
	out, changed := r.Redact(nil, []byte(in))
	if !changed {
		out = []byte(in)
	}
	var got string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("redacted %s is not a JSON string: %v", out, err)
	}
	return got
}

func TestRedact(t *testing.T) {
	r := mustNew(t, Config{Replacement: "<{kind}>"})
	tests := []struct{ in, want string }{
		{"key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234 end", "key <api_key> end"},
		{"sk_live_51HabcdefghijklmnopQRST1234", "<api_key>"},
		{"rk_test_51HabcdefghijklmnopQRST1234.", "<api_key>."},
		{"ghp_0123456789abcdefghijABCDEFGHIJ012345", "<api_key>"},
		{"x=gho_0123456789abcdefghijABCDEFGHIJ012345&y", "x=<api_key>&y"},
		{"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "<api_key>"},
		{"xoxb-123456789012-123456789012-AbCdEfGhIjKl", "<api_key>"},
		{"id AKIAIOSFODNN7EXAMPLE\n", "id <api_key>\n"},
		{"ASIAIOSFODNN7EXAMPLE1", "ASIAIOSFODNN7EXAMPLE1"}, // 17 characters: not a key id
		{"https://x/?key=AIzaSyA-1234567890abcdefghijklmnopqrstu", "https://x/?key=<api_key>"},
		{"Authorization: Bearer abcdef0123456789abcdef0123456789", "Authorization: Bearer <bearer>"},
		{"bearer   abc.def-ghi_jkl~mno+pqr/stu=", "bearer   <bearer>"},
		{"Bearer short", "Bearer short"},
		{"t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig-nature_x", "t=<jwt>"},
		{"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY-----\nafter", "<private_key>\nafter"},
		{"cut: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B", "cut: <private_key>"},
		{"-----BEGIN PUBLIC KEY-----\nMFkwEwYH\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMFkwEwYH\n-----END PUBLIC KEY-----"},
		{"mail Jane.Doe+x@mail.example.co.uk.", "mail <email>."},
		{"(a@b.io)", "(<email>)"},
		{"a@b.c user@localhost x@-y.com x@y..com @example.com", "a@b.c user@localhost x@-y.com x@y..com @example.com"},
		{"4111 1111 1111 1111", "<card>"},
		{"5500-0000-0000-0004", "<card>"},
		{"pay 378282246310005!", "pay <card>!"},
		{"4111111111111112 4111 11 111111111111 14111111111111111", "4111111111111112 4111 11 111111111111 14111111111111111"},
		{"1700000000000 and 0000000000000", "1700000000000 and 0000000000000"},
		{"line\nsk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234", "line\n<api_key>"},
		{"<AKIAIOSFODNN7EXAMPLE>", "<<api_key>>"},
		{"task-management sk-learn ghp_short AKIA xoxb-", "task-management sk-learn ghp_short AKIA xoxb-"},
		{"日本語 sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234 🎉", "日本語 <api_key> 🎉"},
	}
	for _, tt := range tests {
		if got := redactString(t, r, tt.in); got != tt.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactConfig(t *testing.T) {
	r := mustNew(t, Config{
		Replacement: `"quoted" \ {kind}`,
		Disable:     []Kind{Email, Card},
		Tokens:      []Token{{Prefix: "xai-", MinLen: 20}, {Prefix: "$tok:", MinLen: 4, Charset: "hex"}},
		Literals:    []string{"corp.internal", `a"b`},
	})
	in := `xai-ABCDEFGHIJKLMNOPQRST a@b.com 4111111111111111 db.corp.internal $tok:beef a"b`
	want := `"quoted" \ custom a@b.com 4111111111111111 db."quoted" \ custom "quoted" \ custom "quoted" \ custom`
	if got := redactString(t, r, in); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if _, err := New(Config{Tokens: []Token{{Prefix: "x", Charset: "nope"}}}); err == nil {
		t.Fatal("unknown charset accepted")
	}
}

func TestRedactKeepsUnchangedInput(t *testing.T) {
	r := mustNew(t, Config{})
	dst := []byte("prefix")
	out, changed := r.Redact(dst, []byte(`{"text":"nothing to see here, move along"}`))
	if changed || string(out) != "prefix" {
		t.Fatalf("out %q changed %v", out, changed)
	}
}

// FuzzRedact checks, for arbitrary text inside a JSON document, that the
// tiled scanner agrees with the per-position reference, that the output
// is valid JSON, and that a planted secret never survives.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"", "plain text", "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234", "a@b.com 4111 1111 1111 1111",
		"Bearer abcdef0123456789abcdef0123456789", "-----BEGIN RSA PRIVATE KEY-----\nabc",
		"path=/api/v1/items?page=2&x=ghp_0123456789abcdefghijABCDEFGHIJ012345",
		strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", 3),
		"x\u00e9\u2028\"\\\t", "4111-1111-1111-1111 5500 0000 0000 0004",
	} {
		f.Add(s, uint8(0))
	}
	plain := mustNew(f, Config{})
	custom := mustNew(f, Config{Tokens: []Token{{Prefix: "zz-", MinLen: 4}}, Literals: []string{"secret-host"}})
	const planted = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	f.Fuzz(func(t *testing.T, text string, where uint8) {
		if !utf8.ValidString(text) {
			return
		}
		for _, r := range []*Redactor{plain, custom} {
			doc := []byte(`{"k":` + quoted(t, text) + `,"n":[1,"x"]}`)
			fast, fc := r.Redact(nil, doc)
			slow, sc := r.redactSlow(nil, doc)
			if fc != sc || string(fast) != string(slow) {
				t.Fatalf("tiled and reference scanners disagree on %q:\n fast %q\n slow %q", doc, fast, slow)
			}
			if fc && !json.Valid(fast) {
				t.Fatalf("output is not JSON: %q -> %q", doc, fast)
			}
		}
		// A planted secret, on its own word, never survives.
		cut := int(where) % (len(text) + 1)
		for !utf8.ValidString(text[:cut]) {
			cut--
		}
		withSecret := text[:cut] + " " + planted + " " + text[cut:]
		if got := redactString(t, plain, withSecret); strings.Contains(got, planted) {
			t.Fatalf("planted secret survived in %q -> %q", withSecret, got)
		}
	})
}

func benchText(n int) []byte {
	lines := []string{
		"2025-11-29T12:04:05Z INFO request served path=/api/v1/items?page=2 status=200 duration_ms=12.4 bytes=5120",
		"Found 17 matching documents in repository edge-mcp/edge-mcp (branch main, commit 4f2a9c1).",
		"The deployment of service checkout-api to cluster eu-west-1 completed; 3 of 3 replicas are ready.",
		"See https://docs.example.com/guides/getting-started#install for installation instructions and FAQ.",
		"order_id=88231 customer=ACME Corp total=149.90 EUR items=[widget, gadget, sprocket] shipped=true",
	}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(lines[i%len(lines)])
		b.WriteString(`\n`)
	}
	return []byte(`{"content":[{"type":"text","text":"` + b.String() + `"}]}`)
}

func BenchmarkRedactNative(b *testing.B) {
	r := mustNew(b, Config{})
	for _, n := range []int{1 << 10, 64 << 10} {
		in := benchText(n)
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			var out []byte
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				out, _ = r.Redact(out[:0], in)
			}
		})
	}
}

// TestRedactLinearTime feeds inputs that make naive matchers quadratic
// (every position starts a candidate whose run reaches the end).
func TestRedactLinearTime(t *testing.T) {
	r := mustNew(t, Config{Tokens: []Token{{Prefix: "t-"}}})
	for _, unit := range []string{"sk-", "eyJ-", "github_pat_-", "xoxb-", "AIza-", "t-", "a@", "2 ", "-----BEGIN PRIVATE KEY----- ", "Bearer "} {
		in := []byte(`"` + strings.Repeat(unit, 200_000/len(unit)) + `"`)
		start := time.Now()
		r.Redact(nil, in)
		r.redactSlow(nil, in)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%q x %d took %v", unit, 200_000/len(unit), d)
		}
	}
}
