package console

import (
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
