package auth

import (
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// staticJWTConfig accepts HS256 with the test secret and RS256/ES256 with
// the "A" keys from a PEM file.
func staticJWTConfig(t testing.TB) Config {
	k := keys()
	return Config{Mode: ModeJWT, JWT: JWTConfig{
		Issuer:        testIssuer,
		Audience:      []string{testAudience, "https://other.example.com"},
		HMACSecret:    k.hmac,
		PublicKeysPEM: append(pemKey(t, "rsa-a", &k.rsaA.PublicKey), pemKey(t, "ec-a", &k.ecA.PublicKey)...),
	}}
}

func TestJWTAccepts(t *testing.T) {
	k := keys()
	a := newAuth(t, staticJWTConfig(t), Options{})
	tests := []struct {
		name   string
		token  string
		scopes []string
	}{
		{"HS256", sign(t, jwt.SigningMethodHS256, k.hmac, "", goodClaims(nil)), []string{"tools:read", "tools:call"}},
		{"RS256 with kid", sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", goodClaims(nil)), []string{"tools:read", "tools:call"}},
		{"RS256 without kid", sign(t, jwt.SigningMethodRS256, k.rsaA, "", goodClaims(nil)), []string{"tools:read", "tools:call"}},
		{"ES256 with kid", sign(t, jwt.SigningMethodES256, k.ecA, "ec-a", goodClaims(nil)), []string{"tools:read", "tools:call"}},
		{"audience array", sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a",
			goodClaims(map[string]any{"aud": []string{"https://elsewhere", testAudience}})), []string{"tools:read", "tools:call"}},
		{"second audience", sign(t, jwt.SigningMethodHS256, k.hmac, "",
			goodClaims(map[string]any{"aud": "https://other.example.com"})), []string{"tools:read", "tools:call"}},
		{"expired within leeway", sign(t, jwt.SigningMethodHS256, k.hmac, "",
			goodClaims(map[string]any{"exp": time.Now().Add(-10 * time.Second).Unix()})), []string{"tools:read", "tools:call"}},
		{"scp array", sign(t, jwt.SigningMethodHS256, k.hmac, "",
			goodClaims(map[string]any{"scope": nil, "scp": []string{"a", "b", "a"}})), []string{"a", "b"}},
		{"no scopes", sign(t, jwt.SigningMethodHS256, k.hmac, "", goodClaims(map[string]any{"scope": nil})), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.Authenticate(bearer(tt.token))
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if id.Name != "alice" || id.Method != ModeJWT || id.Anonymous() {
				t.Fatalf("identity = %+v", id)
			}
			if !slices.Equal(id.Scopes, tt.scopes) {
				t.Fatalf("scopes = %q, want %q", id.Scopes, tt.scopes)
			}
			if id.Claims["iss"] != testIssuer || id.Claims["sub"] != "alice" {
				t.Fatalf("claims = %v", id.Claims)
			}
		})
	}
}

func TestJWTRejects(t *testing.T) {
	k := keys()
	a := newAuth(t, staticJWTConfig(t), Options{})
	hs := func(over map[string]any) string { return sign(t, jwt.SigningMethodHS256, k.hmac, "", goodClaims(over)) }
	now := time.Now()
	good := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", goodClaims(nil))
	parts := strings.Split(good, ".")
	forgedPayload := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"` + testIssuer + `","aud":"` + testAudience +
		`","sub":"mallory","exp":` + strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + `}`))
	noneTok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", goodClaims(nil))
	tests := []struct {
		name  string
		token string // "" sends no Authorization header
		want  error
	}{
		{"missing", "", ErrMissingCredentials},
		{"malformed: one segment", "notajwt", ErrMalformed},
		{"malformed: garbage segments", "a.b.c", ErrMalformed},
		{"malformed: header not JSON", base64.RawURLEncoding.EncodeToString([]byte("{x")) + "." + parts[1] + "." + parts[2], ErrMalformed},
		{"malformed: kid not a string", signWithHeader(t, jwt.SigningMethodRS256, k.rsaA, map[string]any{"kid": 7}, goodClaims(nil)), ErrMalformed},
		{"malformed: exp not a number", hs(map[string]any{"exp": "tomorrow"}), ErrMalformed},
		{"malformed: no exp", hs(map[string]any{"exp": nil}), ErrMalformed},
		{"malformed: no identity claim", hs(map[string]any{"sub": nil}), ErrMalformed},
		{"expired", hs(map[string]any{"exp": now.Add(-time.Hour).Unix(), "iat": now.Add(-2 * time.Hour).Unix(), "nbf": nil}), ErrExpired},
		{"expired beyond leeway", hs(map[string]any{"exp": now.Add(-40 * time.Second).Unix()}), ErrExpired},
		{"not yet valid", hs(map[string]any{"nbf": now.Add(time.Hour).Unix()}), ErrNotYetValid},
		{"issued in the future", hs(map[string]any{"iat": now.Add(time.Hour).Unix()}), ErrNotYetValid},
		{"wrong issuer", hs(map[string]any{"iss": "https://evil.example.com"}), ErrWrongIssuer},
		{"no issuer", hs(map[string]any{"iss": nil}), ErrWrongIssuer},
		{"wrong audience", hs(map[string]any{"aud": "https://evil.example.com"}), ErrWrongAudience},
		{"wrong audience array", hs(map[string]any{"aud": []string{"x", "y"}}), ErrWrongAudience},
		{"no audience", hs(map[string]any{"aud": nil}), ErrWrongAudience},
		{"wrong signature RS256", sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-a", goodClaims(nil)), ErrBadSignature},
		{"wrong signature ES256", sign(t, jwt.SigningMethodES256, k.ecB, "ec-a", goodClaims(nil)), ErrBadSignature},
		{"wrong signature HS256", sign(t, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), "", goodClaims(nil)), ErrBadSignature},
		{"forged payload", parts[0] + "." + forgedPayload + "." + parts[2], ErrBadSignature},
		{"unknown key id", sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b", goodClaims(nil)), ErrUnknownKey},
		{"kid of an EC key on RS256", sign(t, jwt.SigningMethodRS256, k.rsaA, "ec-a", goodClaims(nil)), ErrBadSignature},
		{"alg none", noneTok, ErrBadSignature},
		{"alg none without signature dot", strings.TrimSuffix(noneTok, "."), ErrMalformed},
		{"alg HS512", sign(t, jwt.SigningMethodHS512, k.hmac, "", goodClaims(nil)), ErrBadSignature},
		{"alg RS384", sign(t, jwt.SigningMethodRS384, k.rsaA, "rsa-a", goodClaims(nil)), ErrBadSignature},
		{"alg PS256", sign(t, jwt.SigningMethodPS256, k.rsaA, "rsa-a", goodClaims(nil)), ErrBadSignature},
		{"alg confusion: HS256 keyed with the RSA public key PEM", sign(t, jwt.SigningMethodHS256, pemKey(t, "rsa-a", &k.rsaA.PublicKey), "rsa-a", goodClaims(nil)), ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request()
			if tt.token != "" {
				r = bearer(tt.token)
			}
			id, err := a.Authenticate(r)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Authenticate = %+v, %v; want %v", id, err, tt.want)
			}
			if id.Name != "" {
				t.Fatalf("rejected token got identity %+v", id)
			}
		})
	}
}

// TestJWTAlgConfusion signs HS256 tokens with the bytes of the RSA public
// key, as an attacker who knows the public key would, against a verifier
// that holds only public keys.
func TestJWTAlgConfusion(t *testing.T) {
	k := keys()
	pemBytes := pemKey(t, "", &k.rsaA.PublicKey)
	a := newAuth(t, Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: testIssuer, Audience: []string{testAudience},
		PublicKeysPEM: pemBytes}}, Options{})
	der := k.rsaA.PublicKey.N.Bytes()
	for name, secret := range map[string][]byte{"PEM": pemBytes, "modulus": der} {
		t.Run(name, func(t *testing.T) {
			tok := sign(t, jwt.SigningMethodHS256, secret, "", goodClaims(nil))
			if _, err := a.Authenticate(bearer(tok)); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Authenticate: %v, want ErrBadSignature", err)
			}
		})
	}
	// The same verifier does accept RS256, so the rejection is the alg.
	if _, err := a.Authenticate(bearer(sign(t, jwt.SigningMethodRS256, k.rsaA, "", goodClaims(nil)))); err != nil {
		t.Fatalf("RS256: %v", err)
	}
}

func TestJWTOptions(t *testing.T) {
	k := keys()
	t.Run("identity claim", func(t *testing.T) {
		cfg := staticJWTConfig(t)
		cfg.JWT.IdentityClaim = "email"
		a := newAuth(t, cfg, Options{})
		id, err := a.Authenticate(bearer(sign(t, jwt.SigningMethodHS256, k.hmac, "", goodClaims(map[string]any{"email": "bob@example.com"}))))
		if err != nil || id.Name != "bob@example.com" {
			t.Fatalf("Authenticate = %+v, %v", id, err)
		}
		if _, err := a.Authenticate(bearer(sign(t, jwt.SigningMethodHS256, k.hmac, "", goodClaims(nil)))); !errors.Is(err, ErrMalformed) {
			t.Fatalf("token without email: %v, want ErrMalformed", err)
		}
	})
	t.Run("leeway", func(t *testing.T) {
		tok := sign(t, jwt.SigningMethodHS256, k.hmac, "", goodClaims(map[string]any{"exp": time.Now().Add(-90 * time.Second).Unix()}))
		def := newAuth(t, staticJWTConfig(t), Options{})
		if _, err := def.Authenticate(bearer(tok)); !errors.Is(err, ErrExpired) {
			t.Fatalf("default leeway: %v, want ErrExpired", err)
		}
		cfg := staticJWTConfig(t)
		cfg.JWT.Leeway = 2 * time.Minute
		wide := newAuth(t, cfg, Options{})
		if _, err := wide.Authenticate(bearer(tok)); err != nil {
			t.Fatalf("2m leeway: %v", err)
		}
	})
	t.Run("algorithms restrict", func(t *testing.T) {
		cfg := staticJWTConfig(t)
		cfg.JWT.Algorithms = []string{"HS256", "ES256"}
		a := newAuth(t, cfg, Options{})
		if _, err := a.Authenticate(bearer(sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", goodClaims(nil)))); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("RS256 when not allowed: %v", err)
		}
		if _, err := a.Authenticate(bearer(sign(t, jwt.SigningMethodES256, k.ecA, "ec-a", goodClaims(nil)))); err != nil {
			t.Fatalf("ES256: %v", err)
		}
	})
	t.Run("unnamed PEM key serves any kid", func(t *testing.T) {
		a := newAuth(t, Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: testIssuer, Audience: []string{testAudience},
			PublicKeysPEM: append(pemKey(t, "named", &k.rsaB.PublicKey), pemKey(t, "", &k.rsaA.PublicKey)...)}}, Options{})
		if _, err := a.Authenticate(bearer(sign(t, jwt.SigningMethodRS256, k.rsaA, "idp-key-7", goodClaims(nil)))); err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
		// A kid naming a key pins that key.
		if _, err := a.Authenticate(bearer(sign(t, jwt.SigningMethodRS256, k.rsaA, "named", goodClaims(nil)))); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("kid of the other key: %v, want ErrBadSignature", err)
		}
	})
}

// signWithHeader signs claims with extra header fields.
func signWithHeader(t testing.TB, method jwt.SigningMethod, key any, header map[string]any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
