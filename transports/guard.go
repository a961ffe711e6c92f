package transports

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// GuardOptions configures a [Guard].
type GuardOptions struct {
	// AllowedOrigins lists Origin header values (scheme://host[:port],
	// compared case-insensitively, a trailing slash ignored) accepted besides
	// loopback origins (when the Host is a loopback name) and same-origin
	// requests (when it is not). "*" accepts any Origin.
	AllowedOrigins []string
	// AllowedHosts lists Host header values, with or without port, accepted
	// on a loopback listener besides loopback names (compared
	// case-insensitively). "*" accepts any Host. On a listener that is not a
	// loopback address every Host is accepted.
	AllowedHosts []string
}

// Guard protects HTTP endpoints against DNS rebinding and cross-origin
// requests from browsers, as the MCP specification asks of servers that
// accept connections on localhost. It is the one guard of every server
// transport of this package, and meant to be put in front of every other
// HTTP surface of the gateway too (see [Guard.Wrap]).
//
// A request is refused (403) when
//   - it arrived on a loopback listener with a Host that is neither a
//     loopback name (localhost, 127.0.0.0/8, ::1) nor listed in
//     AllowedHosts, or
//   - it has an Origin header that is not listed in AllowedOrigins, and is
//     neither a loopback origin for a loopback Host nor the Host itself
//     (same-origin) for a Host that is not a loopback name.
//
// A request without an Origin header (any non-browser client) is checked by
// its Host only.
//
// A Guard is immutable after [NewGuard] returns and safe for concurrent use
// by any number of goroutines. [Guard.Check] does not allocate for allowed
// requests with loopback or listed hosts and well-formed origins.
type Guard struct {
	origins   map[string]struct{}
	hosts     map[string]struct{}
	anyOrigin bool
	anyHost   bool
}

// NewGuard returns a guard with the given rules; the zero GuardOptions
// accept loopback traffic and same-origin browser requests only.
func NewGuard(opts GuardOptions) *Guard {
	g := &Guard{
		origins: make(map[string]struct{}, len(opts.AllowedOrigins)),
		hosts:   make(map[string]struct{}, len(opts.AllowedHosts)),
	}
	for _, o := range opts.AllowedOrigins {
		if o == "*" {
			g.anyOrigin = true
		}
		g.origins[strings.ToLower(strings.TrimRight(o, "/"))] = struct{}{}
	}
	for _, h := range opts.AllowedHosts {
		if h == "*" {
			g.anyHost = true
		}
		g.hosts[strings.ToLower(h)] = struct{}{}
	}
	return g
}

// Check decides whether r may proceed. It returns status 0 and an empty
// reason when it may, and otherwise [http.StatusForbidden] and a reason
// that names what was refused ("Forbidden: Host ..." or
// "Forbidden: Origin ...").
func (g *Guard) Check(r *http.Request) (status int, reason string) {
	hostname := hostnameOf(r.Host)
	loopbackHost := isLoopbackName(hostname)
	if !loopbackHost && !g.anyHost && onLoopbackListener(r) &&
		!g.hasHost(r.Host) && !g.hasHost(hostname) {
		return http.StatusForbidden, fmt.Sprintf("Forbidden: Host %q is not allowed on a loopback listener", r.Host)
	}
	origin := headerValue(r.Header, "Origin")
	if origin == "" || g.anyOrigin || g.hasOrigin(origin) {
		return 0, ""
	}
	if authority, ok := originAuthority(origin); ok {
		if loopbackHost && isLoopbackName(hostnameOf(authority)) {
			return 0, ""
		}
		if !loopbackHost && strings.EqualFold(authority, r.Host) {
			return 0, ""
		}
	}
	return http.StatusForbidden, fmt.Sprintf("Forbidden: Origin %q is not allowed", origin)
}

// Wrap returns a handler that refuses what [Guard.Check] refuses, with its
// status and a JSON-RPC error body (id null, code -32000, the reason as
// message), and passes every other request to next.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status, reason := g.Check(r); status != 0 {
			writeRejection(w, status, reason)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allow writes the rejection of r and returns false when g refuses it.
func (g *Guard) allow(w http.ResponseWriter, r *http.Request) bool {
	if status, reason := g.Check(r); status != 0 {
		writeRejection(w, status, reason)
		return false
	}
	return true
}

func (g *Guard) hasHost(h string) bool {
	if len(g.hosts) == 0 {
		return false
	}
	_, ok := g.hosts[strings.ToLower(h)]
	return ok
}

func (g *Guard) hasOrigin(o string) bool {
	if len(g.origins) == 0 {
		return false
	}
	_, ok := g.origins[strings.ToLower(strings.TrimRight(o, "/"))]
	return ok
}

// CheckJSONContentType decides whether the body of r is declared as JSON:
// its Content-Type must be application/json, parameters (charset) allowed,
// case-insensitively. It returns status 0 and an empty reason when it is,
// and otherwise [http.StatusUnsupportedMediaType] and a reason.
func CheckJSONContentType(r *http.Request) (status int, reason string) {
	ct := headerValue(r.Header, "Content-Type")
	if isJSONContentType(ct) {
		return 0, ""
	}
	if ct == "" {
		return http.StatusUnsupportedMediaType, "Content-Type must be application/json (none was sent)"
	}
	return http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type must be application/json, not %q", ct)
}

// RequireJSON returns a handler that refuses a POST whose body is not
// declared as JSON (see [CheckJSONContentType]) with 415 and a JSON-RPC
// error body (id null, code -32000, the reason as message), and passes
// every other request to next. It is safe for concurrent use.
func RequireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !requireJSON(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireJSON writes the rejection of r and returns false when its body is
// not declared as JSON.
func requireJSON(w http.ResponseWriter, r *http.Request) bool {
	if status, reason := CheckJSONContentType(r); status != 0 {
		writeRejection(w, status, reason)
		return false
	}
	return true
}

func isJSONContentType(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(ct), "application/json")
}

// writeRejection answers a request refused before it reached a session.
func writeRejection(w http.ResponseWriter, status int, reason string) {
	writeJSONRPCError(w, status, noID, codeServerError, reason, nil)
}

// headerValue is h.Get(key) for a canonical key, without canonicalizing it.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// onLoopbackListener reports whether the request arrived on a loopback
// address.
func onLoopbackListener(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || addr == nil {
		return false
	}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostnameOf returns the host part of a Host header value (or of an
// origin's authority), without port or IPv6 brackets.
func hostnameOf(hostport string) string {
	if strings.IndexByte(hostport, ':') >= 0 {
		if h, _, err := net.SplitHostPort(hostport); err == nil {
			return h
		}
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// isLoopbackName reports whether host (without port or brackets) is
// "localhost" or a loopback IP address without zone.
func isLoopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if !maybeIP(host) {
		return false // a name: spare ParseAddr its error allocation
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.IsLoopback()
}

// maybeIP reports whether s consists of the characters of IPv4 and IPv6
// addresses without zone only.
func maybeIP(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == '.' || c == ':') {
			return false
		}
	}
	return s != ""
}

// originAuthority returns the host[:port] of an Origin header value, as
// url.Parse would return it in Host, and false when the value has none
// (such as "null") or does not parse. Plain origins are parsed without
// allocating; anything unusual goes through url.Parse.
func originAuthority(origin string) (string, bool) {
	if a, ok := plainOriginAuthority(origin); ok {
		return a, true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return "", false
	}
	return u.Host, true
}

// plainOriginAuthority parses scheme://host[:port] where scheme is a valid
// URL scheme and host is a DNS name, an IPv4 address or a bracketed IPv6
// address, with nothing after the port. It returns false for anything else.
func plainOriginAuthority(origin string) (string, bool) {
	scheme, authority, ok := strings.Cut(origin, "://")
	if !ok || !validScheme(scheme) || authority == "" {
		return "", false
	}
	host, port := authority, ""
	if authority[0] == '[' {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", false
		}
		ip, err := netip.ParseAddr(authority[1:end])
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", false
		}
		host, port = "", authority[end+1:]
	} else if i := strings.IndexByte(authority, ':'); i >= 0 {
		host, port = authority[:i], authority[i:]
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return "", false
		}
	}
	if port != "" {
		if port[0] != ':' {
			return "", false
		}
		for i := 1; i < len(port); i++ {
			if port[i] < '0' || port[i] > '9' {
				return "", false
			}
		}
	}
	return authority, true
}

// validScheme reports whether s is a URL scheme: a letter, then letters,
// digits, '+', '-' or '.'.
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}
