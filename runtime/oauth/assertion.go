package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// assertionType is RFC 7523's client_assertion_type.
const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLife is how long a client assertion is valid.
const assertionLife = time.Minute

// keyCredentials is the client credentials grant with private_key_jwt
// (RFC 7523 section 2.2): go-sdk's extauth handler takes only a secret.
// Discovery is go-sdk's (protected-resource metadata, then the
// authorization server's); each token request carries a fresh assertion
// signed with the key, iss and sub the client id, aud the issuer.
type keyCredentials struct {
	clientID string
	key      crypto.Signer
	method   jwt.SigningMethod
	client   *http.Client
	ts       oauth2.TokenSource
}

var _ auth.OAuthHandler = (*keyCredentials)(nil)

// newKeyCredentials parses the PEM key of a client.
func newKeyCredentials(clientID, pemKey string, client *http.Client) (*keyCredentials, error) {
	key, method, err := parsePrivateKey(pemKey)
	if err != nil {
		return nil, fmt.Errorf("client_private_key: %w", err)
	}
	return &keyCredentials{clientID: clientID, key: key, method: method, client: client}, nil
}

// parsePrivateKey reads a PKCS#8, SEC 1 (EC) or PKCS#1 (RSA) PEM key and
// picks its signing algorithm.
func parsePrivateKey(pemKey string) (crypto.Signer, jwt.SigningMethod, error) {
	block, _ := pem.Decode([]byte(pemKey))
	if block == nil {
		return nil, nil, errors.New("not a PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the %s: %w", strings.ToLower(block.Type), err)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return k, jwt.SigningMethodES256, nil
		case elliptic.P384():
			return k, jwt.SigningMethodES384, nil
		}
		return nil, nil, errors.New("EC keys must be on P-256 or P-384")
	case *rsa.PrivateKey:
		return k, jwt.SigningMethodRS256, nil
	case ed25519.PrivateKey:
		return k, jwt.SigningMethodEdDSA, nil
	}
	return nil, nil, fmt.Errorf("unsupported key type %T", key)
}

func (k *keyCredentials) TokenSource(context.Context) (oauth2.TokenSource, error) { return k.ts, nil }

// Authorize discovers the token endpoint and fetches a token.
func (k *keyCredentials) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer drain(resp)
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return fmt.Errorf("parsing WWW-Authenticate: %w", err)
	}
	prm, err := k.resourceMetadata(ctx, cs, req.URL.String())
	if err != nil {
		return err
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], k.client)
	if err != nil {
		return fmt.Errorf("authorization server metadata: %w", err)
	}
	if asm == nil {
		return fmt.Errorf("authorization server %s publishes no metadata", prm.AuthorizationServers[0])
	}
	scopes := challengeScopes(cs)
	if len(scopes) == 0 {
		scopes = prm.ScopesSupported
	}
	ts := &assertionSource{k: k, ctx: context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, k.client),
		tokenURL: asm.TokenEndpoint, audience: asm.Issuer, scopes: scopes, resource: prm.Resource}
	if _, err := ts.Token(); err != nil {
		return fmt.Errorf("client credentials token request failed: %w", err)
	}
	k.ts = ts
	return nil
}

// resourceMetadata finds the protected-resource metadata: the challenge's
// resource_metadata, else the well-known URL at the path, then the root.
func (k *keyCredentials) resourceMetadata(ctx context.Context, cs []oauthex.Challenge, resource string) (*oauthex.ProtectedResourceMetadata, error) {
	var urls [][2]string
	for _, c := range cs {
		if u := c.Params["resource_metadata"]; u != "" {
			urls = append(urls, [2]string{u, resource})
		}
	}
	if ru, err := url.Parse(resource); err == nil {
		mu := *ru
		mu.RawQuery, mu.Path = "", "/.well-known/oauth-protected-resource/"+strings.TrimLeft(ru.Path, "/")
		urls = append(urls, [2]string{mu.String(), resource})
		mu.Path, ru.Path = "/.well-known/oauth-protected-resource", ""
		urls = append(urls, [2]string{mu.String(), ru.String()})
	}
	for _, u := range urls {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, u[0], u[1], k.client)
		if err == nil && prm != nil && len(prm.AuthorizationServers) > 0 {
			return prm, nil
		}
	}
	return nil, fmt.Errorf("no protected resource metadata with an authorization server for %s", resource)
}

func challengeScopes(cs []oauthex.Challenge) []string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["scope"] != "" {
			return strings.Fields(c.Params["scope"])
		}
	}
	return nil
}

// assertionSource fetches tokens, each request with a new assertion.
type assertionSource struct {
	k                  *keyCredentials
	ctx                context.Context
	tokenURL, audience string
	resource           string
	scopes             []string
}

func (s *assertionSource) Token() (*oauth2.Token, error) {
	a, err := s.k.assertion(s.audience)
	if err != nil {
		return nil, err
	}
	params := url.Values{"client_assertion_type": {assertionType}, "client_assertion": {a}}
	if s.resource != "" {
		params.Set("resource", s.resource)
	}
	cfg := &clientcredentials.Config{ClientID: s.k.clientID, TokenURL: s.tokenURL, Scopes: s.scopes,
		EndpointParams: params, AuthStyle: oauth2.AuthStyleInParams}
	return cfg.Token(s.ctx)
}

// assertion signs a client assertion for audience.
func (k *keyCredentials) assertion(audience string) (string, error) {
	jti := make([]byte, 16)
	rand.Read(jti)
	now := time.Now()
	claims := jwt.RegisteredClaims{Issuer: k.clientID, Subject: k.clientID, Audience: jwt.ClaimStrings{audience},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(assertionLife)), ID: hex.EncodeToString(jti)}
	s, err := jwt.NewWithClaims(k.method, claims).SignedString(k.key)
	if err != nil {
		return "", fmt.Errorf("signing the client assertion: %w", err)
	}
	return s, nil
}
