package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
)

// TestConfigOCIModules: an oci:// module is kept as written (not joined
// with the config's folder) and checked; the registry keys decode and
// are checked.
func TestConfigOCIModules(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	pub, _ := json.Marshal(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	ref := "oci://ghcr.io/acme/redact:v1@sha256:" + strings.Repeat("ab", 32)
	cfg, err := Parse("/etc/edge/gw.json", []byte(`{"policies": [{"name": "r", "module": "`+ref+`"}],
		"admin": {"insecure_registries": ["reg.lan:5000"], "pull_policy": "always", "pull_timeout": 10,
			"require_signature": [{"prefix": "ghcr.io/acme/", "cosign_keys": [`+string(pub)+`]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Policies[0].Module != ref {
		t.Errorf("module %q, want %q as written", cfg.Policies[0].Module, ref)
	}
	a := cfg.Admin
	if a.PullPolicy != "always" || a.PullTimeout != 10 || len(a.InsecureRegistries) != 1 || len(a.RequireSignature) != 1 || a.RequireSignature[0].Prefix != "ghcr.io/acme/" {
		t.Errorf("admin = %+v", a)
	}
	for _, tc := range []struct{ name, in, key, reason string }{
		{"reference without repository", `{"policies": [{"name": "r", "module": "oci://ghcr.io"}]}`, "policies[0].module", "no repository"},
		{"reference with a bad digest", `{"policies": [{"name": "r", "module": "oci://ghcr.io/a/b@sha256:12"}]}`, "policies[0].module", "oci://ghcr.io/a/b@sha256:12"},
		{"pull policy", `{"admin": {"pull_policy": "sometimes"}}`, "admin.pull_policy", `"if_not_present" or "always"`},
		{"signature rule without prefix", `{"admin": {"require_signature": [{"cosign_keys": [` + string(pub) + `]}]}}`, "admin.require_signature[0].prefix", "is required"},
		{"signature rule without keys", `{"admin": {"require_signature": [{"prefix": "ghcr.io"}]}}`, "admin.require_signature[0].cosign_keys", "is empty"},
		{"signature rule with an ed25519 key", `{"admin": {"require_signature": [{"prefix": "ghcr.io", "cosign_keys": ["AAAA"]}]}}`, "admin.require_signature[0].cosign_keys", "PEM PUBLIC KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gw.json", []byte(tc.in))
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("got %v, want key %q and a reason with %q", err, tc.key, tc.reason)
			}
		})
	}
}

// TestRegistryOptions: the longest require_signature prefix covering a
// reference gives its keys; a prefix matches whole path elements only.
func TestRegistryOptions(t *testing.T) {
	keys := map[string]string{}
	for _, n := range []string{"host", "acme"} {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		keys[n] = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	}
	a := &Admin{MaxModuleBytes: 1000, InsecureRegistries: []string{"reg.lan"}, PullTimeout: 2, RequireSignature: []SignatureRule{
		{Prefix: "ghcr.io", CosignKeys: []string{keys["host"]}},
		{Prefix: "ghcr.io/acme/", CosignKeys: []string{keys["acme"]}},
	}}
	for _, tc := range []struct {
		ref  string
		want string // "" no signature required
	}{
		{"oci://ghcr.io/acme/redact:v1", "acme"},
		{"oci://ghcr.io/acmecorp/redact:v1", "host"},
		{"oci://ghcr.io/other/redact:v1", "host"},
		{"oci://ghcr.iox/acme/redact:v1", ""},
		{"oci://reg.lan/acme/redact:v1", ""},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			o, err := a.RegistryOptions(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if o.MaxBytes != 1000 || o.Timeout.Seconds() != 2 || len(o.Insecure) != 1 {
				t.Fatalf("options %+v", o)
			}
			if tc.want == "" {
				if o.Keys != nil {
					t.Fatal("a signature is required, want none")
				}
				return
			}
			want, _ := ociwasm.ParseKeys(keys[tc.want])
			if fmt.Sprint(o.Keys.IDs()) != fmt.Sprint(want.IDs()) {
				t.Fatalf("keys of the wrong rule, want %s", tc.want)
			}
		})
	}
}

// testTrustedRoot is a Sigstore trusted root of one self-signed CA and
// one log key, made here.
func testTrustedRoot(t *testing.T) string {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	b64 := base64.StdEncoding.EncodeToString
	root, _ := json.Marshal(map[string]any{
		"tlogs":                  []any{map[string]any{"publicKey": map[string]any{"rawBytes": b64(pub)}, "logId": map[string]any{"keyId": "AA=="}}},
		"certificateAuthorities": []any{map[string]any{"certChain": map[string]any{"certificates": []any{map[string]any{"rawBytes": b64(der)}}}}},
	})
	return string(root)
}

// TestConfigKeylessRule: a require_signature rule may be keyless (a
// trusted root, an identity or identity regexp, an issuer) instead of
// keys; RegistryOptions then accepts that identity; an incomplete or
// broken keyless rule names its key.
func TestConfigKeylessRule(t *testing.T) {
	root, _ := json.Marshal(testTrustedRoot(t))
	rule := func(extra string) string {
		return `{"admin": {"require_signature": [{"prefix": "ghcr.io/acme/", "trusted_root": ` + string(root) + extra + `}]}}`
	}
	cfg, err := Parse("gw.json", []byte(rule(`, "certificate_identity_regexp": "^https://github\\.com/acme/", "certificate_oidc_issuer": "https://token.actions.githubusercontent.com"`)))
	if err != nil {
		t.Fatal(err)
	}
	o, err := cfg.Admin.RegistryOptions("oci://ghcr.io/acme/redact:v1")
	if err != nil || o.Keys == nil || len(o.Keys.IDs()) != 1 || !strings.HasPrefix(o.Keys.IDs()[0], "keyless:https://token.actions.githubusercontent.com ~^https://github") {
		t.Fatalf("registry options %+v, %v", o.Keys.IDs(), err)
	}
	for _, tc := range []struct{ name, in, key, reason string }{
		{"no issuer", rule(`, "certificate_identity": "a@b.c"`), "admin.require_signature[0].certificate_oidc_issuer", "want certificate_oidc_issuer"},
		{"no identity", rule(`, "certificate_oidc_issuer": "https://x"`), "admin.require_signature[0].certificate_oidc_issuer", "one of certificate_identity"},
		{"bad regexp", rule(`, "certificate_identity_regexp": "(", "certificate_oidc_issuer": "https://x"`), "admin.require_signature[0].certificate_identity_regexp", "missing closing )"},
		{"bad trusted root", `{"admin": {"require_signature": [{"prefix": "ghcr.io", "trusted_root": "{}", "certificate_identity": "a@b.c", "certificate_oidc_issuer": "https://x"}]}}`,
			"admin.require_signature[0].trusted_root", "want at least one of each"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gw.json", []byte(tc.in))
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("got %v, want key %q and a reason with %q", err, tc.key, tc.reason)
			}
		})
	}
}
