package virtual

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// nameKey is the context key of the virtual server a request is for.
type nameKey struct{}

// Endpoint describes how the gateway serves its MCP transports, for
// Handler.
type Endpoint struct {
	// Servers returns the virtual servers of the running configuration.
	Servers func() *Set
	// Admit wraps a transport in the gateway's admission (authentication,
	// rate limits) for transport; the request it passes on carries the
	// identity.
	Admit func(transport string, next http.Handler) http.Handler
	// Identity returns who an admitted request authenticated as.
	Identity func(*http.Request) string
	// Transports serve MCP, by the suffix of the path they are served at
	// beside a virtual server's: "" (streamable HTTP), "/sse", "/ws".
	Transports []Transport
	Log        *slog.Logger
}

// Transport is one MCP transport of Endpoint.
type Transport struct {
	Suffix, Name string // "/sse", "sse"
	Handler      http.Handler
	// Strip hands Handler the path without the server's ("/v1/tools"
	// for "/mcp/triage/v1/tools").
	Strip bool
}

// Handler serves the virtual servers' paths: each transport at the
// server's path plus its suffix (/mcp/triage, /mcp/triage/sse,
// /mcp/triage/ws), behind e.Admit, with the server's name in the
// request's context (NameOf) for the session it opens. A path no virtual
// server has is 404 (the list of paths is for the admin API, not for
// clients); an identity the server's allow list leaves out gets 403.
func Handler(e Endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var vs *Server
		var tr Transport
		for _, tr = range e.Transports {
			if p, ok := strings.CutSuffix(r.URL.Path, tr.Suffix); ok {
				if vs = e.Servers().ByPath(p); vs != nil {
					break
				}
			}
		}
		if vs == nil {
			http.NotFound(w, r)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), nameKey{}, vs.Name))
		if tr.Strip {
			r.URL.Path = strings.TrimPrefix(r.URL.Path, vs.Path)
			r.URL.RawPath = ""
		}
		e.Admit(tr.Name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id := e.Identity(r); !vs.Allowed(id) {
				e.Log.Info("identity refused by a virtual server's allow list", "virtual_server", vs.Name, "identity", id)
				http.Error(w, fmt.Sprintf("identity %q may not use this endpoint", id), http.StatusForbidden)
				return
			}
			tr.Handler.ServeHTTP(w, r)
		})).ServeHTTP(w, r)
	})
}

// NameOf returns the virtual server a request Handler served is for, or
// "".
func NameOf(r *http.Request) string {
	name, _ := r.Context().Value(nameKey{}).(string)
	return name
}
