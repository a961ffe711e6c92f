package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm/sigstoretest"
	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// writeCosignPair writes an unencrypted P-256 key pair as key.pem and
// key.pub under dir.
func writeCosignPair(t *testing.T, dir, name string) (priv, pub string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p8, _ := x509.MarshalPKCS8PrivateKey(k)
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	priv, pub = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".pub")
	os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), 0o600)
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
	return priv, pub
}

// TestModuleRegistry pushes a module to a registry signed, pulls it back
// verified (to a file and into a running gateway), and refuses one
// signed by another key without writing anything.
func TestModuleRegistry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/policies/redact:v1"
	priv, pub := writeCosignPair(t, dir, "cosign")
	_, otherPub := writeCosignPair(t, dir, "other")
	wasm := redactModule(t)
	file := filepath.Join(dir, "redact.wasm")
	os.WriteFile(file, wasm, 0o600)

	out, err := runCLI(t, "module", "push", file, ref, "--cosign-key", priv)
	if err != nil || !strings.Contains(out, ref+"@sha256:") || !strings.Contains(out, "signed") {
		t.Fatalf("push to the registry: %v\n%s", err, out)
	}
	got := filepath.Join(dir, "got.wasm")
	if out, err = runCLI(t, "module", "pull", ref, "--key", pub, "--out", got); err != nil || !strings.Contains(out, "signed by cosign key") {
		t.Fatalf("pull: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, wasm) {
		t.Fatalf("pulled %d bytes, pushed %d", len(b), len(wasm))
	}
	refused := filepath.Join(dir, "refused.wasm")
	out, err = runCLI(t, "module", "pull", ref, "--key", otherPub, "--out", refused)
	if err == nil || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("pull with another key: %v\n%s: want a refusal naming %s", err, out, ref)
	}
	if _, err := os.Stat(refused); !os.IsNotExist(err) {
		t.Fatalf("a refused pull wrote %s", refused)
	}

	adminAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfgPath := filepath.Join(dir, "gw.json")
	os.WriteFile(cfgPath, []byte(`{"mcpServers": {}}`), 0o600)
	startServe(t, "--config", cfgPath, "--listen", "127.0.0.1:0", "--admin", adminAddr, "--state-dir", filepath.Join(dir, "state"))
	admin := "http://" + adminAddr
	if out, err = runCLI(t, "module", "pull", ref, "--key", pub, "--admin", admin); err != nil || !strings.Contains(out, "as redact") {
		t.Fatalf("pull into the gateway: %v\n%s", err, out)
	}
	if out, err = runCLI(t, "module", "ls", "--admin", admin); err != nil || !strings.Contains(out, "redact") {
		t.Fatalf("module ls after the pull: %v\n%s", err, out)
	}
}

// TestServeOCIModule: `edge-mcp serve` with a policy whose module is an
// oci:// reference pulls it from a registry at start, caches it in the
// state folder, and lists it as a module attached as that policy; a
// restart with the registry gone serves from that cache.
func TestServeOCIModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/policies/redact:v1"
	file := filepath.Join(dir, "redact.wasm")
	os.WriteFile(file, redactModule(t), 0o600)
	if out, err := runCLI(t, "module", "push", file, ref); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	cfgPath := filepath.Join(dir, "gw.json")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`{"mcpServers": {}, "policies": [{"name": "redact", "module": %q}],
		"admin": {"state_dir": %q}}`, ref, filepath.Join(dir, "state"))), 0o600)
	for _, phase := range []string{"pulled", "cached, registry gone"} {
		t.Run(phase, func(t *testing.T) {
			adminAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
			startServe(t, "--config", cfgPath, "--listen", "127.0.0.1:0", "--admin", adminAddr)
			out, err := runCLI(t, "module", "ls", "--admin", "http://"+adminAddr)
			var row []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "oci-redact-") {
					row = strings.Fields(l)
				}
			}
			if err != nil || len(row) < 2 || row[len(row)-2] != "redact" {
				t.Fatalf("module ls: %v\n%s\nwant the pulled module oci-redact-…, attached as redact", err, out)
			}
		})
		srv.Close()
	}
}

// TestInterceptorsFromRegistry: `interceptors ls` reads a module given as
// an oci:// reference (--module) by pulling it, and so does a config's
// policy naming one.
func TestInterceptorsFromRegistry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/policies/guard:v1"
	file := filepath.Join(dir, "guard.wasm")
	os.WriteFile(file, securityModule(t, "cross-boundary-guard"), 0o600)
	if out, err := runCLI(t, "module", "push", file, ref); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	cfgPath := filepath.Join(dir, "gw.json")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`{"mcpServers": {}, "policies": [{"name": "guard", "module": %q}],
		"interceptors": [{"module": "guard"}]}`, ref)), 0o600)
	for _, from := range [][]string{{"--module", ref}, {"--config", cfgPath}} {
		out, err := runCLI(t, append([]string{"interceptors", "ls"}, from...)...)
		if err != nil || !strings.Contains(out, "security/cross-boundary-guard") {
			t.Errorf("interceptors ls %s: %v\n%s", from, err, out)
		}
	}
	if _, err := runCLI(t, "interceptors", "ls", "--module", "oci://"+strings.TrimPrefix(srv.URL, "http://")+"/policies/none:v1"); err == nil || !strings.Contains(err.Error(), "none:v1") {
		t.Errorf("a reference the registry lacks: %v", err)
	}
}

// TestModulePullKeyless: `module pull` with cosign's keyless flags
// (--trusted-root, --certificate-identity or -regexp,
// --certificate-oidc-issuer) accepts a module whose manifest carries a
// keyless Sigstore bundle of that identity, with the verifier of
// admin.require_signature, and refuses another identity, another trusted
// root or an unsigned module with the reference and the reason, writing
// nothing.
func TestModulePullKeyless(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	file := filepath.Join(dir, "m.wasm")
	os.WriteFile(file, wasm, 0o600)
	push := func(repo string) (ref, digest string) {
		ref = "oci://" + host + "/" + repo + ":v1"
		out, err := runCLI(t, "module", "push", file, ref)
		_, digest, ok := strings.Cut(strings.TrimSpace(out), "@")
		if err != nil || !ok {
			t.Fatalf("push: %v\n%s", err, out)
		}
		return ref, digest
	}
	ref, digest := push("policies/keyless")
	unsigned, _ := push("policies/unsigned")
	fx := sigstoretest.New(t)
	key := sigstoretest.ECKey(t)
	var sum [32]byte
	raw, _ := hex.DecodeString(strings.TrimPrefix(digest, "sha256:"))
	copy(sum[:], raw)
	sigstoretest.Attach(t, host, "policies/keyless", digest, fx.Bundle(t, key, fx.Leaf(t, key, sigstoretest.SAN, sigstoretest.Issuer), sum, sigstoretest.Opts{}))
	rootFile, otherRoot := filepath.Join(dir, "trusted_root.json"), filepath.Join(dir, "other_root.json")
	os.WriteFile(rootFile, fx.TrustedRoot, 0o600)
	os.WriteFile(otherRoot, sigstoretest.New(t).TrustedRoot, 0o600)
	issuer := "--certificate-oidc-issuer=" + sigstoretest.Issuer
	cases := []struct {
		name  string
		ref   string
		flags []string
		want  string // in the output, or in the error when refused
		ok    bool
	}{
		{"identity", ref, []string{"--trusted-root", rootFile, "--certificate-identity", sigstoretest.SAN, issuer}, "signed keylessly by " + sigstoretest.Issuer, true},
		{"identity regexp", ref, []string{"--trusted-root", rootFile, "--certificate-identity-regexp", `^https://github\.com/acme/`, issuer}, "signed keylessly", true},
		{"another identity", ref, []string{"--trusted-root", rootFile, "--certificate-identity", "https://github.com/evil/x", issuer}, "no configured identity matches", false},
		{"another issuer", ref, []string{"--trusted-root", rootFile, "--certificate-identity", sigstoretest.SAN, "--certificate-oidc-issuer", "https://accounts.google.com"}, "no configured identity matches", false},
		{"another trusted root", ref, []string{"--trusted-root", otherRoot, "--certificate-identity", sigstoretest.SAN, issuer}, "not a transparency log of the trusted root", false},
		{"unsigned", unsigned, []string{"--trusted-root", rootFile, "--certificate-identity", sigstoretest.SAN, issuer}, "not signed", false},
		{"no issuer", ref, []string{"--trusted-root", rootFile, "--certificate-identity", sigstoretest.SAN}, "--certificate-oidc-issuer", false},
		{"no trusted root", ref, []string{"--certificate-identity", sigstoretest.SAN, issuer}, "--trusted-root", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := filepath.Join(t.TempDir(), "got.wasm")
			out, err := runCLI(t, append([]string{"module", "pull", c.ref, "--out", got}, c.flags...)...)
			if c.ok {
				if b, _ := os.ReadFile(got); err != nil || !strings.Contains(out, c.want) || !bytes.Equal(b, wasm) {
					t.Fatalf("pull: %v\n%s\nwant %q and the module in %s", err, out, c.want, got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("pull: %v\n%s\nwant a refusal saying %q", err, out, c.want)
			}
			if !strings.HasPrefix(c.want, "-") && !strings.Contains(err.Error(), c.ref) {
				t.Errorf("the refusal %q does not name %s", err, c.ref)
			}
			if _, err := os.Stat(got); !os.IsNotExist(err) {
				t.Fatalf("a refused pull wrote %s", got)
			}
		})
	}
}
