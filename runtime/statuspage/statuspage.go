package statuspage

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
	"github.com/edge-mcp/edge-mcp/runtime/interceptchain"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
	"github.com/edge-mcp/edge-mcp/runtime/reconnect"
)

// Server is one upstream's entry in the status document.
type Server struct {
	Name            string          `json:"name"`
	Transport       string          `json:"transport"`
	State           reconnect.State `json:"state"`
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	Tools           int             `json:"tools"`
	Prompts         int             `json:"prompts"`
	Resources       int             `json:"resources"`
	Templates       int             `json:"resource_templates"`
	LastHealthCheck time.Time       `json:"last_health_check,omitzero"`
	Retries         int             `json:"retries"`
	NextRetry       time.Time       `json:"next_retry,omitzero"`
	LastError       string          `json:"last_error,omitempty"`
	// Authorization is the upstream OAuth state of a server with an
	// "oauth" section (no token: the state, validity, scopes, and the URL
	// of a pending authorization, which the /status document leaves out).
	Authorization *oauth.Status `json:"authorization,omitempty"`
}

// Policy is one policy module's entry in the status document.
type Policy struct {
	Name       string `json:"name"`
	Digest     string `json:"digest"`
	ABIVersion string `json:"abi_version"`
	Healthy    bool   `json:"healthy"`
	Calls      uint64 `json:"calls"`
	Failures   uint64 `json:"failures"`
	Instances  int64  `json:"instances"`
	LastError  string `json:"last_error,omitempty"`
}

// Document is the /status document.
type Document struct {
	Servers      []Server               `json:"servers"`
	Policies     []Policy               `json:"policies,omitempty"`
	Fleet        *fleet.Status          `json:"fleet,omitempty"`
	ClientMemory *budget.Stats          `json:"client_memory,omitempty"`
	Interceptors *interceptchain.Status `json:"interceptors,omitempty"`
}

// Source is the gateway, as its status pages read it.
type Source interface {
	// Version is the gateway's version.
	Version() string
	// Missing names the required servers (observability.required_servers)
	// that are not connected; started is false before the gateway starts.
	Missing() (missing []string, started bool)
	// Degraded says why a fleet replica serves degraded ("": it does not).
	Degraded() string
	// Document is the status document now.
	Document(ctx context.Context) Document
}

// Index says, to someone who opens the listener's address in a browser
// or with curl, what this is and where to go.
func Index(src Source) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprintf(w, `edge-mcp %s: an MCP gateway, one MCP endpoint in front of many MCP servers.

Connect an MCP client (streamable HTTP) to /mcp on this address, e.g.
  claude mcp add --transport http edge http://%s/mcp
Other transports: /sse (legacy HTTP+SSE), /ws (WebSocket, subprotocol mcp).

  /status      the upstream servers and their state (JSON)
  /v1/tools    the tools as OpenAI function definitions; POST /v1/tools/call calls one
  /healthz     alive; /readyz: ready
  /metrics     Prometheus metrics

Documentation: https://github.com/edge-mcp/edge-mcp#readme
`, src.Version(), r.Host)
	}
}

// Healthz answers while the process serves.
func Healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// Readyz answers 200 once the configuration is loaded and every required
// upstream is connected, else 503 naming what is missing. A fleet replica
// whose NATS is away answers 200 "degraded" with the reason: it serves
// with what it has.
func Readyz(src Source) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		missing, started := src.Missing()
		w.Header().Set("Content-Type", "application/json")
		if !started || len(missing) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]any{"status": "not ready", "missing": missing})
			return
		}
		if reason := src.Degraded(); reason != "" {
			// Still 200: every replica loses the same NATS at once, and a
			// load balancer must not drain the whole fleet for it.
			json.NewEncoder(w).Encode(map[string]any{"status": "degraded", "reason": reason})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"status": "ready"})
	}
}

// Status answers the status document of the public listener. It carries
// no live secret: a pending authorization's URL holds the OAuth state
// that completes the login (whoever opens it binds the upstream to their
// own account) or cancels it, so it is left out here; the admin API,
// `edge-mcp auth status` and the gateway's OAuthStatus show it.
func Status(src Source) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		doc := src.Document(r.Context())
		for i, st := range doc.Servers {
			if a := st.Authorization; a != nil && a.PendingURL != "" {
				public := *a
				public.PendingURL = ""
				doc.Servers[i].Authorization = &public
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	}
}
