package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// Token exchange (RFC 8693), "grant": "token_exchange": the downstream
// client's own token is never sent upstream (the MCP specification
// forbids token passthrough); instead the gateway posts it to the
// configured token endpoint as the subject token and uses the access
// token it gets back. Each identity's handler exchanges the newest JWT
// its identity was admitted with (Manager.SetSubject, memory only). The
// shared handler (the catalogue's link, no downstream identity) uses the
// client's own access: the client credentials grant at the same endpoint.

// RFC 8693 names.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeJWT       = "urn:ietf:params:oauth:token-type:jwt"
	tokenTypeAccess    = "urn:ietf:params:oauth:token-type:access_token"
)

// errNoSubject: an identity has no downstream token to exchange yet.
var errNoSubject = errors.New("no downstream token of this identity to exchange")

// exchanger is the auth.OAuthHandler of one identity of a token_exchange
// server; Handler wraps it like a client credentials grant (no person,
// token kept in memory, refetched when it expires).
type exchanger struct {
	o                *config.OAuth
	server, identity string
	m                *Manager

	mu  sync.Mutex
	tok *oauth2.Token // the last fetched, for the first TokenSource
}

var _ auth.OAuthHandler = (*exchanger)(nil)

// fetch asks the token endpoint for a token: an exchange of the
// identity's newest subject token, or the client's own for "".
func (e *exchanger) fetch(ctx context.Context) (*oauth2.Token, error) {
	cfg := &clientcredentials.Config{ClientID: e.o.ClientID, ClientSecret: e.o.ClientSecret, TokenURL: e.o.TokenURL,
		Scopes: e.o.Scopes, AuthStyle: oauth2.AuthStyleInHeader, EndpointParams: url.Values{}}
	if e.identity != "" {
		subject := e.m.subject(e.identity)
		if subject == "" {
			return nil, errNoSubject
		}
		cfg.EndpointParams = url.Values{"grant_type": {grantTokenExchange}, "subject_token": {subject},
			"subject_token_type": {tokenTypeJWT}, "requested_token_type": {tokenTypeAccess}}
	}
	if e.o.Audience != "" {
		cfg.EndpointParams.Set("audience", e.o.Audience)
	}
	if e.o.Resource != "" {
		cfg.EndpointParams.Set("resource", e.o.Resource)
	}
	return cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, e.m.opts.HTTPClient))
}

// Authorize implements auth.OAuthHandler: it fetches a token.
func (e *exchanger) Authorize(ctx context.Context, _ *http.Request, resp *http.Response) error {
	drain(resp)
	tok, err := e.fetch(ctx)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.tok = tok
	e.mu.Unlock()
	return nil
}

// TokenSource implements auth.OAuthHandler: the token Authorize fetched,
// then a fresh fetch (with the newest subject) each time it expires.
func (e *exchanger) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	// Later fetches outlive the request that asked first.
	return oauth2.ReuseTokenSourceWithExpiry(e.tok, exchangeSource{e, context.WithoutCancel(ctx)}, earlyRefresh), nil
}

type exchangeSource struct {
	e   *exchanger
	ctx context.Context
}

// Token is a later fetch: its error, like Handler's for the first,
// names the server and holds no response body.
func (s exchangeSource) Token() (*oauth2.Token, error) {
	tok, err := s.e.fetch(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("token exchange for server %q (identity %q): %s", s.e.server, s.e.identity, describe(err))
	}
	return tok, nil
}

// SetSubject keeps identity's newest downstream JWT, in memory only, for
// the token_exchange servers; it does nothing when there is none.
func (m *Manager) SetSubject(identity, token string) {
	if !m.exchanges.Load() || identity == "" {
		return
	}
	if old, ok := m.subjects.Load(identity); ok && old.(string) == token {
		return
	}
	m.subjects.Store(identity, token)
}

func (m *Manager) subject(identity string) string {
	v, _ := m.subjects.Load(identity)
	s, _ := v.(string)
	return s
}
