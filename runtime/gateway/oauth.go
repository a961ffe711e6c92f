package gateway

import (
	"context"

	"github.com/edge-mcp/edge-mcp/runtime/oauth"
	"github.com/edge-mcp/edge-mcp/runtime/reconnect"
)

// This file is the gateway's side of upstream OAuth (runtime/oauth does
// the work: the manager, its token store, the handler each remote
// upstream's transport calls, oauth.Open): the state
// needs_authorization, and the operations the admin API asks for.

// StateNeedsAuthorization: the upstream wants a token the gateway does not
// have (first login, a token that expired and cannot be refreshed, or a
// 401 challenge from a server without an "oauth" section).
const StateNeedsAuthorization = reconnect.NeedsAuthorization

// SetListenAddr tells the gateway where its listener is, for the default
// OAuth callback (http://ADDR/oauth/callback) when oauth.redirect_url is
// not set: with port 0 in "listen", the port is known only then.
func (g *Gateway) SetListenAddr(addr string) {
	if g.config().OAuth.RedirectURL == "" {
		g.oauth.SetRedirectURL("http://" + addr + "/oauth/callback")
	}
}

// awaitAuthorization holds the dial of an upstream whose handler has no
// token and needs a person (oauth.Handler.AwaitPerson), in the state
// needs_authorization meanwhile. It reports whether the upstream may dial.
func (u *upstream) awaitAuthorization(ctx context.Context) bool {
	h := u.g.oauth.Handler(u.name, "")
	if h == nil || h.Ready() {
		return true
	}
	u.keep.Set(StateNeedsAuthorization, &oauth.NeedsAuthorizationError{Server: u.name})
	u.g.metrics.UpstreamNeedsAuthorization(u.name, true)
	defer u.g.metrics.UpstreamNeedsAuthorization(u.name, false)
	return h.AwaitPerson(ctx, func(err error) {
		u.log.Warn("starting the upstream authorization", "err", err)
		u.keep.Set(StateNeedsAuthorization, err)
	})
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

// The admin API's OAuth operations: the upstream authorizations (no
// tokens), starting (or joining) the authorization of a server, and
// forgetting the tokens of a server for an identity ("" the shared one).
func (o adminOps) OAuthStatus() []oauth.Status { return o.g.oauth.Status() }
func (o adminOps) OAuthLogin(ctx context.Context, server string) (oauth.Status, error) {
	return o.g.oauth.Login(ctx, server, "")
}
func (o adminOps) OAuthLogout(server, identity string) error {
	return o.g.oauth.Logout(server, identity)
}
