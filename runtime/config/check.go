package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
)

// This file holds the checks the key table and the server finishing use:
// first of single values (names, addresses, URLs), then of whole sections.

// configValidName reports whether s matches [A-Za-z0-9_.-]{1,64}.
func configValidName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c == '.' || c == '-' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// configValidToken reports whether s is an HTTP token (RFC 9110 §5.6.2).
func configValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// configCanonicalHeader canonicalizes an HTTP token the way net/http does.
func configCanonicalHeader(s string) string {
	b := []byte(strings.ToLower(s))
	upper := true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		upper = c == '-'
	}
	return string(b)
}

func configCheckListen(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err == nil {
		if strings.ContainsAny(host, " /") {
			err = errors.New("invalid host")
		} else if n, perr := strconv.ParseUint(port, 10, 16); perr != nil || port != strconv.FormatUint(n, 10) {
			err = errors.New("port must be a number from 0 to 65535")
		}
	}
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Sprintf("must be HOST:PORT such as 127.0.0.1:8080, got %s (%v)", configQuote(s), err)
	}
	return ""
}

func configCheckOrigin(s string) string {
	if s == "*" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#") {
		return fmt.Sprintf(`must be an origin such as https://app.example.com (scheme://host[:port], no path), or "*" for any, got %s`, configQuote(s))
	}
	return ""
}

func configCheckHost(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\r\n/\\?#@,") {
		return fmt.Sprintf("must be a host or host:port such as localhost:8080, got %s", configQuote(s))
	}
	return ""
}

// configCheckExposed validates a reserved exposed name.
func configCheckExposed(name string) string {
	if name == "" || len(name) > 128 {
		return "a reserved name must be 1 to 128 characters"
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return "a reserved name must not contain control characters"
		}
	}
	return ""
}

// configCheckURL validates the url of a remote server of type typ. It never
// echoes the URL, which may carry credentials.
func configCheckURL(s, typ string) string {
	if s == "" {
		return "must not be empty"
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Sprintf("is not a valid URL: %v", err)
	}
	want1, want2 := "http", "https"
	if typ == configTypeWebSocket {
		want1, want2 = "ws", "wss"
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != want1 && scheme != want2:
		got := configQuote(u.Scheme)
		if u.Scheme == "" {
			got = "none"
		}
		return fmt.Sprintf("scheme must be %s or %s for a server of type %q, got %s", want1, want2, typ, got)
	case u.Host == "" || u.Hostname() == "":
		return "must include a host, such as " + want1 + "://localhost:3000/mcp"
	}
	return ""
}

// configUnknownKey explains an unknown key, suggesting the intended one when
// it differs only in case, "_" or "-".
func configUnknownKey(k string, valid []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, v := range valid {
		if norm(v) == norm(k) {
			return fmt.Sprintf("unknown key; did you mean %q?", v)
		}
	}
	return "unknown key; valid keys here are " + strings.Join(valid, ", ")
}

// This part holds the checks of the gateway sections that involve more
// than one key; the table (keys.go) refers to them.

// checkAdmin checks the admin section.
func checkAdmin(v any) (at, reason string) {
	a := v.(*Admin)
	if a.Listen != "" && a.Listen != "off" {
		if reason := configCheckListen(a.Listen); reason != "" {
			return "listen", reason
		}
		if !LoopbackAddr(a.Listen) && len(a.Tokens) == 0 {
			return "listen", "is not a loopback address, so the admin API needs admin.tokens (anyone who reaches it could replace policy modules)"
		}
	}
	for name, tok := range a.Tokens {
		if name == "" {
			return "tokens", "an admin identity name must not be empty"
		}
		if len(tok) < 16 {
			return "tokens." + name, fmt.Sprintf("must be at least 16 characters (got %d)", len(tok))
		}
	}
	if a.RequireSigned && len(a.TrustedKeys) == 0 {
		return "require_signed", "is true but admin.trusted_keys is empty: no upload could ever be accepted"
	}
	return "", ""
}

// checkSignatureRule checks one admin.require_signature entry: a prefix
// and keys that parse.
func checkSignatureRule(v any) (at, reason string) {
	r := v.(*SignatureRule)
	if strings.TrimSpace(r.Prefix) == "" || strings.Contains(r.Prefix, "://") {
		return "prefix", `is required: a registry host ("ghcr.io"), or a repository prefix ("ghcr.io/acme/"), without oci://`
	}
	keyless := r.TrustedRoot != "" || r.CertificateIdentity != "" || r.CertificateIdentityRegexp != "" || r.CertificateOIDCIssuer != ""
	if len(r.CosignKeys) == 0 && !keyless {
		return "cosign_keys", "is empty (and no keyless trusted_root): no module under the prefix could ever be accepted"
	}
	if _, err := ociwasm.ParseKeys(r.CosignKeys...); err != nil {
		return "cosign_keys", err.Error()
	}
	if _, err := r.Keys(); err != nil {
		key, reason, _ := strings.Cut(err.Error(), ": ")
		if key == "keyless" {
			key = "certificate_oidc_issuer"
		}
		return key, reason
	}
	return "", ""
}

// checkAuth checks the auth section; secrets are never echoed.
func checkAuth(v any) (at, reason string) {
	a := v.(*Auth)
	switch a.Mode {
	case "", "none":
		if len(a.APIKeys) > 0 || a.JWT != nil {
			return "mode", `is "none" but api_keys or jwt are set: set mode to "api_key" or "jwt"`
		}
	case "api_key":
		if at, reason := checkAPIKeys(a.APIKeys); reason != "" {
			return at, reason
		}
	case "jwt":
		if at, reason := checkJWT(a.JWT); reason != "" {
			return at, reason
		}
	default:
		return "mode", fmt.Sprintf(`must be "none", "api_key" or "jwt", got %s`, configQuote(a.Mode))
	}
	if a.ResourceMetadata != nil && a.Mode != "jwt" {
		return "resource_metadata", `applies to mode "jwt" (OAuth access tokens) only`
	}
	return "", ""
}

// checkAPIKeys checks the keys of mode "api_key".
func checkAPIKeys(keys []APIKey) (at, reason string) {
	if len(keys) == 0 {
		return "api_keys", `is empty: mode "api_key" needs at least one key`
	}
	for i, k := range keys {
		p := fmt.Sprintf("api_keys[%d]", i)
		if k.Name == "" {
			return p + ".name", "is required: it names the client identity"
		}
		if (k.Key == "") == (k.SHA256 == "") {
			return p, `needs exactly one of "key" and "sha256"`
		}
	}
	return "", ""
}

// checkJWT checks the settings of mode "jwt".
func checkJWT(j *JWT) (at, reason string) {
	switch {
	case j == nil:
		return "jwt", `is required for mode "jwt"`
	case j.Issuer == "":
		return "jwt.issuer", "is required"
	case len(j.Audience) == 0:
		return "jwt.audience", "is required (the audience tokens must be issued for)"
	}
	n := 0
	for _, s := range []string{j.HMACSecret, j.HMACSecretFile, j.PublicKeysFile, j.JWKSURL} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return "jwt", "needs exactly one key source: hmac_secret, hmac_secret_file, public_keys_file or jwks_url"
	}
	return "", ""
}

// checkAccessRule checks one access rule.
func checkAccessRule(v any) (at, reason string) {
	if len(v.(*AccessRule).Identities) == 0 {
		return "identities", `is required (globs over client identity names; "*" for everyone)`
	}
	return "", ""
}

// checkString adapts a check of a string value to the table's form.
func checkString(f func(string) string) func(any) (string, string) {
	return func(v any) (string, string) { return "", f(*v.(*string)) }
}

// oneOf accepts the listed values ("" among them: the key may be empty).
func oneOf(vals ...string) func(any) (string, string) {
	var quoted []string
	for _, v := range vals {
		if v != "" {
			quoted = append(quoted, strconv.Quote(v))
		}
	}
	want := strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	return checkString(func(s string) string {
		for _, v := range vals {
			if s == v {
				return ""
			}
		}
		return fmt.Sprintf("must be %s, got %s", want, configQuote(s))
	})
}

// between accepts whole numbers from lo to hi (v is *int or **int).
func between(lo, hi int) func(any) (string, string) {
	return func(v any) (string, string) {
		if n, ok := numberAt[int](v); ok && (n < lo || n > hi) {
			return "", fmt.Sprintf("must be a whole number from %d to %d, got %d", lo, hi, n)
		}
		return "", ""
	}
}

// inRange accepts numbers from lo to hi (v is *float64 or **float64);
// unit follows the bounds in the reason.
func inRange(lo, hi float64, unit string) func(any) (string, string) {
	return func(v any) (string, string) {
		if x, ok := numberAt[float64](v); ok && (x < lo || x > hi) {
			return "", fmt.Sprintf("must be between %v and %v%s, got %v", lo, hi, unit, x)
		}
		return "", ""
	}
}

// notNegative accepts whole numbers from 0 up (v is *int or **int).
func notNegative(v any) (at, reason string) {
	if n, ok := numberAt[int](v); ok && n < 0 {
		return "", "must not be negative"
	}
	return "", ""
}

// numberAt returns the number v points at (v is *T, or **T: false when
// the key was absent).
func numberAt[T int | float64](v any) (T, bool) {
	switch p := v.(type) {
	case *T:
		return *p, true
	case **T:
		if *p != nil {
			return **p, true
		}
	}
	return 0, false
}

// checkRate checks a token bucket.
func checkRate(v any) (at, reason string) {
	r := v.(*Rate)
	if r.RPS <= 0 {
		return "rps", fmt.Sprintf("must be a positive number of calls per second, got %v", r.RPS)
	}
	if r.Burst < 0 {
		return "burst", "must not be negative"
	}
	return "", ""
}
