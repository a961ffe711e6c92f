package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Realm is the realm of the gateway's Bearer challenges.
const Realm = "edge-mcp"

// MetadataPath is the well-known path of the protected resource metadata
// document (RFC 9728 §3).
const MetadataPath = "/.well-known/oauth-protected-resource"

// maxCredentialLen bounds a presented token or key.
const maxCredentialLen = 16 << 10

// validCredential reports whether s is a plausible credential: 1 to
// maxCredentialLen visible ASCII characters. It accepts every b64token of
// RFC 6750 and every key newAPIKeys accepts.
func validCredential(s string) bool {
	if s == "" || len(s) > maxCredentialLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// bearerToken returns the token of the request's single
// "Authorization: Bearer" header.
func bearerToken(h http.Header) (string, error) {
	vals := h.Values("Authorization")
	switch {
	case len(vals) == 0:
		return "", fmt.Errorf("auth: no Authorization header: %w", ErrMissingCredentials)
	case len(vals) > 1:
		return "", fmt.Errorf("auth: several Authorization headers: %w", ErrMalformed)
	}
	scheme, tok, _ := strings.Cut(vals[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		// The scheme is not quoted: with a malformed header it may be the
		// credential itself.
		return "", fmt.Errorf("auth: Authorization: not a Bearer credential: %w", ErrMalformed)
	}
	tok = strings.TrimLeft(tok, " ")
	if !validCredential(tok) {
		return "", fmt.Errorf("auth: Authorization: not a valid bearer token: %w", ErrMalformed)
	}
	return tok, nil
}

// Middleware authenticates every request before next sees it. On success
// next receives the Identity in the request context (see FromContext) and,
// unless the mode is none, the request without its Authorization and
// X-API-Key headers, so that no handler can pass the client's credential
// upstream. On failure Middleware answers 401 with a Bearer challenge
// (RFC 6750 §3) carrying resource_metadata when ResourceMetadata is
// configured (RFC 9728 §5.1) and a small JSON body; it never echoes the
// credential.
//
// MetadataHandler must be routed outside Middleware: clients fetch the
// metadata before they hold a token.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.Authenticate(r)
		if err != nil {
			a.logFailure(r, err)
			a.writeChallenge(w, err)
			return
		}
		ctx := WithIdentity(r.Context(), id)
		r = r.WithContext(ctx)
		if !id.Anonymous() {
			r.Header = r.Header.Clone()
			r.Header.Del("Authorization")
			r.Header.Del("X-Api-Key")
		}
		a.log.Debug("auth: authenticated", "name", id.Name, "method", id.Method)
		next.ServeHTTP(w, r)
	})
}

// logFailure logs a failed authentication. Missing credentials are the
// first step of the OAuth flow, not an incident, hence debug level. Other
// failures are logged at most once per client address per minute, with the
// count of those left out since (every failure is counted in metrics by the
// caller).
func (a *Authenticator) logFailure(r *http.Request, err error) {
	ctx := r.Context()
	attrs := []any{"reason", reason(err), "error", err.Error(), "remote", r.RemoteAddr,
		"http_method", r.Method, "path", r.URL.Path}
	if errors.Is(err, ErrMissingCredentials) {
		a.log.DebugContext(ctx, "auth: authentication failed", attrs...)
		return
	}
	log, suppressed := a.failures.allow(r.RemoteAddr)
	if !log {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, "not_logged_since_last", suppressed)
	}
	a.log.InfoContext(ctx, "auth: authentication failed", attrs...)
}

// writeChallenge answers 401 for err.
func (a *Authenticator) writeChallenge(w http.ResponseWriter, err error) {
	desc := reason(err) // a sentinel's text: safe inside a quoted-string
	var ch strings.Builder
	ch.WriteString(`Bearer realm="` + Realm + `"`)
	body := struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}{Error: "unauthorized", Description: desc}
	if !errors.Is(err, ErrMissingCredentials) {
		// RFC 6750 §3.1: no error code when the request had no credential.
		ch.WriteString(`, error="invalid_token", error_description="` + desc + `"`)
		body.Error = "invalid_token"
	}
	if a.metadata != nil {
		ch.WriteString(`, resource_metadata="` + a.metadata.url + `"`)
	}
	h := w.Header()
	h.Set("WWW-Authenticate", ch.String())
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	b, _ := json.Marshal(body)
	_, _ = w.Write(append(b, '\n'))
}

// MetadataHandler serves the protected resource metadata document (RFC 9728)
// at MetadataPath and, when the resource identifier has a path, at
// MetadataPath followed by that path. It answers 404 on other paths and
// when ResourceMetadata is not configured. The document is public: route it
// outside Middleware.
func (a *Authenticator) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		md := a.metadata
		if md == nil || !slices.Contains(md.paths, r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "max-age=300")
		_, _ = w.Write(md.body)
	})
}

// metadataDoc is the validated, encoded ResourceMetadata.
type metadataDoc struct {
	body  []byte   // the JSON document
	url   string   // its absolute URL, for resource_metadata
	paths []string // the request paths it is served at
}

// newMetadataDoc validates rm and encodes its document.
func newMetadataDoc(rm ResourceMetadata) (*metadataDoc, error) {
	const f = "ResourceMetadata"
	u, err := checkURL(f+".Resource", rm.Resource)
	if err != nil {
		return nil, err
	}
	if u.RawQuery != "" || u.ForceQuery {
		return nil, fmt.Errorf("auth: config: %s.Resource: must not have a query", f)
	}
	if len(rm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("auth: config: %s.AuthorizationServers: at least one is required", f)
	}
	for i, s := range rm.AuthorizationServers {
		if _, err := checkURL(fmt.Sprintf("%s.AuthorizationServers[%d]", f, i), s); err != nil {
			return nil, err
		}
	}
	for i, s := range rm.ScopesSupported {
		if !validScope(s) {
			return nil, fmt.Errorf("auth: config: %s.ScopesSupported[%d]: %q is not a valid scope token", f, i, s)
		}
	}
	methods := rm.BearerMethodsSupported
	if len(methods) == 0 {
		methods = []string{"header"}
	}
	for i, m := range methods {
		if m != "header" {
			return nil, fmt.Errorf("auth: config: %s.BearerMethodsSupported[%d]: %q is not supported (only \"header\")", f, i, m)
		}
	}
	doc := struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ResourceName           string   `json:"resource_name,omitempty"`
	}{rm.Resource, rm.AuthorizationServers, rm.ScopesSupported, methods, rm.ResourceName}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("auth: encoding resource metadata: %w", err)
	}
	// RFC 9728 §3.1: the well-known path goes between the host and the
	// resource's path, whose terminating slash is dropped.
	suffix := strings.TrimSuffix(u.EscapedPath(), "/")
	md := &metadataDoc{
		body:  append(body, '\n'),
		url:   u.Scheme + "://" + u.Host + MetadataPath + suffix,
		paths: []string{MetadataPath},
	}
	if suffix != "" {
		p, err := url.PathUnescape(MetadataPath + suffix)
		if err != nil {
			return nil, fmt.Errorf("auth: config: %s.Resource: %w", f, err)
		}
		md.paths = append(md.paths, p)
	}
	return md, nil
}

// validScope reports whether s is a scope-token of RFC 6749 §3.3.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// checkURL parses an absolute https URL (http on a loopback host) without
// user information or fragment, naming field in its errors.
func checkURL(field, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("auth: config: %s: required", field)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("auth: config: %s: %w", field, err)
	}
	switch {
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("auth: config: %s: %q is not an absolute URL", field, raw)
	case u.Scheme != "https" && (u.Scheme != "http" || !isLoopback(u.Hostname())):
		return nil, fmt.Errorf("auth: config: %s: %q: want https (http only on a loopback host)", field, raw)
	case u.User != nil:
		return nil, fmt.Errorf("auth: config: %s: must not contain user information", field)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, fmt.Errorf("auth: config: %s: must not have a fragment", field)
	}
	return u, nil
}

// isLoopback reports whether host names the local machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
