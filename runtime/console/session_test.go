package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSessionCookie(t *testing.T) {
	k := keys{[]byte("0123456789abcdef0123456789abcdef")}
	other := keys{[]byte("another key, another process....")}
	now := time.Unix(1_800_000_000, 0)
	good := k.cookieValue("ops", now.Add(time.Hour))
	id, _, _ := strings.Cut(good, ".")
	for _, tc := range []struct {
		name, value string
		at          time.Time
		want        string
	}{
		{"valid", good, now, "ops"},
		{"expired", good, now.Add(2 * time.Hour), ""},
		{"at expiry", good, now.Add(time.Hour), ""},
		{"signed by another key", other.cookieValue("ops", now.Add(time.Hour)), now, ""},
		{"identity swapped", "YWRtaW4" + good[len(id):], now, ""},
		{"expiry extended", id + "." + "9999999999" + good[strings.LastIndex(good, "."):], now, ""},
		{"empty", "", now, ""},
		{"no signature", id + ".1900000000", now, ""},
		{"empty identity", k.cookieValue("", now.Add(time.Hour)), now, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := k.parseCookie(tc.value, tc.at)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("parseCookie(%q) = %q, %v; want %q", tc.value, got, ok, tc.want)
			}
		})
	}
}

func TestCSRFToken(t *testing.T) {
	k := keys{[]byte("0123456789abcdef0123456789abcdef")}
	s1, s2 := k.cookieValue("ops", time.Now().Add(time.Hour)), k.cookieValue("dev", time.Now().Add(time.Hour))
	for _, tc := range []struct {
		name, session, token string
		ok                   bool
	}{
		{"its session's", s1, k.csrf(s1), true},
		{"another session's", s1, k.csrf(s2), false},
		{"the login form's", s1, k.csrf("login"), false},
		{"missing", s1, "", false},
		{"truncated", s1, k.csrf(s1)[:10], false},
		{"from another key", "local", keys{[]byte("x")}.csrf("local"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := k.checkCSRF(tc.session, tc.token); got != tc.ok {
				t.Errorf("checkCSRF = %v, want %v", got, tc.ok)
			}
		})
	}
}

// FuzzParseCookie: no cookie value makes the parser panic, and only a
// value this key signed is accepted.
func FuzzParseCookie(f *testing.F) {
	k := keys{[]byte("0123456789abcdef0123456789abcdef")}
	now := time.Unix(1_800_000_000, 0)
	f.Add(k.cookieValue("ops", now.Add(time.Hour)))
	f.Add("a.b.c")
	f.Add("..")
	f.Fuzz(func(t *testing.T, v string) {
		id, ok := k.parseCookie(v, now)
		if !ok {
			return
		}
		// Accepted only if it is exactly what the key signs.
		parts := strings.Split(v, ".")
		secs, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil || k.cookieValue(id, time.Unix(secs, 0)) != v {
			t.Fatalf("accepted %q as %q", v, id)
		}
	})
}

// tokenAuth is an admin API with one token.
type tokenAuth struct{}

func (tokenAuth) TokenIdentity(tok string) (string, bool) { return "ops", tok == "the-token" }
func (tokenAuth) Identities() []string                    { return []string{"ops"} }

// TestLoginRateLimit: after loginFailures wrong tokens from one address
// in a minute, that address is refused (429, Retry-After), even with the
// right token, until the minute ends; another address is not.
func TestLoginRateLimit(t *testing.T) {
	c := New(Options{Auth: tokenAuth{}})
	now := time.Unix(1_800_000_000, 0)
	c.now = func() time.Time { return now }
	login := func(addr, token string) *httptest.ResponseRecorder {
		form := url.Values{"csrf": {c.keys.csrf("login")}, "token": {token}}
		r := httptest.NewRequest("POST", "http://127.0.0.1/ui/login", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = addr + ":4000"
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		return w
	}
	for i := range loginFailures {
		if w := login("10.0.0.1", "wrong"); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, w.Code)
		}
	}
	w := login("10.0.0.1", "the-token")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "61" {
		t.Fatalf("after %d failures: %d, Retry-After %q", loginFailures, w.Code, w.Header().Get("Retry-After"))
	}
	if w := login("10.0.0.2", "the-token"); w.Code != http.StatusSeeOther {
		t.Errorf("another address: %d", w.Code)
	}
	now = now.Add(loginWindow)
	if w := login("10.0.0.1", "the-token"); w.Code != http.StatusSeeOther {
		t.Errorf("a minute later: %d", w.Code)
	}
}

// TestSessionKeySurvivesRestart: a console with a key file signs cookies
// that the next console with the same file accepts; the file is the
// owner's alone; a broken key file gives a key of this process.
func TestSessionKeySurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "console.key")
	first := New(Options{Auth: tokenAuth{}, KeyFile: path})
	cookie := first.keys.cookieValue("ops", time.Now().Add(time.Hour))
	second := New(Options{Auth: tokenAuth{}, KeyFile: path})
	if id, ok := second.keys.parseCookie(cookie, time.Now()); !ok || id != "ops" {
		t.Fatal("the restarted console refused the session")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	if _, ok := New(Options{Auth: tokenAuth{}}).keys.parseCookie(cookie, time.Now()); ok {
		t.Error("a console without the key file accepted the session")
	}
	os.WriteFile(path, []byte("short"), 0o600)
	if _, ok := New(Options{Auth: tokenAuth{}, KeyFile: path}).keys.parseCookie(cookie, time.Now()); ok {
		t.Error("a broken key file signed like the old key")
	}
}
