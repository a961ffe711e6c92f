package admin

import (
	"errors"
	"net/http"

	"github.com/edge-mcp/edge-mcp/runtime/oauth"
)

// This file is the admin API's side of upstream OAuth: the same
// operations as `edge-mcp auth status|login|logout`. No answer and no
// audit record holds a token.

func (s *Server) oauthStatus(w http.ResponseWriter, r *http.Request) {
	list := s.ops.OAuthStatus()
	if list == nil {
		list = []oauth.Status{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"servers": list})
}

// oauthLogin starts the authorization of a server and answers with its
// status: the URL a person must open while it is pending.
func (s *Server) oauthLogin(w http.ResponseWriter, r *http.Request) {
	server := r.PathValue("server")
	st, err := s.ops.OAuthLogin(r.Context(), server)
	if err != nil {
		if errors.Is(err, oauth.ErrUnknownServer) {
			s.writeError(w, Errorf(http.StatusNotFound, "not_found", "server %q has no \"oauth\" section", server))
			return
		}
		s.record(r, "oauth.login.failed", server, "", err.Error())
		s.writeError(w, Errorf(http.StatusBadGateway, "authorization_failed", "%v", err))
		return
	}
	detail := "authorization pending"
	if st.PendingURL == "" {
		detail = "authorized without a person (" + st.Grant + ")"
	}
	s.record(r, "oauth.login", server, "", detail)
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) oauthLogout(w http.ResponseWriter, r *http.Request) {
	server, identity := r.PathValue("server"), r.URL.Query().Get("identity")
	if err := s.ops.OAuthLogout(server, identity); err != nil {
		if errors.Is(err, oauth.ErrUnknownServer) {
			s.writeError(w, Errorf(http.StatusNotFound, "not_found", "server %q has no \"oauth\" section", server))
			return
		}
		s.writeError(w, err)
		return
	}
	detail := "tokens forgotten"
	if identity != "" {
		detail = "tokens of identity " + identity + " forgotten"
	}
	s.record(r, "oauth.logout", server, "", detail)
	writeJSON(w, http.StatusOK, map[string]bool{"logged_out": true})
}
