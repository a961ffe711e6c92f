package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestKeyCredentialsAssertion(t *testing.T) {
	t.Parallel()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	for _, tc := range []struct {
		name string
		pem  string
		pub  crypto.PublicKey
		alg  string
	}{
		{"PKCS8 P-256", pkcs8(t, ec), &ec.PublicKey, "ES256"},
		{"SEC1 P-256", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})), &ec.PublicKey, "ES256"},
		{"PKCS8 P-384", pkcs8(t, ec384), &ec384.PublicKey, "ES384"},
		{"PKCS1 RSA", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)})), &rk.PublicKey, "RS256"},
		{"PKCS8 Ed25519", pkcs8(t, ed), ed.Public(), "EdDSA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := newKeyCredentials("client-1", tc.pem, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			a, err := k.assertion("https://as.example.com")
			if err != nil {
				t.Fatal(err)
			}
			var claims jwt.RegisteredClaims
			tok, err := jwt.ParseWithClaims(a, &claims, func(*jwt.Token) (any, error) { return tc.pub, nil },
				jwt.WithValidMethods([]string{tc.alg}), jwt.WithAudience("https://as.example.com"), jwt.WithIssuer("client-1"), jwt.WithSubject("client-1"), jwt.WithExpirationRequired())
			if err != nil || !tok.Valid {
				t.Fatalf("assertion does not verify: %v", err)
			}
			if claims.ID == "" {
				t.Error("assertion has no jti")
			}
		})
	}
	for _, bad := range []string{"", "not pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"} {
		if _, err := newKeyCredentials("c", bad, nil); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
}

func pkcs8(t *testing.T, key any) string {
	b, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: b}))
}
