package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	jwksFetchTimeout = 5 * time.Second
	jwksMaxBody      = 1 << 20
	// jwksMinRefetch spaces the fetches that unknown key ids trigger, so
	// that a flood of forged tokens cannot turn into a flood of fetches.
	jwksMinRefetch = 30 * time.Second
)

// jwksSource keeps the keys of a JWKS URL: fetched at start, every refresh
// interval and, at most once per jwksMinRefetch, when a token names an
// unknown key. A failed fetch keeps the last good keys.
type jwksSource struct {
	url     string
	logURL  string // url without secrets, for logs
	client  *http.Client
	log     *slog.Logger
	now     func() time.Time
	refresh time.Duration

	keys atomic.Pointer[keySet] // nil until a fetch succeeds

	mu          sync.Mutex // serializes fetches and guards the fields below
	lastAttempt time.Time
	lastKids    string // the kids of the current set, to log changes only

	ctx       context.Context // cancelled by close
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// newJWKSSource validates rawURL, fetches the key set once with ctx and
// starts the refresher.
func newJWKSSource(ctx context.Context, rawURL string, refresh time.Duration, client *http.Client, log *slog.Logger, now func() time.Time) (*jwksSource, error) {
	u, err := checkURL("JWT.JWKSURL", rawURL)
	if err != nil {
		return nil, err
	}
	if client == nil {
		client = &http.Client{Timeout: jwksFetchTimeout, CheckRedirect: refuseDowngrade}
	}
	s := &jwksSource{
		url:     u.String(),
		logURL:  u.Redacted(),
		client:  client,
		log:     log,
		now:     now,
		refresh: refresh,
		done:    make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	s.lastAttempt = now()
	if err := s.fetch(ctx); err != nil {
		log.Warn("auth: initial JWKS fetch failed; retrying in the background", "url", s.logURL, "error", err)
	}
	s.mu.Unlock()
	go s.run()
	return s, nil
}

// refuseDowngrade follows at most 5 redirects and none from https to plain
// http on a remote host: the key set decides who is authenticated.
func refuseDowngrade(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if req.URL.Scheme != "https" && (req.URL.Scheme != "http" || !isLoopback(req.URL.Hostname())) {
		return fmt.Errorf("refusing redirect to %s", req.URL.Redacted())
	}
	return nil
}

// current returns the last good key set, or nil.
func (s *jwksSource) current() *keySet { return s.keys.Load() }

// close stops the refresher and waits for it.
func (s *jwksSource) close() {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
	})
}

// run refreshes the key set until close; while it has none, it retries
// every jwksMinRefetch.
func (s *jwksSource) run() {
	defer close(s.done)
	for {
		wait := s.refresh
		if s.current() == nil {
			wait = min(wait, jwksMinRefetch)
		}
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.mu.Lock()
		s.lastAttempt = s.now()
		if err := s.fetch(s.ctx); err != nil && s.ctx.Err() == nil {
			s.log.Warn("auth: JWKS refresh failed; keeping the last good keys", "url", s.logURL, "error", err)
		}
		s.mu.Unlock()
	}
}

// refetch fetches the key set for a token whose key is unknown, unless a
// fetch was attempted less than jwksMinRefetch ago. Callers arriving while
// a fetch runs wait for it, then find the interval not yet over. It reports
// whether it fetched a key set.
func (s *jwksSource) refetch() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.Sub(s.lastAttempt) < jwksMinRefetch {
		return false
	}
	s.lastAttempt = now
	// Not the request's context: a client hanging up must not abort the
	// fetch it paid the interval for.
	if err := s.fetch(s.ctx); err != nil {
		s.log.Warn("auth: JWKS fetch for an unknown key failed; keeping the last good keys", "url", s.logURL, "error", err)
		return false
	}
	return true
}

// fetch gets, parses and installs the key set. The caller holds s.mu.
func (s *jwksSource) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return fmt.Errorf("building JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("fetching JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching JWKS: status %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBody+1))
	if err != nil {
		return fmt.Errorf("reading JWKS: %w", err)
	}
	if len(body) > jwksMaxBody {
		return fmt.Errorf("reading JWKS: larger than %d bytes", jwksMaxBody)
	}
	set, skipped, err := parseJWKS(body)
	if err != nil {
		return err
	}
	s.keys.Store(set)
	kids := make([]string, len(set.keys))
	for i, k := range set.keys {
		kids[i] = k.kid
	}
	if joined := strings.Join(kids, ","); joined != s.lastKids {
		s.lastKids = joined
		s.log.Info("auth: JWKS keys updated", "url", s.logURL, "kids", kids, "skipped", skipped)
	}
	return nil
}

// parseJWKS parses a JSON Web Key Set (RFC 7517), keeping its RSA and P-256
// EC signature keys and describing the keys it skips. It fails when no key
// is usable.
func parseJWKS(data []byte) (set *keySet, skipped []string, err error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("decoding JWKS: %w", err)
	}
	set = &keySet{}
	for i, raw := range doc.Keys {
		if len(set.keys) == maxKeys {
			skipped = append(skipped, fmt.Sprintf("keys[%d:]: more than %d keys", i, maxKeys))
			break
		}
		k, err := parseJWK(raw)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("keys[%d]: %v", i, err))
			continue
		}
		set.keys = append(set.keys, k)
	}
	if len(set.keys) == 0 {
		return nil, skipped, fmt.Errorf("JWKS has no usable key (%d skipped)", len(doc.Keys))
	}
	return set, skipped, nil
}

// parseJWK parses one JSON Web Key (RFC 7517 §4, RFC 7518 §6).
func parseJWK(raw json.RawMessage) (pubKey, error) {
	var k struct {
		Kty    string   `json:"kty"`
		Kid    string   `json:"kid"`
		Use    string   `json:"use"`
		Alg    string   `json:"alg"`
		KeyOps []string `json:"key_ops"`
		Crv    string   `json:"crv"`
		N      string   `json:"n"`
		E      string   `json:"e"`
		X      string   `json:"x"`
		Y      string   `json:"y"`
		D      string   `json:"d"`
	}
	if err := json.Unmarshal(raw, &k); err != nil {
		return pubKey{}, fmt.Errorf("decoding: %w", err)
	}
	switch {
	case len(k.Kid) > maxKidLen:
		return pubKey{}, fmt.Errorf("kid longer than %d bytes", maxKidLen)
	case k.Use != "" && k.Use != "sig":
		return pubKey{}, fmt.Errorf("kid %q: use is %q, not sig", k.Kid, k.Use)
	case k.KeyOps != nil && !slices.Contains(k.KeyOps, "verify"):
		return pubKey{}, fmt.Errorf("kid %q: key_ops lacks verify", k.Kid)
	case k.D != "":
		return pubKey{}, fmt.Errorf("kid %q: holds private key material", k.Kid)
	}
	var key any
	switch k.Kty {
	case "RSA":
		if k.Alg != "" && k.Alg != algRS256 {
			return pubKey{}, fmt.Errorf("kid %q: alg %q is not supported", k.Kid, k.Alg)
		}
		n, err := b64url(k.N)
		if err != nil || len(n) == 0 {
			return pubKey{}, fmt.Errorf("kid %q: bad n", k.Kid)
		}
		e, err := b64url(k.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return pubKey{}, fmt.Errorf("kid %q: bad e", k.Kid)
		}
		eInt := new(big.Int).SetBytes(e)
		if !eInt.IsInt64() || eInt.Int64() > 1<<31-1 {
			return pubKey{}, fmt.Errorf("kid %q: bad e", k.Kid)
		}
		key = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(eInt.Int64())}
	case "EC":
		if k.Crv != "P-256" {
			return pubKey{}, fmt.Errorf("kid %q: curve %q is not supported", k.Kid, k.Crv)
		}
		if k.Alg != "" && k.Alg != algES256 {
			return pubKey{}, fmt.Errorf("kid %q: alg %q is not supported", k.Kid, k.Alg)
		}
		x, errX := b64url(k.X)
		y, errY := b64url(k.Y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return pubKey{}, fmt.Errorf("kid %q: bad x or y", k.Kid)
		}
		pk, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return pubKey{}, fmt.Errorf("kid %q: %w", k.Kid, err)
		}
		key = pk
	default:
		return pubKey{}, fmt.Errorf("kid %q: kty %q is not supported", k.Kid, k.Kty)
	}
	if err := checkPublicKey(key); err != nil {
		return pubKey{}, fmt.Errorf("kid %q: %w", k.Kid, err)
	}
	return pubKey{kid: k.Kid, key: key}, nil
}

// b64url decodes base64url, tolerating the padding RFC 7515 leaves out.
func b64url(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
