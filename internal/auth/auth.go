// Package auth authenticates the downstream clients of the gateway on its
// HTTP endpoints.
//
// Three modes exist. ModeNone gives every request the anonymous identity.
// ModeAPIKey maps static API keys, configured by their SHA-256 digest or
// literally, to named identities; a key is presented as
// "Authorization: Bearer <key>" or "X-API-Key: <key>". ModeJWT verifies
// bearer JWTs signed with HS256, RS256 or ES256 against a shared secret, a
// PEM file of public keys or a JWKS URL, and checks their issuer, audience
// and validity period.
//
// Middleware enforces authentication on an http.Handler and answers failures
// with the challenges of RFC 6750 and RFC 9728 that the MCP authorization
// specification asks for; MetadataHandler serves the protected resource
// metadata document those challenges point to.
//
// Neither errors nor log lines ever contain a presented credential or a
// configured key; at most they name a key by the first eight hex digits of
// its SHA-256 digest.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"
)

// The authentication modes of Config.Mode, also used as Identity.Method.
const (
	ModeNone   = "none"
	ModeAPIKey = "api_key"
	ModeJWT    = "jwt"
)

// AnonymousName is the Identity.Name given to requests in ModeNone.
const AnonymousName = "anonymous"

// Errors returned by Authenticate wrap exactly one of these sentinels. Their
// texts are the reasons Middleware reports to the client.
var (
	ErrMissingCredentials = errors.New("missing credentials")
	ErrMalformed          = errors.New("malformed credentials")
	ErrExpired            = errors.New("token expired")
	ErrNotYetValid        = errors.New("token not yet valid")
	ErrWrongIssuer        = errors.New("wrong issuer")
	ErrWrongAudience      = errors.New("wrong audience")
	ErrBadSignature       = errors.New("bad signature")
	ErrUnknownKey         = errors.New("unknown signing key")
	ErrRevoked            = errors.New("revoked")
	ErrInvalidKey         = errors.New("invalid API key")
)

// sentinels lists the sentinels in the order reason looks for them.
var sentinels = []error{
	ErrMissingCredentials, ErrMalformed, ErrExpired, ErrNotYetValid,
	ErrWrongIssuer, ErrWrongAudience, ErrBadSignature, ErrUnknownKey,
	ErrRevoked, ErrInvalidKey,
}

// reason returns the client-facing reason for an Authenticate error: the text
// of the sentinel it wraps, never anything derived from the request.
func reason(err error) string {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "invalid credentials"
}

// Identity is the authenticated client of a request.
type Identity struct {
	// Name names the client: AnonymousName in ModeNone, the APIKey.Name in
	// ModeAPIKey, the identity claim of the token in ModeJWT.
	Name string
	// Method is the mode that authenticated the client: ModeNone, ModeAPIKey
	// or ModeJWT.
	Method string
	// Scopes are the token's scopes from its "scope" or "scp" claim (ModeJWT
	// only).
	Scopes []string
	// Claims are the token's verified claims as decoded JSON (ModeJWT only).
	Claims map[string]any
}

// Anonymous reports whether the identity is the unauthenticated one of
// ModeNone (or the zero Identity).
func (i Identity) Anonymous() bool { return i.Method == ModeNone || i.Method == "" }

// APIKey is one static key of ModeAPIKey. Exactly one of Key and SHA256 is
// set; several keys may share a Name, which eases rotation.
type APIKey struct {
	// Name is the identity the key authenticates.
	Name string
	// Key is the key itself: at least 16 visible ASCII characters.
	Key string
	// SHA256 is the hex SHA-256 digest of the key, optionally prefixed with
	// "sha256:", so that the configuration holds no secret.
	SHA256 string
	// Revoked rejects the key with ErrRevoked.
	Revoked bool
}

// JWTConfig configures ModeJWT. At least one of HMACSecret, PublicKeysPEM and
// JWKSURL is set.
type JWTConfig struct {
	// Issuer is the required "iss" claim.
	Issuer string
	// Audience lists the accepted audiences; the token's "aud" (a string or
	// an array) must contain at least one of them.
	Audience []string
	// Algorithms restricts the accepted "alg" values to a subset of HS256,
	// RS256 and ES256. It defaults to HS256 when HMACSecret is set plus RS256
	// and ES256 when public keys are configured.
	Algorithms []string
	// HMACSecret is the HS256 secret, at least 32 bytes.
	HMACSecret []byte
	// PublicKeysPEM holds RSA (2048 bits or more) and P-256 EC public keys
	// as "PUBLIC KEY", "RSA PUBLIC KEY" or "CERTIFICATE" PEM blocks. A block
	// header "kid: <id>" names a key; a token with a kid is verified with the
	// key of that kid, or with the unnamed keys when no key has it.
	PublicKeysPEM []byte
	// JWKSURL is an https URL (http only on a loopback host) serving a JSON
	// Web Key Set.
	JWKSURL string
	// JWKSRefresh is how often the key set is fetched again; default five
	// minutes, at least one second. A token with an unknown kid also
	// triggers a fetch, at most once per 30 seconds.
	JWKSRefresh time.Duration
	// Leeway is the clock skew tolerated on exp, nbf and iat; default 30
	// seconds.
	Leeway time.Duration
	// IdentityClaim names the string claim that becomes Identity.Name;
	// default "sub".
	IdentityClaim string
}

// ResourceMetadata is the OAuth 2.0 protected resource metadata (RFC 9728)
// of the gateway, served by MetadataHandler and announced in challenges.
type ResourceMetadata struct {
	// Resource is the gateway's resource identifier: an absolute https URL
	// (http only on a loopback host) without query or fragment, such as
	// "https://gw.example.com/mcp". Tokens' audience should name it.
	Resource string
	// AuthorizationServers lists the issuer URLs of the authorization
	// servers; at least one.
	AuthorizationServers []string
	// ScopesSupported lists the scopes clients may request.
	ScopesSupported []string
	// BearerMethodsSupported defaults to ["header"], the only method
	// accepted.
	BearerMethodsSupported []string
	// ResourceName is a human-readable name of the gateway.
	ResourceName string
}

// Config configures an Authenticator. New copies what it keeps, so the
// caller may reuse the Config.
type Config struct {
	// Mode is ModeNone, ModeAPIKey or ModeJWT.
	Mode string
	// APIKeys are the keys of ModeAPIKey; at least one.
	APIKeys []APIKey
	// JWT configures ModeJWT.
	JWT JWTConfig
	// ResourceMetadata, allowed in ModeJWT only, enables MetadataHandler
	// and the resource_metadata parameter of challenges.
	ResourceMetadata *ResourceMetadata
}

// Options are the run-time dependencies of an Authenticator.
type Options struct {
	// Logger receives configuration, JWKS and authentication failure logs;
	// nil discards them.
	Logger *slog.Logger
	// HTTPClient fetches the JWKS; nil means a client with a 5 second
	// timeout.
	HTTPClient *http.Client

	// now replaces time.Now in tests.
	now func() time.Time
	// logEveryFailure logs every failed authentication (tests that search
	// the log for leaked secrets want every line).
	logEveryFailure bool
}

// Authenticator authenticates requests according to a Config. It is safe
// for concurrent use.
type Authenticator struct {
	mode     string
	log      *slog.Logger
	apiKeys  []apiKeyEntry // ModeAPIKey
	jwt      *jwtVerifier  // ModeJWT
	metadata *metadataDoc  // nil when not configured
	failures *failureLimiter
}

// New validates cfg and returns an Authenticator. In ModeJWT with a JWKSURL
// it fetches the key set once (a failure is logged, not fatal: the key set is
// fetched again in the background and on unknown key ids) and starts a
// refresher that Close stops.
func New(ctx context.Context, cfg Config, opts Options) (*Authenticator, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.now
	if now == nil {
		now = time.Now
	}
	every := failureLogInterval
	if opts.logEveryFailure {
		every = 0
	}
	a := &Authenticator{mode: cfg.Mode, log: log, failures: newFailureLimiter(every, now)}
	if err := checkModeFields(cfg); err != nil {
		return nil, err
	}
	switch cfg.Mode {
	case ModeNone:
	case ModeAPIKey:
		keys, err := newAPIKeys(cfg.APIKeys)
		if err != nil {
			return nil, err
		}
		a.apiKeys = keys
	case ModeJWT:
		if cfg.ResourceMetadata != nil {
			md, err := newMetadataDoc(*cfg.ResourceMetadata)
			if err != nil {
				return nil, err
			}
			a.metadata = md
		}
		v, err := newJWTVerifier(ctx, cfg.JWT, log, opts.HTTPClient, now)
		if err != nil {
			return nil, err
		}
		a.jwt = v
	case "":
		return nil, errors.New("auth: config: Mode: required (none, api_key or jwt)")
	default:
		return nil, fmt.Errorf("auth: config: Mode: unknown mode %q (want none, api_key or jwt)", cfg.Mode)
	}
	attrs := []any{"mode", a.mode}
	switch {
	case a.mode == ModeAPIKey:
		attrs = append(attrs, "api_keys", len(a.apiKeys))
	case a.jwt != nil:
		attrs = append(attrs, "issuer", a.jwt.issuer, "audience", a.jwt.audience, "algorithms", a.jwt.algs,
			"resource_metadata", a.metadata != nil)
		if a.metadata != nil && !slices.Contains(a.jwt.audience, cfg.ResourceMetadata.Resource) {
			log.Warn("auth: JWT.Audience lacks ResourceMetadata.Resource; tokens issued for this resource will be rejected",
				"resource", cfg.ResourceMetadata.Resource)
		}
	}
	log.Info("auth: configured", attrs...)
	return a, nil
}

// checkModeFields rejects settings that the mode would silently ignore, such
// as API keys in ModeNone, which would suggest a protection that is not
// there.
func checkModeFields(cfg Config) error {
	jwtSet := cfg.JWT.Issuer != "" || len(cfg.JWT.Audience) > 0 || len(cfg.JWT.Algorithms) > 0 ||
		len(cfg.JWT.HMACSecret) > 0 || len(cfg.JWT.PublicKeysPEM) > 0 || cfg.JWT.JWKSURL != "" ||
		cfg.JWT.JWKSRefresh != 0 || cfg.JWT.Leeway != 0 || cfg.JWT.IdentityClaim != ""
	switch {
	case cfg.Mode != ModeAPIKey && len(cfg.APIKeys) > 0:
		return fmt.Errorf("auth: config: APIKeys: set, but Mode is %q, not api_key", cfg.Mode)
	case cfg.Mode != ModeJWT && jwtSet:
		return fmt.Errorf("auth: config: JWT: set, but Mode is %q, not jwt", cfg.Mode)
	case cfg.Mode != ModeJWT && cfg.ResourceMetadata != nil:
		return fmt.Errorf("auth: config: ResourceMetadata: set, but Mode is %q, not jwt", cfg.Mode)
	}
	return nil
}

// Authenticate authenticates r. Its error wraps one of the package's
// sentinels and contains neither the presented credential nor a key.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, error) {
	switch a.mode {
	case ModeAPIKey:
		return a.authenticateAPIKey(r)
	case ModeJWT:
		tok, err := bearerToken(r.Header)
		if err != nil {
			return Identity{}, err
		}
		return a.jwt.verify(tok)
	default:
		return Identity{Name: AnonymousName, Method: ModeNone}, nil
	}
}

// Close stops the JWKS refresher, if any, and waits for it to exit. It is
// safe to call more than once.
func (a *Authenticator) Close() {
	if a.jwt != nil && a.jwt.jwks != nil {
		a.jwt.jwks.close()
	}
}

type identityKey struct{}

// WithIdentity returns a copy of ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the Identity that Middleware or WithIdentity put in
// ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
