package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func jwksConfig(url string) Config {
	return Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: testIssuer, Audience: []string{testAudience},
		JWKSURL: url, JWKSRefresh: time.Hour}}
}

func TestJWKSAccepts(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwk(t, "rsa-a", &k.rsaA.PublicKey), jwk(t, "ec-a", &k.ecA.PublicKey))
	a := newAuth(t, jwksConfig(srv.URL), Options{})
	for name, tok := range map[string]string{
		"RS256":             sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", goodClaims(nil)),
		"ES256":             sign(t, jwt.SigningMethodES256, k.ecA, "ec-a", goodClaims(nil)),
		"ES256 without kid": sign(t, jwt.SigningMethodES256, k.ecA, "", goodClaims(nil)),
	} {
		t.Run(name, func(t *testing.T) {
			if id, err := a.Authenticate(bearer(tok)); err != nil || id.Name != "alice" {
				t.Fatalf("Authenticate = %+v, %v", id, err)
			}
		})
	}
	t.Run("wrong signature", func(t *testing.T) {
		tok := sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-a", goodClaims(nil))
		if _, err := a.Authenticate(bearer(tok)); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Authenticate: %v, want ErrBadSignature", err)
		}
	})
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}

func TestJWKSRotation(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwk(t, "rsa-a", &k.rsaA.PublicKey))
	clock := newFakeClock()
	a := newAuth(t, jwksConfig(srv.URL), Options{now: clock.Now})
	srv.setKeys(jwk(t, "rsa-a", &k.rsaA.PublicKey), jwk(t, "rsa-b", &k.rsaB.PublicKey))
	tokB := sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b", goodClaims(nil))

	// Within 30 s of the initial fetch the new kid does not trigger one.
	if _, err := a.Authenticate(bearer(tokB)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("before the interval: %v, want ErrUnknownKey", err)
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches before the interval, want 1", n)
	}
	clock.Advance(jwksMinRefetch + time.Second)
	if id, err := a.Authenticate(bearer(tokB)); err != nil || id.Name != "alice" {
		t.Fatalf("after rotation: %+v, %v", id, err)
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after rotation, want 2", n)
	}
	// The old key stays usable: it is still in the set.
	if _, err := a.Authenticate(bearer(sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", goodClaims(nil)))); err != nil {
		t.Fatalf("old key: %v", err)
	}
}

func TestJWKSRefetchRateLimit(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwk(t, "ec-a", &k.ecA.PublicKey))
	clock := newFakeClock()
	a := newAuth(t, jwksConfig(srv.URL), Options{now: clock.Now})
	forged := func(i int) string {
		return sign(t, jwt.SigningMethodES256, k.ecB, fmt.Sprintf("forged-%d", i), goodClaims(nil))
	}
	burst := func(n int) {
		var wg sync.WaitGroup
		for i := range n {
			tok := forged(i)
			wg.Go(func() {
				if _, err := a.Authenticate(bearer(tok)); !errors.Is(err, ErrUnknownKey) {
					t.Errorf("forged kid: %v, want ErrUnknownKey", err)
				}
			})
		}
		wg.Wait()
	}
	clock.Advance(jwksMinRefetch + time.Second)
	burst(100)
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after 100 unknown kids, want 2 (initial + one refetch)", n)
	}
	burst(50)
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after 150 unknown kids in one interval, want 2", n)
	}
	clock.Advance(jwksMinRefetch + time.Second)
	burst(50)
	if n := srv.fetches.Load(); n != 3 {
		t.Fatalf("%d fetches in the next interval, want 3", n)
	}
}

func TestJWKSKeepsLastGoodKeys(t *testing.T) {
	k := keys()
	huge := []byte(`{"keys":[],"pad":"` + strings.Repeat("x", jwksMaxBody) + `"}`)
	tests := []struct {
		name     string
		sabotage func(*jwksServer)
	}{
		{"server down", func(s *jwksServer) { s.Close() }},
		{"status 500", func(s *jwksServer) { s.setFailure(http.StatusInternalServerError, nil) }},
		{"not JSON", func(s *jwksServer) { s.setFailure(0, []byte("<html>oops</html>")) }},
		{"no usable keys", func(s *jwksServer) { s.setFailure(0, []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`)) }},
		{"over 1 MiB", func(s *jwksServer) { s.setFailure(0, huge) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, jwk(t, "rsa-a", &k.rsaA.PublicKey))
			clock := newFakeClock()
			var logs syncBuffer
			a := newAuth(t, jwksConfig(srv.URL), Options{now: clock.Now, Logger: debugLogger(&logs)})
			tt.sabotage(srv)
			clock.Advance(jwksMinRefetch + time.Second)
			unknown := sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b", goodClaims(nil))
			if _, err := a.Authenticate(bearer(unknown)); !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("unknown kid: %v, want ErrUnknownKey", err)
			}
			if !strings.Contains(logs.String(), "keeping the last good keys") {
				t.Fatalf("failed fetch not logged:\n%s", logs.String())
			}
			good := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", goodClaims(nil))
			if _, err := a.Authenticate(bearer(good)); err != nil {
				t.Fatalf("known kid after a failed fetch: %v", err)
			}
		})
	}
}

func TestJWKSInitialFetchFails(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwk(t, "rsa-a", &k.rsaA.PublicKey))
	srv.setFailure(http.StatusServiceUnavailable, nil)
	clock := newFakeClock()
	a := newAuth(t, jwksConfig(srv.URL), Options{now: clock.Now})
	tok := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", goodClaims(nil))
	if _, err := a.Authenticate(bearer(tok)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("without keys: %v, want ErrUnknownKey", err)
	}
	srv.setFailure(0, nil)
	clock.Advance(jwksMinRefetch + time.Second)
	if _, err := a.Authenticate(bearer(tok)); err != nil {
		t.Fatalf("after the server recovered: %v", err)
	}
}

func TestJWKSBackgroundRefresh(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwk(t, "rsa-a", &k.rsaA.PublicKey))
	clock := newFakeClock() // never advanced: requests cannot trigger fetches
	cfg := jwksConfig(srv.URL)
	cfg.JWT.JWKSRefresh = time.Second
	a, err := New(t.Context(), cfg, Options{now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv.setKeys(jwk(t, "rsa-b", &k.rsaB.PublicKey))
	tok := sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b", goodClaims(nil))
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := a.Authenticate(bearer(tok))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("background refresh never installed the new key: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.Close()
	a.Close() // idempotent
	n := srv.fetches.Load()
	time.Sleep(1500 * time.Millisecond)
	if m := srv.fetches.Load(); m != n {
		t.Fatalf("%d fetches after Close, want none", m-n)
	}
}

// TestJWKSIgnoresSymmetricKeys publishes an "oct" key: a JWKS must never
// turn into a source of HMAC secrets.
func TestJWKSIgnoresSymmetricKeys(t *testing.T) {
	k := keys()
	secret := []byte(strings.Repeat("s", 32))
	oct := map[string]any{"kty": "oct", "kid": "oct-1", "k": base64.RawURLEncoding.EncodeToString(secret)}
	srv := newJWKSServer(t, oct, jwk(t, "rsa-a", &k.rsaA.PublicKey))
	a := newAuth(t, jwksConfig(srv.URL), Options{})
	tok := sign(t, jwt.SigningMethodHS256, secret, "oct-1", goodClaims(nil))
	if _, err := a.Authenticate(bearer(tok)); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("HS256 with a JWKS oct key: %v, want ErrBadSignature", err)
	}
}

func TestParseJWKS(t *testing.T) {
	k := keys()
	good := jwk(t, "good", &k.ecA.PublicKey)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	with := func(base map[string]any, kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	b64 := base64.RawURLEncoding.EncodeToString
	tests := []struct {
		name string
		key  map[string]any
		want string // fragment of the skip reason
	}{
		{"oct", map[string]any{"kty": "oct", "k": "c2VjcmV0"}, `kty "oct"`},
		{"OKP", map[string]any{"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}, `kty "OKP"`},
		{"P-384", with(good, "crv", "P-384"), `curve "P-384"`},
		{"encryption key", with(good, "use", "enc"), `use is "enc"`},
		{"key_ops without verify", with(good, "key_ops", []string{"encrypt"}), "key_ops"},
		{"PS256", jwk(t, "ps", &k.rsaA.PublicKey), ""}, // replaced below
		{"private", with(good, "d", "AAAA"), "private key material"},
		{"short x", with(good, "x", b64([]byte("short"))), "bad x or y"},
		{"point off the curve", with(good, "y", b64(make([]byte, 32))), "kid"},
		{"RSA 1024", jwk(t, "small", &small.PublicKey), "1024 bits"},
		{"RSA bad e", with(jwk(t, "e", &k.rsaA.PublicKey), "e", "!!"), "bad e"},
		{"RSA even e", with(jwk(t, "e", &k.rsaA.PublicKey), "e", b64([]byte{4})), "exponent"},
	}
	tests[5].key["alg"], tests[5].want = "PS256", `alg "PS256"`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Appendf(nil, `{"keys":[%s,%s]}`, mustJSON(t, tt.key), mustJSON(t, good))
			set, skipped, err := parseJWKS(body)
			if err != nil {
				t.Fatalf("parseJWKS: %v", err)
			}
			if len(set.keys) != 1 || set.keys[0].kid != "good" {
				t.Fatalf("kept %d keys, want only the good one", len(set.keys))
			}
			if len(skipped) != 1 || !strings.Contains(skipped[0], tt.want) {
				t.Fatalf("skipped = %q, want one reason containing %q", skipped, tt.want)
			}
			if _, _, err := parseJWKS(fmt.Appendf(nil, `{"keys":[%s]}`, mustJSON(t, tt.key))); err == nil {
				t.Fatal("a set of only this key was accepted")
			}
		})
	}
}

// TestJWKSRefusesDowngrade redirects the key set fetch to plain http on a
// remote host, where anyone on the path could substitute keys.
func TestJWKSRefusesDowngrade(t *testing.T) {
	k := keys()
	redirect := httptest.NewServer(http.RedirectHandler("http://idp.example.com/jwks", http.StatusFound))
	t.Cleanup(redirect.Close)
	var logs syncBuffer
	a := newAuth(t, jwksConfig(redirect.URL), Options{Logger: debugLogger(&logs)})
	tok := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", goodClaims(nil))
	if _, err := a.Authenticate(bearer(tok)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Authenticate: %v, want ErrUnknownKey", err)
	}
	if !strings.Contains(logs.String(), "refusing redirect") {
		t.Fatalf("the downgrade was not refused:\n%s", logs.String())
	}
}
