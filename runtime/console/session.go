package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cookieName is the console's session cookie.
const cookieName = "edge_mcp_console"

// sessionTTL is how long a console login lasts.
const sessionTTL = 8 * time.Hour

// keys signs session cookies and derives CSRF tokens. The key is kept in
// the state folder (loadKey): a restart keeps every console user logged
// in; without a state folder it is random per process.
type keys struct{ key []byte }

func (k keys) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, k.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// cookieValue is a signed session: identity, expiry (Unix seconds) and
// the HMAC of both.
func (k keys) cookieValue(identity string, expires time.Time) string {
	id := base64.RawURLEncoding.EncodeToString([]byte(identity))
	exp := strconv.FormatInt(expires.Unix(), 10)
	return id + "." + exp + "." + base64.RawURLEncoding.EncodeToString(k.mac("session", id, exp))
}

// parseCookie returns the identity of a session cookie value signed by
// k and not expired at now, or false.
func (k keys) parseCookie(v string, now time.Time) (string, bool) {
	id, rest, ok := strings.Cut(v, ".")
	if !ok {
		return "", false
	}
	exp, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, k.mac("session", id, exp)) {
		return "", false
	}
	secs, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !now.Before(time.Unix(secs, 0)) {
		return "", false
	}
	name, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(name) == 0 {
		return "", false
	}
	return string(name), true
}

// csrf is the CSRF token of the forms shown to the holder of session (a
// cookie value, "local" without tokens, "login" for the login form).
func (k keys) csrf(session string) string {
	return base64.RawURLEncoding.EncodeToString(k.mac("csrf", session))
}

func (k keys) checkCSRF(session, presented string) bool {
	want := k.csrf(session)
	return len(presented) == len(want) && subtle.ConstantTimeCompare([]byte(want), []byte(presented)) == 1
}

// who is the visitor of one request: its admin identity ("" when not
// logged in) and the session its forms are bound to.
type who struct {
	identity string
	session  string
}

// whoIs authenticates r: "local" when no admin token is configured, else
// the identity of a valid session cookie whose identity still has a
// token.
func (c *Console) whoIs(r *http.Request) who {
	ids := c.auth.Identities()
	if len(ids) == 0 {
		return who{identity: "local", session: "local"}
	}
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return who{session: "login"}
	}
	id, ok := c.keys.parseCookie(ck.Value, c.now())
	if !ok || !slices.Contains(ids, id) {
		return who{session: "login"}
	}
	return who{identity: id, session: ck.Value}
}

func (c *Console) setSession(w http.ResponseWriter, r *http.Request, identity string) {
	exp := c.now().Add(sessionTTL)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.keys.cookieValue(identity, exp), Path: "/ui/",
		Expires: exp, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

func (c *Console) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}
