package gateway

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
)

// This file is the gateway's side of upstream OAuth (runtime/oauth does
// the work): the manager and its token store, the handler each remote
// upstream's transport calls, the state needs_authorization, and the
// operations the admin API asks for.

// StateNeedsAuthorization: the upstream wants a token the gateway does not
// have (first login, a token that expired and cannot be refreshed, or a
// 401 challenge from a server without an "oauth" section).
const StateNeedsAuthorization State = "needs_authorization"

// openOAuth builds the gateway's manager over its state folder; the
// callback is oauth.redirect_url, else /oauth/callback on the listener.
func (g *Gateway) openOAuth(cfg *config.Config) error {
	if err := checkFleetOAuthKey(cfg); err != nil {
		return err
	}
	redirect := cfg.OAuth.RedirectURL
	if redirect == "" {
		redirect = "http://" + cfg.Listen + "/oauth/callback"
	}
	m, err := OAuthManager(cfg, g.stateDir(cfg), g.log, redirect)
	if err != nil {
		return err
	}
	g.oauth = m
	return nil
}

// OAuthManager builds the upstream OAuth manager of cfg with its token
// store: <stateDir>/oauth, sealed with oauth.key, oauth.key_file or a key
// generated there; with no state folder, in memory under a random key.
// `edge-mcp auth` uses it to reach the gateway's tokens.
func OAuthManager(cfg *config.Config, stateDir string, log *slog.Logger, redirect string) (*oauth.Manager, error) {
	key, dir, err := oauthKey(cfg, stateDir)
	if err != nil {
		return nil, err
	}
	sealer, err := oauth.NewSealer(key)
	if err != nil {
		return nil, err
	}
	store, err := oauth.NewFileStore(dir, sealer)
	if err != nil {
		return nil, err
	}
	m := oauth.New(oauth.Options{Logger: log, Store: store, PendingWait: cfg.OAuth.PendingWait, RedirectURL: redirect})
	m.Configure(cfg.Servers)
	return m, nil
}

// oauthKey returns the token store's key and folder ("" for memory).
func oauthKey(cfg *config.Config, stateDir string) ([]byte, string, error) {
	dir := ""
	if stateDir != "" {
		dir = filepath.Join(stateDir, "oauth")
	}
	switch {
	case cfg.OAuth.Key != "":
		key, err := config.OAuthKey(cfg.OAuth.Key)
		return key, dir, err
	case cfg.OAuth.KeyFile != "":
		data, err := os.ReadFile(cfg.OAuth.KeyFile)
		if err != nil {
			return nil, "", fmt.Errorf("oauth.key_file: %w", err)
		}
		if len(data) == 32 {
			return data, dir, nil
		}
		key, err := config.OAuthKey(string(data))
		if err != nil {
			return nil, "", fmt.Errorf("oauth.key_file %s: %w", cfg.OAuth.KeyFile, err)
		}
		return key, dir, nil
	case dir != "":
		key, err := oauth.LoadOrCreateKey(filepath.Join(dir, "key"), config.OAuthKey)
		return key, dir, err
	}
	key := make([]byte, 32)
	rand.Read(key)
	return key, "", nil
}

// SetListenAddr tells the gateway where its listener is, for the default
// OAuth callback (http://ADDR/oauth/callback) when oauth.redirect_url is
// not set: with port 0 in "listen", the port is known only then.
func (g *Gateway) SetListenAddr(addr string) {
	if g.config().OAuth.RedirectURL == "" {
		g.oauth.SetRedirectURL("http://" + addr + "/oauth/callback")
	}
}

// oauthHandler is what the transport of a remote server calls on 401:
// the server's handler when it has an "oauth" section, else one that
// notes the challenge so that /status can say what to configure.
func (g *Gateway) oauthHandler(sc config.Server) auth.OAuthHandler {
	if h := g.oauth.Handler(sc.Name, ""); h != nil {
		return h
	}
	hadToken := sc.BearerToken != ""
	for k := range sc.Headers {
		hadToken = hadToken || strings.EqualFold(k, "Authorization")
	}
	return g.oauth.Challenge(sc.Name, hadToken)
}

// awaitAuthorization holds the dial of an upstream whose handler has no
// token and needs a person: it starts the authorization (its URL shows in
// /status) and waits until it completes or ctx ends. It reports whether
// the upstream may dial.
func (u *upstream) awaitAuthorization(ctx context.Context) bool {
	h := u.g.oauth.Handler(u.name, "")
	if h == nil || h.Ready() {
		return true
	}
	authorized := h.Authorized()
	u.setState(StateNeedsAuthorization, &oauth.NeedsAuthorizationError{Server: u.name})
	u.g.metrics.UpstreamNeedsAuthorization(u.name, true)
	defer u.g.metrics.UpstreamNeedsAuthorization(u.name, false)
	// A pending authorization expires unanswered, or the server cannot be
	// asked: start another, with growing pauses.
	pause := time.Second
	for {
		if _, err := h.Begin(ctx); err != nil && ctx.Err() == nil {
			u.log.Warn("starting the upstream authorization", "err", err)
			u.setState(StateNeedsAuthorization, err)
		}
		if h.Ready() {
			return true
		}
		select {
		case <-authorized:
			return true
		case <-ctx.Done():
			return false
		case <-h.Settled():
		}
		select {
		case <-authorized:
			return true
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
		pause = min(pause*2, time.Minute)
	}
}

// authorizationState is the upstream's OAuth state for /status: the
// handler's status, and whether a person must authorize.
func (u *upstream) authorizationState() (*oauth.Status, bool) {
	if h := u.g.oauth.Handler(u.name, ""); h != nil {
		st := h.Status()
		return &st, st.State == oauth.StateNeedsAuthorization
	}
	return nil, u.g.oauth.Challenged(u.name)
}

// OAuthStatus lists the upstream authorizations (no tokens).
func (g *Gateway) OAuthStatus() []oauth.Status { return g.oauth.Status() }

// OAuthLogin starts (or joins) the authorization of server.
func (g *Gateway) OAuthLogin(ctx context.Context, server string) (oauth.Status, error) {
	return g.oauth.Login(ctx, server, "")
}

// OAuthLogout forgets the tokens of server for identity ("" the shared
// one).
func (g *Gateway) OAuthLogout(server, identity string) error {
	return g.oauth.Logout(server, identity)
}

// The admin API's OAuth operations.
func (o adminOps) OAuthStatus() []oauth.Status { return o.g.OAuthStatus() }
func (o adminOps) OAuthLogin(ctx context.Context, server string) (oauth.Status, error) {
	return o.g.OAuthLogin(ctx, server)
}
func (o adminOps) OAuthLogout(server, identity string) error {
	return o.g.OAuthLogout(server, identity)
}
