package auth

import (
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The signing algorithms ModeJWT supports.
const (
	algHS256 = "HS256"
	algRS256 = "RS256"
	algES256 = "ES256"
)

const (
	defaultLeeway        = 30 * time.Second
	maxLeeway            = 5 * time.Minute
	defaultJWKSRefresh   = 5 * time.Minute
	minJWKSRefresh       = time.Second
	defaultIdentityClaim = "sub"
	minHMACSecretLen     = 32 // RFC 7518 §3.2: at least the hash size
	minRSABits           = 2048
	maxRSABits           = 8192
	maxKeys              = 64 // bounds the keys one token may be tried against
	maxKidLen            = 256
)

// pubKey is a verification key: *rsa.PublicKey or a P-256 *ecdsa.PublicKey.
type pubKey struct {
	kid string // "" when the key is unnamed
	key crypto.PublicKey
}

// keySet is an immutable set of public keys.
type keySet struct {
	keys []pubKey
}

// suits reports whether k verifies signatures of alg.
func (k pubKey) suits(alg string) bool {
	switch key := k.key.(type) {
	case *rsa.PublicKey:
		return alg == algRS256
	case *ecdsa.PublicKey:
		return alg == algES256 && key.Curve == elliptic.P256()
	}
	return false
}

// named returns the keys named kid that suit alg, and whether any key,
// suitable or not, is named kid.
func (s *keySet) named(alg, kid string) (keys []jwt.VerificationKey, seen bool) {
	if s == nil {
		return nil, false
	}
	for _, k := range s.keys {
		if k.kid != kid {
			continue
		}
		seen = true
		if k.suits(alg) {
			keys = append(keys, k.key)
		}
	}
	return keys, seen
}

// suitable returns the keys that suit alg; only the unnamed ones if
// unnamedOnly.
func (s *keySet) suitable(alg string, unnamedOnly bool) []jwt.VerificationKey {
	if s == nil {
		return nil
	}
	var keys []jwt.VerificationKey
	for _, k := range s.keys {
		if k.suits(alg) && (!unnamedOnly || k.kid == "") {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// jwtVerifier verifies the tokens of ModeJWT.
type jwtVerifier struct {
	parser        *jwt.Parser
	algs          []string
	issuer        string
	audience      []string
	identityClaim string
	hmacSecret    []byte
	static        *keySet     // from PublicKeysPEM; nil if none
	jwks          *jwksSource // nil if no JWKSURL
}

// jwtConfigField names the config struct in the errors of newJWTVerifier.
const jwtConfigField = "JWT"

// newJWTVerifier validates cfg and builds the verifier, starting the JWKS
// source if one is configured.
func newJWTVerifier(ctx context.Context, cfg JWTConfig, log *slog.Logger, client *http.Client, now func() time.Time) (*jwtVerifier, error) {
	v, err := jwtClaimsOf(cfg)
	if err != nil {
		return nil, err
	}
	leeway, refresh, err := jwtDurations(cfg)
	if err != nil {
		return nil, err
	}
	if err := v.setKeys(cfg); err != nil {
		return nil, err
	}
	if err := v.setAlgorithms(cfg.Algorithms, v.static != nil || cfg.JWKSURL != ""); err != nil {
		return nil, err
	}
	if cfg.JWKSURL != "" {
		src, err := newJWKSSource(ctx, cfg.JWKSURL, refresh, client, log, now)
		if err != nil {
			return nil, err
		}
		v.jwks = src
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(v.algs),
		jwt.WithIssuer(v.issuer),
		jwt.WithAudience(v.audience...),
		jwt.WithLeeway(leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(now),
		jwt.WithStrictDecoding(),
	)
	return v, nil
}

// jwtClaimsOf returns a verifier holding the claims cfg requires: issuer,
// audiences and the identity claim.
func jwtClaimsOf(cfg JWTConfig) (*jwtVerifier, error) {
	const f = jwtConfigField
	v := &jwtVerifier{issuer: cfg.Issuer, identityClaim: cmp.Or(cfg.IdentityClaim, defaultIdentityClaim)}
	if cfg.Issuer == "" {
		return nil, fmt.Errorf("auth: config: %s.Issuer: required in jwt mode", f)
	}
	for i, a := range cfg.Audience {
		if a == "" {
			return nil, fmt.Errorf("auth: config: %s.Audience[%d]: empty", f, i)
		}
	}
	if len(cfg.Audience) == 0 {
		return nil, fmt.Errorf("auth: config: %s.Audience: at least one audience is required in jwt mode", f)
	}
	v.audience = slices.Clone(cfg.Audience)
	return v, nil
}

// jwtDurations returns the clock leeway and the JWKS refresh interval of
// cfg, defaults applied.
func jwtDurations(cfg JWTConfig) (leeway, refresh time.Duration, err error) {
	const f = jwtConfigField
	leeway = cfg.Leeway
	switch {
	case leeway < 0 || leeway > maxLeeway:
		return 0, 0, fmt.Errorf("auth: config: %s.Leeway: %v is outside [0, %v]", f, leeway, maxLeeway)
	case leeway == 0:
		leeway = defaultLeeway
	}
	refresh = cfg.JWKSRefresh
	switch {
	case refresh == 0:
		refresh = defaultJWKSRefresh
	case refresh < minJWKSRefresh:
		return 0, 0, fmt.Errorf("auth: config: %s.JWKSRefresh: %v is shorter than %v", f, refresh, minJWKSRefresh)
	}
	return leeway, refresh, nil
}

// setKeys sets the HMAC secret and the static public keys of cfg, and
// checks that some key (those two or a JWKS URL) is configured.
func (v *jwtVerifier) setKeys(cfg JWTConfig) error {
	const f = jwtConfigField
	if n := len(cfg.HMACSecret); n > 0 && n < minHMACSecretLen {
		return fmt.Errorf("auth: config: %s.HMACSecret: %d bytes, want at least %d", f, n, minHMACSecretLen)
	}
	v.hmacSecret = slices.Clone(cfg.HMACSecret)
	if len(cfg.PublicKeysPEM) > 0 {
		set, err := parsePEMKeys(cfg.PublicKeysPEM)
		if err != nil {
			return fmt.Errorf("auth: config: %s.PublicKeysPEM: %w", f, err)
		}
		v.static = set
	}
	if len(v.hmacSecret) == 0 && v.static == nil && cfg.JWKSURL == "" {
		return fmt.Errorf("auth: config: %s: one of HMACSecret, PublicKeysPEM and JWKSURL is required", f)
	}
	return nil
}

// setAlgorithms sets the accepted algorithms: algs, checked against the
// configured keys (hasPublic: static keys or a JWKS URL), or when empty
// those the keys allow.
func (v *jwtVerifier) setAlgorithms(algs []string, hasPublic bool) error {
	const f = jwtConfigField
	hasHMAC := len(v.hmacSecret) > 0
	if len(algs) == 0 {
		if hasHMAC {
			v.algs = append(v.algs, algHS256)
		}
		if hasPublic {
			v.algs = append(v.algs, algRS256, algES256)
		}
		return nil
	}
	for i, a := range algs {
		switch a {
		case algHS256:
			if !hasHMAC {
				return fmt.Errorf("auth: config: %s.Algorithms[%d]: HS256 needs HMACSecret", f, i)
			}
		case algRS256, algES256:
			if !hasPublic {
				return fmt.Errorf("auth: config: %s.Algorithms[%d]: %s needs PublicKeysPEM or JWKSURL", f, i, a)
			}
		default:
			return fmt.Errorf("auth: config: %s.Algorithms[%d]: %q is not supported (HS256, RS256, ES256)", f, i, a)
		}
		if !slices.Contains(v.algs, a) {
			v.algs = append(v.algs, a)
		}
	}
	if hasHMAC && !slices.Contains(v.algs, algHS256) {
		return fmt.Errorf("auth: config: %s.HMACSecret: set, but Algorithms lacks HS256", f)
	}
	if hasPublic && !slices.Contains(v.algs, algRS256) && !slices.Contains(v.algs, algES256) {
		return fmt.Errorf("auth: config: %s.Algorithms: public keys are configured, but neither RS256 nor ES256 is allowed", f)
	}
	return nil
}

// verify verifies tok and returns its identity.
func (v *jwtVerifier) verify(tok string) (Identity, error) {
	var keyErr error
	keyfunc := func(t *jwt.Token) (any, error) {
		k, err := v.key(t)
		keyErr = err
		return k, err
	}
	claims := jwt.MapClaims{}
	t, err := v.parser.ParseWithClaims(tok, claims, keyfunc)
	if err != nil {
		if keyErr != nil {
			return Identity{}, keyErr
		}
		return Identity{}, v.classify(t, claims, err)
	}
	name, ok := claims[v.identityClaim].(string)
	if !ok || name == "" {
		return Identity{}, fmt.Errorf("auth: jwt: identity claim %q missing or not a string: %w", v.identityClaim, ErrMalformed)
	}
	return Identity{Name: name, Method: ModeJWT, Scopes: scopes(claims), Claims: claims}, nil
}

// key returns the key or keys that may have signed t. Keys are chosen by
// the algorithm's key type, never the other way round, so that no token can
// make a public key serve as an HMAC secret.
func (v *jwtVerifier) key(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if !slices.Contains(v.algs, alg) { // the parser checked it already
		return nil, fmt.Errorf("auth: jwt: signing algorithm not allowed: %w", ErrBadSignature)
	}
	if alg == algHS256 {
		return v.hmacSecret, nil
	}
	kid := ""
	if raw, ok := t.Header["kid"]; ok {
		s, ok := raw.(string)
		if !ok || s == "" || len(s) > maxKidLen {
			return nil, fmt.Errorf("auth: jwt: kid header is not a usable string: %w", ErrMalformed)
		}
		kid = s
	}
	var keys []jwt.VerificationKey
	if kid == "" {
		keys = v.suitable(alg, false)
		if len(keys) == 0 && v.jwks != nil && v.jwks.refetch() {
			keys = v.suitable(alg, false)
		}
	} else {
		var seen bool
		keys, seen = v.named(alg, kid)
		if len(keys) == 0 && !seen && v.jwks != nil && v.jwks.refetch() {
			keys, seen = v.named(alg, kid)
		}
		if len(keys) == 0 && seen {
			return nil, fmt.Errorf("auth: jwt: key %s does not suit %s: %w", printableKid(kid), alg, ErrBadSignature)
		}
		if len(keys) == 0 {
			keys = v.suitable(alg, true)
		}
	}
	switch len(keys) {
	case 0:
		if kid == "" {
			return nil, fmt.Errorf("auth: jwt: no %s key: %w", alg, ErrUnknownKey)
		}
		return nil, fmt.Errorf("auth: jwt: no key %s: %w", printableKid(kid), ErrUnknownKey)
	case 1:
		return keys[0], nil
	}
	return jwt.VerificationKeySet{Keys: keys}, nil
}

// named looks kid up in the static keys and then the JWKS.
func (v *jwtVerifier) named(alg, kid string) ([]jwt.VerificationKey, bool) {
	keys, seen := v.static.named(alg, kid)
	if v.jwks != nil {
		more, seen2 := v.jwks.current().named(alg, kid)
		keys, seen = append(keys, more...), seen || seen2
	}
	return keys, seen
}

// suitable collects the static and JWKS keys that suit alg.
func (v *jwtVerifier) suitable(alg string, unnamedOnly bool) []jwt.VerificationKey {
	keys := v.static.suitable(alg, unnamedOnly)
	if v.jwks != nil {
		keys = append(keys, v.jwks.current().suitable(alg, unnamedOnly)...)
	}
	return keys
}

// printableKid quotes kid for errors when it is a short plain identifier;
// a kid comes from the client, so anything else is not repeated.
func printableKid(kid string) string {
	if len(kid) > 64 || strings.IndexFunc(kid, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) >= 0 {
		return "(unprintable kid)"
	}
	return fmt.Sprintf("%q", kid)
}

// classify maps an error of the jwt parser to one of the sentinels. It does
// not wrap the parser's error, whose text may quote parts of the token.
func (v *jwtVerifier) classify(t *jwt.Token, claims jwt.MapClaims, err error) error {
	// The parser reports a missing required claim without naming it.
	missing := errors.Is(err, jwt.ErrTokenRequiredClaimMissing)
	iss, _ := claims.GetIssuer()
	exp, _ := claims.GetExpirationTime()
	aud, _ := claims.GetAudience()
	noAud := len(aud) == 0 || len(aud) == 1 && aud[0] == ""
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return fmt.Errorf("auth: jwt: not a well-formed token: %w", ErrMalformed)
	case t == nil || t.Method == nil || !slices.Contains(v.algs, t.Method.Alg()):
		return fmt.Errorf("auth: jwt: signing algorithm missing or not allowed: %w", ErrBadSignature)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return fmt.Errorf("auth: jwt: signature does not verify: %w", ErrBadSignature)
	case !errors.Is(err, jwt.ErrTokenInvalidClaims):
		return fmt.Errorf("auth: jwt: token not verifiable: %w", ErrMalformed)
	case errors.Is(err, jwt.ErrInvalidType):
		return fmt.Errorf("auth: jwt: a registered claim has the wrong type: %w", ErrMalformed)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return fmt.Errorf("auth: jwt: issuer is not %q: %w", v.issuer, ErrWrongIssuer)
	case missing && iss == "":
		return fmt.Errorf("auth: jwt: no iss claim: %w", ErrWrongIssuer)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return fmt.Errorf("auth: jwt: audience names none of %q: %w", v.audience, ErrWrongAudience)
	case missing && noAud:
		return fmt.Errorf("auth: jwt: no aud claim: %w", ErrWrongAudience)
	case missing && exp == nil:
		return fmt.Errorf("auth: jwt: no exp claim: %w", ErrMalformed)
	case errors.Is(err, jwt.ErrTokenExpired):
		return fmt.Errorf("auth: jwt: exp has passed: %w", ErrExpired)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return fmt.Errorf("auth: jwt: nbf has not come: %w", ErrNotYetValid)
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return fmt.Errorf("auth: jwt: iat is in the future: %w", ErrNotYetValid)
	}
	return fmt.Errorf("auth: jwt: claims rejected: %w", ErrMalformed)
}

// scopes returns the distinct scopes of the "scope" and "scp" claims, each a
// space-separated string or an array of strings.
func scopes(claims map[string]any) []string {
	var out []string
	add := func(s string) {
		for _, f := range strings.Fields(s) {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	for _, name := range []string{"scope", "scp"} {
		switch v := claims[name].(type) {
		case string:
			add(v)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					add(s)
				}
			}
		}
	}
	return out
}

// parsePEMKeys parses the public keys of PublicKeysPEM.
func parsePEMKeys(data []byte) (*keySet, error) {
	set := &keySet{}
	rest := data
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		var (
			key any
			err error
		)
		switch t := block.Type; {
		case t == "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case t == "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case t == "CERTIFICATE":
			var c *x509.Certificate
			if c, err = x509.ParseCertificate(block.Bytes); err == nil {
				key = c.PublicKey
			}
		case strings.Contains(t, "PRIVATE KEY"):
			return nil, fmt.Errorf("block %d is a private key; configure only public keys", n)
		default:
			return nil, fmt.Errorf("block %d: unsupported PEM type %q", n, t)
		}
		if err != nil {
			return nil, fmt.Errorf("block %d: %w", n, err)
		}
		if err := checkPublicKey(key); err != nil {
			return nil, fmt.Errorf("block %d: %w", n, err)
		}
		kid := block.Headers["kid"]
		if len(kid) > maxKidLen {
			return nil, fmt.Errorf("block %d: kid longer than %d bytes", n, maxKidLen)
		}
		if kid != "" && slices.ContainsFunc(set.keys, func(k pubKey) bool { return k.kid == kid }) {
			return nil, fmt.Errorf("block %d: duplicate kid %q", n, kid)
		}
		if len(set.keys) == maxKeys {
			return nil, fmt.Errorf("more than %d keys", maxKeys)
		}
		set.keys = append(set.keys, pubKey{kid: kid, key: key})
	}
	if len(set.keys) == 0 {
		return nil, errors.New("no PEM block found")
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return nil, fmt.Errorf("data after PEM block %d is not PEM", len(set.keys))
	}
	return set, nil
}

// checkPublicKey accepts RSA keys of 2048 to 8192 bits and P-256 EC keys.
func checkPublicKey(key any) error {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits || bits > maxRSABits {
			return fmt.Errorf("RSA key of %d bits, want %d to %d", bits, minRSABits, maxRSABits)
		}
		if k.E < 3 || k.E%2 == 0 {
			return fmt.Errorf("RSA exponent %d is not an odd number above 2", k.E)
		}
		return nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("EC key on %s, want P-256", k.Curve.Params().Name)
		}
		return nil
	}
	return fmt.Errorf("unsupported key type %T (want RSA or P-256 EC)", key)
}
