package oauth

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"

	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/transports"
)

// Challenge returns the handler for a remote server without an "oauth"
// section: it adds no token, and a 401 fails the request with a
// NotConfiguredError (when the answer carries a Bearer challenge) that
// says what to configure; Challenged then reports the server until
// Connected clears it.
func (m *Manager) Challenge(server string, hadToken bool) auth.OAuthHandler {
	return &challenge{m: m, server: server, hadToken: hadToken}
}

// Challenged reports whether server answered 401 with a Bearer challenge
// since it last connected.
func (m *Manager) Challenged(server string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.challenged[server]
}

// Connected clears what Challenged reports for server.
func (m *Manager) Connected(server string) {
	m.mu.Lock()
	delete(m.challenged, server)
	m.mu.Unlock()
}

type challenge struct {
	m        *Manager
	server   string
	hadToken bool
}

func (c *challenge) TokenSource(context.Context) (oauth2.TokenSource, error) { return nil, nil }

func (c *challenge) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	drain(resp)
	if resp.StatusCode != http.StatusUnauthorized {
		return fmt.Errorf("server %q answered HTTP %d", c.server, resp.StatusCode)
	}
	bearer := false
	for _, v := range resp.Header.Values("WWW-Authenticate") {
		if len(v) >= 6 && (v[:6] == "Bearer" || v[:6] == "bearer") {
			bearer = true
		}
	}
	if !bearer {
		return fmt.Errorf("server %q answered HTTP 401 Unauthorized", c.server)
	}
	c.m.mu.Lock()
	c.m.challenged[c.server] = true
	c.m.mu.Unlock()
	return &NotConfiguredError{Server: c.server, HadToken: c.hadToken}
}

// HTTPClient is the HTTP client of a remote server that is not an
// upstream (an interceptor server): with an "oauth" section, one whose
// requests carry the server's token and authorize on a 401 as an
// upstream's transport does (a grant that needs a person starts an
// authorization, shown in Status; the request fails until it completes);
// else transports.SharedHTTPClient. Both keep many idle connections to
// the server, so that concurrent invocations do not dial each.
func (m *Manager) HTTPClient(sc config.Server) (*http.Client, error) {
	if sc.OAuth == nil {
		return transports.SharedHTTPClient(), nil
	}
	h := m.Handler(sc.Name, "")
	if h == nil {
		return nil, fmt.Errorf("server %q: its oauth section is not configured in this process's OAuth manager", sc.Name)
	}
	return transports.WithOAuth(transports.SharedHTTPClient(), h), nil
}
