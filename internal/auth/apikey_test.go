package auth

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

const (
	ciKey      = "ci-0123456789abcdef0123456789abcdef"
	opsKey     = "ops-fedcba9876543210fedcba98765432"
	revokedKey = "old-00000000000000000000000000000000"
)

func apiKeyConfig() Config {
	return Config{Mode: ModeAPIKey, APIKeys: []APIKey{
		{Name: "ci", SHA256: digest(ciKey)},
		{Name: "ops", Key: opsKey},
		{Name: "ci", SHA256: strings.TrimPrefix(digest(revokedKey), "sha256:"), Revoked: true},
	}}
}

func TestAPIKeyAccepts(t *testing.T) {
	a := newAuth(t, apiKeyConfig(), Options{})
	tests := []struct {
		name string
		req  *http.Request
		want string
	}{
		{"bearer with digest config", bearer(ciKey), "ci"},
		{"X-API-Key", request("X-API-Key", ciKey), "ci"},
		{"literal key config", bearer(opsKey), "ops"},
		{"lower-case scheme", request("Authorization", "bearer "+opsKey), "ops"},
		{"both headers agreeing", request("Authorization", "Bearer "+ciKey, "X-API-Key", ciKey), "ci"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.Authenticate(tt.req)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if id.Name != tt.want || id.Method != ModeAPIKey || id.Anonymous() {
				t.Fatalf("identity = %+v, want name %q method api_key", id, tt.want)
			}
		})
	}
}

func TestAPIKeyRejects(t *testing.T) {
	a := newAuth(t, apiKeyConfig(), Options{})
	tests := []struct {
		name string
		req  *http.Request
		want error
	}{
		{"missing", request(), ErrMissingCredentials},
		{"basic scheme", request("Authorization", "Basic Y2k6c2VjcmV0"), ErrMalformed},
		{"empty bearer", request("Authorization", "Bearer "), ErrMalformed},
		{"bearer without space", request("Authorization", "Bearer"), ErrMalformed},
		{"control character", request("Authorization", "Bearer abc\x01def"), ErrMalformed},
		{"space inside token", request("Authorization", "Bearer abc def"), ErrMalformed},
		{"two Authorization headers", request("Authorization", "Bearer "+ciKey, "Authorization", "Bearer "+ciKey), ErrMalformed},
		{"two X-API-Key headers", request("X-API-Key", ciKey, "X-API-Key", ciKey), ErrMalformed},
		{"conflicting headers", request("Authorization", "Bearer "+ciKey, "X-API-Key", opsKey), ErrMalformed},
		{"oversized", bearer(strings.Repeat("k", maxCredentialLen+1)), ErrMalformed},
		{"revoked", bearer(revokedKey), ErrRevoked},
		{"revoked via X-API-Key", request("X-API-Key", revokedKey), ErrRevoked},
		{"unknown", bearer("ci-0123456789abcdef0123456789abcdeX"), ErrInvalidKey},
		{"digest presented as key", bearer(digest(ciKey)), ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.Authenticate(tt.req)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Authenticate = %+v, %v; want %v", id, err, tt.want)
			}
			if id.Name != "" {
				t.Fatalf("rejected request got identity %+v", id)
			}
		})
	}
	t.Run("revoked reason", func(t *testing.T) {
		_, err := a.Authenticate(bearer(revokedKey))
		if got := reason(err); got != "revoked" {
			t.Fatalf("reason = %q, want revoked", got)
		}
		// The key is named by its short id, never quoted.
		if want := digest(revokedKey)[len("sha256:"):][:8]; !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q lacks key id %s", err, want)
		}
	})
}

func TestNoneMode(t *testing.T) {
	a := newAuth(t, Config{Mode: ModeNone}, Options{})
	for _, r := range []*http.Request{request(), bearer("whatever"), request("Authorization", "garbage")} {
		id, err := a.Authenticate(r)
		if err != nil || !id.Anonymous() || id.Name != AnonymousName || id.Method != ModeNone {
			t.Fatalf("Authenticate = %+v, %v; want anonymous", id, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	k := keys()
	privDER, _ := pemPrivate(k)
	tests := []struct {
		name string
		cfg  Config
		want string // a fragment naming the field
	}{
		{"empty mode", Config{}, "Mode: required"},
		{"unknown mode", Config{Mode: "basic"}, `Mode: unknown mode "basic"`},
		{"keys in none mode", Config{Mode: ModeNone, APIKeys: []APIKey{{Name: "a", Key: ciKey}}}, "APIKeys: set, but Mode"},
		{"jwt in api_key mode", Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Name: "a", Key: ciKey}}, JWT: JWTConfig{Issuer: "x"}}, "JWT: set, but Mode"},
		{"metadata in api_key mode", Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Name: "a", Key: ciKey}},
			ResourceMetadata: &ResourceMetadata{Resource: testAudience}}, "ResourceMetadata: set, but Mode"},
		{"no keys", Config{Mode: ModeAPIKey}, "APIKeys: at least one"},
		{"no name", Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Key: ciKey}}}, "APIKeys[0].Name: required"},
		{"no key", Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Name: "a"}}}, "APIKeys[0]: Key or SHA256 is required"},
		{"both", Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Name: "a", Key: ciKey, SHA256: digest(ciKey)}}}, "APIKeys[0]: set either"},
		{"short key", Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Name: "a", Key: "short"}}}, "APIKeys[0].Key: shorter"},
		{"digest in Key", Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Name: "a", Key: digest(ciKey)}}}, "APIKeys[0].Key: looks like a digest"},
		{"bad digest", Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Name: "a", SHA256: "sha256:abc"}}}, "APIKeys[0].SHA256"},
		{"duplicate", Config{Mode: ModeAPIKey, APIKeys: []APIKey{{Name: "a", Key: ciKey}, {Name: "b", SHA256: digest(ciKey)}}}, "APIKeys[1]: same key as APIKeys[0]"},
		{"jwt without issuer", Config{Mode: ModeJWT, JWT: JWTConfig{Audience: []string{"a"}, HMACSecret: k.hmac}}, "JWT.Issuer: required"},
		{"jwt without audience", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", HMACSecret: k.hmac}}, "JWT.Audience: at least one"},
		{"jwt without keys", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}}}, "JWT: one of HMACSecret"},
		{"short secret", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: []byte("short")}}, "JWT.HMACSecret: 5 bytes"},
		{"alg none", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: k.hmac, Algorithms: []string{"none"}}}, `JWT.Algorithms[0]: "none" is not supported`},
		{"HS512", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: k.hmac, Algorithms: []string{"HS256", "HS512"}}}, `JWT.Algorithms[1]: "HS512"`},
		{"RS256 without keys", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: k.hmac, Algorithms: []string{"RS256"}}}, "JWT.Algorithms[0]: RS256 needs"},
		{"secret unused", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: k.hmac,
			PublicKeysPEM: pemKey(t, "", &k.rsaA.PublicKey), Algorithms: []string{"RS256"}}}, "JWT.HMACSecret: set, but Algorithms lacks HS256"},
		{"private key PEM", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, PublicKeysPEM: privDER}}, "JWT.PublicKeysPEM: block 1 is a private key"},
		{"garbage PEM", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, PublicKeysPEM: []byte("not pem")}}, "JWT.PublicKeysPEM: no PEM block"},
		{"duplicate PEM kid", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"},
			PublicKeysPEM: append(pemKey(t, "k1", &k.rsaA.PublicKey), pemKey(t, "k1", &k.ecA.PublicKey)...)}}, `block 2: duplicate kid "k1"`},
		{"P-384 key", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, PublicKeysPEM: pemKey(t, "", p384Public(t))}}, "want P-256"},
		{"plain http JWKS", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, JWKSURL: "http://idp.example.com/jwks"}}, "JWT.JWKSURL"},
		{"negative leeway", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: k.hmac, Leeway: -1}}, "JWT.Leeway"},
		{"tiny refresh", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, JWKSURL: "https://idp.example.com/jwks", JWKSRefresh: 1}}, "JWT.JWKSRefresh"},
		{"metadata without servers", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: k.hmac},
			ResourceMetadata: &ResourceMetadata{Resource: testAudience}}, "ResourceMetadata.AuthorizationServers: at least one"},
		{"metadata resource with fragment", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: k.hmac},
			ResourceMetadata: &ResourceMetadata{Resource: testAudience + "#x", AuthorizationServers: []string{testIssuer}}}, "ResourceMetadata.Resource: must not have a fragment"},
		{"metadata plain http server", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: k.hmac},
			ResourceMetadata: &ResourceMetadata{Resource: testAudience, AuthorizationServers: []string{"http://idp.example.com"}}}, "ResourceMetadata.AuthorizationServers[0]"},
		{"metadata query bearer method", Config{Mode: ModeJWT, JWT: JWTConfig{Issuer: "i", Audience: []string{"a"}, HMACSecret: k.hmac},
			ResourceMetadata: &ResourceMetadata{Resource: testAudience, AuthorizationServers: []string{testIssuer}, BearerMethodsSupported: []string{"query"}}},
			"ResourceMetadata.BearerMethodsSupported[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(t.Context(), tt.cfg, Options{})
			if err == nil {
				a.Close()
				t.Fatal("New accepted the config")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}
