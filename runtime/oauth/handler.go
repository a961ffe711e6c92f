package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// Token states in Status.
const (
	StateAuthorized         = "authorized"
	StateNeedsAuthorization = "needs_authorization"
	// StateNoToken is a client-credentials server before its first token.
	StateNoToken = "no_token"
)

// Status is one server's (and identity's) authorization, as /status, the
// admin API and `edge-mcp auth status` show it. It holds no token.
type Status struct {
	Server         string    `json:"server"`
	Identity       string    `json:"identity,omitempty"`
	Grant          string    `json:"grant"`
	State          string    `json:"state"`
	ValidUntil     time.Time `json:"valid_until,omitzero"`
	Scopes         []string  `json:"scopes,omitempty"`
	Refreshable    bool      `json:"refreshable"`
	PendingURL     string    `json:"pending_url,omitempty"`
	PendingExpires time.Time `json:"pending_expires,omitzero"`
	LastError      string    `json:"last_error,omitempty"`
}

// Handler is the go-sdk auth.OAuthHandler of one server and identity:
// the transports take its TokenSource on every request and call
// Authorize on a 401 or 403, then retry once.
type Handler struct {
	m                *Manager
	server, identity string
	sc               config.Server
	redirect         string
	cc               bool

	initOnce sync.Once
	inner    auth.OAuthHandler // authorization code, or client credentials; set by init
	initErr  string

	ccMu sync.Mutex // serializes client-credentials grants

	mu         sync.Mutex
	loaded     bool
	ts         oauth2.TokenSource // nil: no usable token
	rec        *Record            // what ts started from, for Status
	needs      bool
	lastErr    string
	flight     *flight
	stepping   bool        // the running flight is a step-up
	stepUps    []time.Time // recent step-ups
	authorized chan struct{}
}

var _ auth.OAuthHandler = (*Handler)(nil)

func newHandler(m *Manager, sc config.Server, identity string) *Handler {
	return &Handler{m: m, server: sc.Name, identity: identity, sc: sc, authorized: make(chan struct{}),
		cc: sc.OAuth.Grant == "client_credentials" || sc.OAuth.Grant == "token_exchange"}
}

// init builds the go-sdk handler at first use, when the gateway's
// callback URL is known (the listener may have picked its port).
func (h *Handler) init() auth.OAuthHandler {
	h.initOnce.Do(h.build)
	return h.inner
}

func (h *Handler) build() {
	o, m := h.sc.OAuth, h.m
	h.redirect = o.RedirectURL
	if h.redirect == "" && o.CallbackPort != 0 {
		h.redirect = fmt.Sprintf("http://localhost:%d/callback", o.CallbackPort)
	}
	if h.redirect == "" {
		h.redirect = m.redirectURL()
	}
	var err error
	switch {
	case o.Grant == "token_exchange":
		h.inner = &exchanger{o: o, server: h.server, identity: h.identity, m: m}
	case h.cc && o.ClientPrivateKey != "":
		h.inner, err = newKeyCredentials(o.ClientID, o.ClientPrivateKey, m.opts.HTTPClient)
	case h.cc:
		h.inner, err = extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
			Credentials: &oauthex.ClientCredentials{ClientID: o.ClientID, ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: o.ClientSecret}},
			HTTPClient:  m.opts.HTTPClient,
		})
	default:
		h.inner, err = auth.NewAuthorizationCodeHandler(h.codeConfig())
	}
	if err != nil {
		h.inner, h.initErr = nil, fmt.Sprintf("oauth section of %q: %v", h.sc.Name, err)
	}
}

// codeConfig is the go-sdk configuration of the authorization code flow.
func (h *Handler) codeConfig() *auth.AuthorizationCodeHandlerConfig {
	o := h.sc.OAuth
	c := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              h.redirect,
		AuthorizationCodeFetcher: h.fetch,
		ScopeFilter:              h.scopes,
		RequestRefreshToken:      true,
		Client:                   h.m.opts.HTTPClient,
		NewTokenSource:           h.newTokenSource,
	}
	if o.ClientID != "" {
		pre := &oauthex.ClientCredentials{ClientID: o.ClientID}
		if o.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: o.ClientSecret}
		}
		c.PreregisteredClient = pre
	}
	if o.ClientMetadataURL != "" {
		c.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: o.ClientMetadataURL}
	}
	if o.DynamicRegistration && h.redirect != "" {
		c.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:            []string{h.redirect},
			TokenEndpointAuthMethod: o.TokenEndpointAuthMethod,
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			ClientName:              "edge-mcp",
		}}
	}
	return c
}

// scopes picks the scopes to ask for: the configured ones in place of
// the discovered ones, except on a step-up, which adds what the server
// asked for to what was granted.
func (h *Handler) scopes(discovered []string) []string {
	h.mu.Lock()
	stepping, rec := h.stepping, h.rec
	h.mu.Unlock()
	want := discovered
	if o := h.sc.OAuth; len(o.Scopes) > 0 {
		want = slices.Clone(o.Scopes)
		if stepping {
			want = union(want, discovered)
		}
	}
	if stepping && rec != nil {
		want = union(rec.Scopes, want)
	}
	return want
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// TokenSource implements auth.OAuthHandler: the stored token, refreshed
// before it expires; nil when there is none.
func (h *Handler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	h.load()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expireLocked()
	return h.ts, nil
}

// expireLocked drops a token that expired and cannot be refreshed.
func (h *Handler) expireLocked() {
	if h.ts != nil && h.rec != nil && !h.cc && !usable(h.rec.Token) {
		h.ts, h.needs, h.lastErr = nil, true, "the token expired and cannot be refreshed (no refresh token)"
	}
}

// load reads the stored record once (outside the lock: it is I/O).
func (h *Handler) load() {
	h.mu.Lock()
	done := h.loaded || h.cc
	h.mu.Unlock()
	if done {
		return
	}
	rec, rev, err := h.m.loadRecord(h.server, h.identity)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.loaded {
		return
	}
	h.loaded = true
	switch {
	case err != nil:
		h.needs, h.lastErr = true, err.Error()
		h.m.log.Warn("loading the upstream token", "server_name", h.server, "err", err)
	case rec == nil:
		h.needs = true
	default:
		h.adoptLocked(rec)
		h.setVersionLocked(rev)
	}
}

// adoptLocked makes rec the current token.
func (h *Handler) adoptLocked(rec *Record) {
	cfg := rec.config()
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.m.opts.HTTPClient)
	src := oauth2.ReuseTokenSourceWithExpiry(rec.Token, cfg.TokenSource(ctx, rec.Token), earlyRefresh)
	h.ts = &savingSource{h: h, src: src, rec: rec}
	h.rec = rec
	h.needs = !usable(rec.Token)
	if h.needs {
		h.ts = nil
		h.lastErr = "the token expired and cannot be refreshed"
	}
}

// usable reports whether tok is valid now or can be refreshed.
func usable(tok *oauth2.Token) bool {
	return tok.RefreshToken != "" || unexpired(tok)
}

func unexpired(tok *oauth2.Token) bool {
	return tok.AccessToken != "" && (tok.Expiry.IsZero() || time.Now().Before(tok.Expiry))
}

func (r *Record) config() *oauth2.Config {
	return &oauth2.Config{ClientID: r.ClientID, ClientSecret: r.ClientSecret, Scopes: r.Scopes,
		Endpoint: oauth2.Endpoint{TokenURL: r.TokenURL, AuthStyle: oauth2.AuthStyle(r.AuthStyle)}}
}

// newTokenSource is go-sdk's hook after a code exchange: the token is
// stored, and refreshed tokens will be.
func (h *Handler) newTokenSource(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	rec := &Record{Token: tok, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, TokenURL: cfg.Endpoint.TokenURL,
		AuthStyle: int(cfg.Endpoint.AuthStyle), Scopes: grantedScopes(tok, cfg.Scopes), Saved: time.Now()}
	if err := h.m.store().Save(h.server, h.identity, rec); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.adoptLocked(rec)
	return h.ts, nil
}

// grantedScopes are the scopes the token response names, else those
// asked for.
func grantedScopes(tok *oauth2.Token, asked []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return splitScopes(s)
	}
	return slices.Clone(asked)
}

// savingSource refreshes through src and stores each new token (a
// rotated refresh token with it). A refresh that fails while the token
// still works keeps the token; once it has expired, the server needs
// authorization.
//
// mu is held across the refresh (a network request) and the store's
// write, as oauth2's own ReuseTokenSource does: two refreshes at once
// would spend a rotated refresh token twice.
type savingSource struct {
	h   *Handler
	src oauth2.TokenSource
	mu  sync.Mutex
	rec *Record
	rev atomic.Uint64 // version of rec in a Versioned store (fleet.go)
}

func (s *savingSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.h.m.store().(Versioned); ok {
		return s.fleetToken(v)
	}
	tok, err := s.src.Token()
	if err != nil {
		if unexpired(s.rec.Token) {
			s.h.m.log.Warn("refreshing the upstream token failed; using it until it expires", "server_name", s.h.server, "err", describe(err))
			return s.rec.Token, nil
		}
		return nil, s.h.refreshFailed(s, err)
	}
	if tok.AccessToken != s.rec.Token.AccessToken {
		rec := *s.rec
		if tok.RefreshToken == "" {
			tok.RefreshToken = s.rec.Token.RefreshToken
		}
		rec.Token, rec.Saved = tok, time.Now()
		if sc, ok := tok.Extra("scope").(string); ok && sc != "" {
			rec.Scopes = splitScopes(sc)
		}
		if err := s.h.m.store().Save(s.h.server, s.h.identity, &rec); err != nil {
			s.h.m.log.Error("storing the refreshed upstream token", "server_name", s.h.server, "err", err)
		}
		s.rec = &rec
		s.h.mu.Lock()
		if s.h.ts == s {
			s.h.rec = &rec
		}
		s.h.mu.Unlock()
		s.h.m.log.Debug("upstream token refreshed", "server_name", s.h.server, "valid_until", tok.Expiry)
	}
	return tok, nil
}

// refreshFailed drops a token that expired and could not be refreshed.
func (h *Handler) refreshFailed(s *savingSource, err error) error {
	reason := "the token expired and refreshing it failed: " + describe(err)
	h.mu.Lock()
	if h.ts == s {
		h.ts, h.needs, h.lastErr = nil, true, reason
	}
	h.mu.Unlock()
	h.m.log.Warn("upstream token expired and cannot be refreshed; an operator must authorize again", "server_name", h.server, "reason", reason)
	return &NeedsAuthorizationError{Server: h.server, Identity: h.identity, Reason: reason}
}

// describe reduces an OAuth error to what may be shown: the token
// endpoint's error code, never a response body.
func describe(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return "token endpoint answered " + re.ErrorCode
		}
		if re.Response != nil {
			return fmt.Sprintf("token endpoint answered HTTP %d", re.Response.StatusCode)
		}
	}
	return err.Error()
}

// Authorize implements auth.OAuthHandler. Client credentials are fetched
// at once. Otherwise a token stored meanwhile (a login elsewhere) is
// taken; else an authorization starts (or is joined) and the request
// waits Options.PendingWait for a person to complete it.
func (h *Handler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	if h.init() == nil {
		drain(resp)
		return &NeedsAuthorizationError{Server: h.server, Identity: h.identity, Reason: h.initErr}
	}
	if h.cc {
		return h.clientCredentials(ctx, req, resp)
	}
	stepUp := resp.StatusCode == http.StatusForbidden
	if stepUp && challengeError(resp) != "insufficient_scope" {
		drain(resp)
		return nil // not ours to fix: the retry gets the same answer
	}
	sent := bearerOf(req)
	if !stepUp && h.reloadStored(sent) {
		drain(resp)
		return nil
	}
	if !stepUp {
		h.refused(sent)
	}
	if stepUp && !h.allowStepUp() {
		drain(resp)
		return fmt.Errorf("server %q still answers insufficient_scope after %d step-up authorizations in %s; giving up", h.server, maxStepUps, stepUpWindow)
	}
	f := h.join(req, resp, stepUp)
	wait := time.NewTimer(h.m.opts.PendingWait)
	defer wait.Stop()
	select {
	case <-f.done:
		if f.err != nil {
			return &NeedsAuthorizationError{Server: h.server, Identity: h.identity, Reason: f.reason()}
		}
		return nil
	case <-wait.C:
	case <-ctx.Done():
	}
	return &NeedsAuthorizationError{Server: h.server, Identity: h.identity, Pending: true}
}

// reloadStored adopts a stored token other than the one the failed
// request carried; it reports whether there was one.
func (h *Handler) reloadStored(sent string) bool {
	rec, rev, err := h.m.loadRecord(h.server, h.identity)
	if err != nil || rec == nil || rec.Token.AccessToken == sent || !usable(rec.Token) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rec != nil && h.rec.Token.AccessToken == rec.Token.AccessToken && h.ts != nil {
		return sent != rec.Token.AccessToken
	}
	h.adoptLocked(rec)
	h.setVersionLocked(rev)
	h.loaded = true
	return h.ts != nil
}

// refused drops the current token when the server answered 401 to it
// (revoked, or expired early): the server needs authorization.
func (h *Handler) refused(sent string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sent != "" && h.rec != nil && h.rec.Token.AccessToken == sent {
		h.ts, h.needs, h.lastErr = nil, true, "the server refused the token (HTTP 401)"
	}
}

// allowStepUp counts a step-up; false when there were too many lately.
func (h *Handler) allowStepUp() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	h.stepUps = slices.DeleteFunc(h.stepUps, func(t time.Time) bool { return now.Sub(t) > stepUpWindow })
	if len(h.stepUps) >= maxStepUps {
		return false
	}
	h.stepUps = append(h.stepUps, now)
	return true
}

// clientCredentials fetches a token with the client's own credentials.
func (h *Handler) clientCredentials(ctx context.Context, req *http.Request, resp *http.Response) error {
	h.ccMu.Lock()
	defer h.ccMu.Unlock()
	// The token source keeps the context for later fetches: not the
	// request's, which ends with it.
	if err := h.inner.Authorize(context.WithoutCancel(ctx), req, resp); err != nil {
		h.mu.Lock()
		h.needs, h.lastErr = true, describe(err)
		h.mu.Unlock()
		if h.sc.OAuth.Grant == "token_exchange" {
			return fmt.Errorf("token exchange for server %q (identity %q): %s", h.server, h.identity, describe(err))
		}
		return fmt.Errorf("client credentials grant for server %q: %s", h.server, describe(err))
	}
	ts, _ := h.inner.TokenSource(ctx)
	h.mu.Lock()
	h.ts, h.needs, h.lastErr, h.loaded = oauth2.ReuseTokenSourceWithExpiry(nil, ts, earlyRefresh), false, "", true
	h.mu.Unlock()
	return nil
}

// Begin starts the authorization (or joins the one pending) by asking the
// server, without a token, for its challenge; it returns once the
// authorization URL is known (or no person is needed).
func (h *Handler) Begin(ctx context.Context) (Status, error) {
	if h.init() == nil {
		return h.Status(), &NeedsAuthorizationError{Server: h.server, Identity: h.identity, Reason: h.initErr}
	}
	h.mu.Lock()
	f := h.flight
	h.mu.Unlock()
	if f == nil {
		req, resp, err := h.probe(ctx)
		if err != nil {
			return h.Status(), err
		}
		if h.cc {
			err := h.clientCredentials(ctx, req, resp)
			return h.Status(), err
		}
		f = h.join(req, resp, false)
	}
	select {
	case <-f.urlReady:
	case <-f.done:
	case <-ctx.Done():
		return h.Status(), ctx.Err()
	}
	select {
	case <-f.done: // f.err is set only once done is closed
		if f.err != nil {
			return h.Status(), fmt.Errorf("authorizing server %q: %s", h.server, f.reason())
		}
	default:
	}
	return h.Status(), nil
}

// Await waits for the authorization in progress (if any) to end and
// returns its failure.
func (h *Handler) Await(ctx context.Context) error {
	h.mu.Lock()
	f := h.flight
	h.mu.Unlock()
	if f == nil {
		if h.Status().State == StateAuthorized {
			return nil
		}
		return &NeedsAuthorizationError{Server: h.server, Identity: h.identity}
	}
	select {
	case <-f.done:
		if f.err != nil {
			return fmt.Errorf("authorizing server %q: %s", h.server, f.reason())
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Settled returns a channel closed when the authorization in progress
// ends (at once when none is).
func (h *Handler) Settled() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.flight != nil {
		return h.flight.done
	}
	done := make(chan struct{})
	close(done)
	return done
}

// Authorized returns a channel closed at the next successful
// authorization.
func (h *Handler) Authorized() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.authorized
}

// Ready reports whether requests can carry a token (or get one without a
// person: client credentials).
func (h *Handler) Ready() bool {
	h.load()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expireLocked()
	return h.cc || h.ts != nil
}

// Logout forgets the token and cancels a pending authorization.
func (h *Handler) Logout() error {
	h.cancelFlight()
	h.mu.Lock()
	h.ts, h.rec, h.needs, h.lastErr, h.loaded = nil, nil, true, "", true
	h.mu.Unlock()
	return h.m.store().Delete(h.server, h.identity)
}

// Status reports the handler's state; it holds no token.
func (h *Handler) Status() Status {
	h.load()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expireLocked()
	st := Status{Server: h.server, Identity: h.identity, Grant: h.sc.OAuth.Grant, LastError: h.lastErr}
	switch {
	case h.ts != nil && !h.needs:
		st.State = StateAuthorized
	case h.cc && !h.needs:
		st.State = StateNoToken
	default:
		st.State = StateNeedsAuthorization
	}
	if h.rec != nil && h.ts != nil {
		st.ValidUntil, st.Scopes, st.Refreshable = h.rec.Token.Expiry, slices.Clone(h.rec.Scopes), h.rec.Token.RefreshToken != ""
	}
	if f := h.flight; f != nil {
		st.PendingURL, st.PendingExpires = f.pendingURL()
	}
	return st
}

// bearerOf returns the bearer token a request carried.
func bearerOf(req *http.Request) string {
	if req == nil {
		return ""
	}
	v := req.Header.Get("Authorization")
	if len(v) > 7 && (v[:7] == "Bearer " || v[:7] == "bearer ") {
		return v[7:]
	}
	return ""
}

// challengeError is the error parameter of a Bearer challenge.
func challengeError(resp *http.Response) string {
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return ""
	}
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["error"] != "" {
			return c.Params["error"]
		}
	}
	return ""
}

func drain(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}
