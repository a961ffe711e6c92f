package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	testIssuer   = "https://idp.example.com"
	testAudience = "https://gw.example.com/mcp"
)

// testKeys are generated once per test binary: RSA generation is slow.
type testKeys struct {
	rsaA, rsaB *rsa.PrivateKey
	ecA, ecB   *ecdsa.PrivateKey
	hmac       []byte
}

var keys = sync.OnceValue(func() *testKeys {
	k := &testKeys{hmac: make([]byte, 32)}
	var err error
	if k.rsaA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.rsaB, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.ecA, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	if k.ecB, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	rand.Read(k.hmac)
	return k
})

// goodClaims returns claims that pass every check, with overrides applied;
// a nil override value deletes the claim.
func goodClaims(overrides map[string]any) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{
		"iss":   testIssuer,
		"aud":   testAudience,
		"sub":   "alice",
		"iat":   now.Unix(),
		"nbf":   now.Unix(),
		"exp":   now.Add(time.Hour).Unix(),
		"scope": "tools:read tools:call",
	}
	for k, v := range overrides {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign signs claims with key using method, naming kid when not empty.
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	return s
}

// pemKey encodes pub as a PUBLIC KEY block with an optional kid header.
func pemKey(t testing.TB, kid string, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	b := &pem.Block{Type: "PUBLIC KEY", Bytes: der}
	if kid != "" {
		b.Headers = map[string]string{"kid": kid}
	}
	return pem.EncodeToMemory(b)
}

// jwk builds the JSON Web Key of pub.
func jwk(t testing.TB, kid string, pub any) map[string]any {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	switch p := pub.(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
			"n": b64(p.N.Bytes()), "e": b64(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		raw, err := p.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
			"x": b64(raw[1:33]), "y": b64(raw[33:])}
	}
	t.Fatalf("jwk: unsupported %T", pub)
	return nil
}

// jwksServer is a real JWKS endpoint on 127.0.0.1 that counts its fetches.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int64
	mu      sync.Mutex
	keys    []map[string]any
	status  int    // answered instead of the set when not 0
	body    []byte // served instead of the set when not nil
}

func newJWKSServer(t testing.TB, keys ...map[string]any) *jwksServer {
	s := &jwksServer{keys: keys}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.status != 0 {
			w.WriteHeader(s.status)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		if s.body != nil {
			w.Write(s.body)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"keys": s.keys})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setKeys(keys ...map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

func (s *jwksServer) setFailure(status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

// fakeClock is a settable clock for the JWKS refetch interval.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newAuth builds an Authenticator that t closes.
func newAuth(t testing.TB, cfg Config, opts Options) *Authenticator {
	t.Helper()
	a, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(a.Close)
	return a
}

// request builds a request with the given header name/value pairs.
func request(kv ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://gw.example.com/mcp", nil)
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Add(kv[i], kv[i+1])
	}
	return r
}

func bearer(tok string) *http.Request { return request("Authorization", "Bearer "+tok) }

// digest returns the "sha256:<hex>" form of key.
func digest(key string) string {
	d := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(d[:])
}

// syncBuffer is a bytes.Buffer safe for a logger used by several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func debugLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// pemPrivate encodes the first RSA key as a PKCS #8 private key block.
func pemPrivate(k *testKeys) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.rsaA)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), err
}

func p384Public(t testing.TB) *ecdsa.PublicKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &k.PublicKey
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
