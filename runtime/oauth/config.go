package oauth

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
)

// This file builds a gateway's Manager from its config (the token store,
// its key, and the handler each remote upstream's transport calls) and
// holds an upstream's dial until a person authorized it.

// Open builds the upstream OAuth manager of cfg with its token store:
// <stateDir>/oauth, sealed with oauth.key, oauth.key_file or a key
// generated there; with no state folder, in memory under a random key.
// redirect is the default callback; "" means oauth.redirect_url, else
// /oauth/callback on cfg's listener. The gateway and `edge-mcp auth` use
// it to reach the same tokens.
func Open(cfg *config.Config, stateDir string, log *slog.Logger, redirect string) (*Manager, error) {
	if redirect == "" {
		redirect = cfg.OAuth.RedirectURL
	}
	if redirect == "" {
		redirect = "http://" + cfg.Listen + "/oauth/callback"
	}
	key, dir, err := ConfigKey(cfg, stateDir)
	if err != nil {
		return nil, err
	}
	sealer, err := NewSealer(key)
	if err != nil {
		return nil, err
	}
	store, err := NewFileStore(dir, sealer)
	if err != nil {
		return nil, err
	}
	m := New(Options{Logger: log, Store: store, PendingWait: cfg.OAuth.PendingWait, RedirectURL: redirect})
	m.Configure(Servers(cfg))
	return m, nil
}

// Servers are the servers of cfg a Manager is configured with: every
// mcpServers entry, and the interceptorServers entries with an "oauth"
// section (their tokens are kept under their name as an upstream's are:
// the config refuses an interceptor server with oauth named like an
// upstream).
func Servers(cfg *config.Config) []config.Server {
	out := cfg.Servers
	for _, sc := range cfg.InterceptorServers {
		if sc.OAuth != nil {
			out = append(out[:len(out):len(out)], sc)
		}
	}
	return out
}

// ConfigKey returns the token store's key and folder ("" for memory).
func ConfigKey(cfg *config.Config, stateDir string) ([]byte, string, error) {
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
		key, err := LoadOrCreateKey(filepath.Join(dir, "key"), config.OAuthKey)
		return key, dir, err
	}
	key := make([]byte, 32)
	rand.Read(key)
	return key, "", nil
}

// UpstreamHandler is what the transport of remote server sc calls on 401:
// the server's handler when it has an "oauth" section, else one that
// notes the challenge so that /status can say what to configure.
func (m *Manager) UpstreamHandler(sc config.Server) auth.OAuthHandler {
	if h := m.Handler(sc.Name, ""); h != nil {
		return h
	}
	hadToken := sc.BearerToken != ""
	for k := range sc.Headers {
		hadToken = hadToken || strings.EqualFold(k, "Authorization")
	}
	return m.Challenge(sc.Name, hadToken)
}

// AwaitPerson holds the dial of an upstream whose handler has no token and
// needs a person: it starts the authorization (its URL shows in Status)
// and waits until it completes or ctx ends. A pending authorization
// expires unanswered, or the server cannot be asked: it starts another,
// with growing pauses, telling failed why a start failed. It reports
// whether the upstream may dial.
func (h *Handler) AwaitPerson(ctx context.Context, failed func(error)) bool {
	authorized := h.Authorized()
	pause := time.Second
	for {
		if _, err := h.Begin(ctx); err != nil && ctx.Err() == nil {
			failed(err)
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
