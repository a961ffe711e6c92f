package auth

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzAuthenticate feeds arbitrary Authorization and X-API-Key values to an
// api_key and a jwt Authenticator: none may panic or accept, and every
// error must carry a sentinel.
func FuzzAuthenticate(f *testing.F) {
	k := keys()
	apiAuth, err := New(context.Background(), apiKeyConfig(), Options{})
	if err != nil {
		f.Fatal(err)
	}
	jwtAuth, err := New(context.Background(), staticJWTConfig(f), Options{})
	if err != nil {
		f.Fatal(err)
	}
	wrongAud := goodClaims(map[string]any{"aud": "https://elsewhere"})
	expired := goodClaims(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()})
	for _, seed := range []string{
		"", "Bearer", "Bearer ", "bearer x", "Basic Y2k6c2VjcmV0", "Bearer a.b.c", "Bearer ..",
		"Bearer " + sign(f, jwt.SigningMethodHS256, k.hmac, "", wrongAud),
		"Bearer " + sign(f, jwt.SigningMethodRS256, k.rsaA, "rsa-a", expired),
		"Bearer " + sign(f, jwt.SigningMethodES256, k.ecB, "ec-a", goodClaims(nil)),
		"Bearer " + sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", goodClaims(nil)),
		"Bearer " + sign(f, jwt.SigningMethodHS256, pemKey(f, "", &k.rsaA.PublicKey), "rsa-a", goodClaims(nil)),
		"Bearer " + revokedKey, "Bearer " + ciKey[:len(ciKey)-1],
		"Bearer eyJhbGciOiJIUzI1NiJ9.e30.", "Bearer \x00\xff",
	} {
		f.Add(seed, "")
		f.Add(seed, revokedKey)
	}
	sentinelText := make([]string, len(sentinels))
	for i, s := range sentinels {
		sentinelText[i] = s.Error()
	}
	f.Fuzz(func(t *testing.T, authz, xAPIKey string) {
		r := request()
		if authz != "" {
			r.Header["Authorization"] = []string{authz}
		}
		if xAPIKey != "" {
			r.Header["X-Api-Key"] = []string{xAPIKey}
		}
		for name, a := range map[string]*Authenticator{"api_key": apiAuth, "jwt": jwtAuth} {
			id, err := a.Authenticate(r)
			if err == nil {
				t.Fatalf("%s accepted %q / %q as %+v", name, authz, xAPIKey, id)
			}
			if !slices.Contains(sentinelText, reason(err)) {
				t.Fatalf("%s: error %v wraps no sentinel", name, err)
			}
			if errors.Is(err, ErrMissingCredentials) && (authz != "" || (name == "api_key" && xAPIKey != "")) {
				t.Fatalf("%s: credentials reported missing though present: %v", name, err)
			}
		}
	})
}

// FuzzParseJWKS checks that parseJWKS never panics and keeps only keys
// that pass checkPublicKey.
func FuzzParseJWKS(f *testing.F) {
	k := keys()
	f.Add(mustJSON(f, map[string]any{"keys": []any{jwk(f, "a", &k.rsaA.PublicKey), jwk(f, "b", &k.ecA.PublicKey)}}))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"","y":""},{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, _, err := parseJWKS(data)
		if err != nil {
			return
		}
		if len(set.keys) == 0 || len(set.keys) > maxKeys {
			t.Fatalf("%d keys", len(set.keys))
		}
		for _, key := range set.keys {
			if err := checkPublicKey(key.key); err != nil {
				t.Fatalf("kept a bad key: %v", err)
			}
		}
	})
}

// FuzzParsePEMKeys checks that parsePEMKeys never panics and keeps only
// keys that pass checkPublicKey.
func FuzzParsePEMKeys(f *testing.F) {
	k := keys()
	f.Add(append(pemKey(f, "a", &k.rsaA.PublicKey), pemKey(f, "", &k.ecA.PublicKey)...))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nkid: x\n\nAAAA\n-----END PUBLIC KEY-----\n"))
	f.Add([]byte("-----BEGIN RSA PUBLIC KEY-----\n-----END RSA PUBLIC KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := parsePEMKeys(data)
		if err != nil {
			return
		}
		if len(set.keys) == 0 || len(set.keys) > maxKeys {
			t.Fatalf("%d keys", len(set.keys))
		}
		for _, key := range set.keys {
			if err := checkPublicKey(key.key); err != nil {
				t.Fatalf("kept a bad key: %v", err)
			}
		}
	})
}
