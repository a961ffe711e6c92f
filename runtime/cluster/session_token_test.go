package cluster

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func testClaims() SessionClaims {
	return SessionClaims{Identity: "alice", Method: "api_key", Version: "2025-11-25",
		Caps: json.RawMessage(`{"sampling":{}}`), Info: json.RawMessage(`{"name":"c","version":"1"}`), Owner: "r1"}
}

func mustSealer(t testing.TB, fleet string, secrets ...string) *Sealer {
	t.Helper()
	s, err := NewSealer(fleet, secrets)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSessionTokenRoundTrip: what is sealed opens with the same fleet, and
// every claim comes back.
func TestSessionTokenRoundTrip(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, "edge", "secret-one")
	tok, err := s.Seal(testClaims())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tok {
		if c <= 0x20 || c > 0x7e {
			t.Fatalf("token has %q: not a valid Mcp-Session-Id", c)
		}
	}
	got, err := s.Open(tok)
	if err != nil {
		t.Fatal(err)
	}
	want := testClaims()
	if got.Identity != want.Identity || got.Method != want.Method || got.Version != want.Version ||
		string(got.Caps) != string(want.Caps) || string(got.Info) != string(want.Info) || got.Owner != want.Owner {
		t.Fatalf("claims %+v, want %+v", got, want)
	}
	if got.Expires-got.Issued != int64(SessionTTL/time.Second) {
		t.Fatalf("lifetime %d s", got.Expires-got.Issued)
	}
	if tok2, _ := s.Seal(testClaims()); tok2 == tok {
		t.Fatal("two sessions of one client got the same token")
	}
}

// TestSessionTokenRefused: forged, altered, other-fleet, other-secret and
// expired tokens do not open; a rotated secret still opens.
func TestSessionTokenRefused(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, "edge", "secret-one")
	good, _ := s.Seal(testClaims())
	expired, _ := s.SealAt(testClaims(), time.Now().Add(-SessionTTL-time.Minute))
	other, _ := mustSealer(t, "other", "secret-one").Seal(testClaims())
	otherKey, _ := mustSealer(t, "edge", "secret-two").Seal(testClaims())
	flip := []byte(good)
	if flip[40] == 'A' {
		flip[40] = 'B'
	} else {
		flip[40] = 'A'
	}
	for _, tc := range []struct{ name, tok string }{
		{"empty", ""},
		{"random", "Z3JlZXRpbmdzIGZyb20gYSBmb3JnZXI"},
		{"not base64", "%%%%"},
		{"altered", string(flip)},
		{"truncated", good[:len(good)-4]},
		{"other fleet", other},
		{"other secret", otherKey},
		{"expired", expired},
		{"too long", strings.Repeat("A", maxTokenLen+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := s.Open(tc.tok); !errors.Is(err, ErrBadToken) {
				t.Fatalf("opened: %+v, %v", c, err)
			}
		})
	}
	t.Run("rotation", func(t *testing.T) {
		rotated := mustSealer(t, "edge", "secret-two", "secret-one")
		if _, err := rotated.Open(good); err != nil {
			t.Fatalf("old secret no longer opens: %v", err)
		}
		fresh, _ := rotated.Seal(testClaims())
		if _, err := s.Open(fresh); err == nil {
			t.Fatal("the first secret of the list did not seal")
		}
	})
}

// TestSessionTokenBigClaims: oversized capabilities keep their names,
// oversized client info is dropped, and the token stays a header value.
func TestSessionTokenBigClaims(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, "edge", "k")
	c := testClaims()
	c.Caps = json.RawMessage(`{"sampling":{"x":"` + strings.Repeat("a", 4000) + `"},"roots":{}}`)
	c.Info = json.RawMessage(`{"name":"` + strings.Repeat("b", 4000) + `"}`)
	tok, err := s.Seal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Open(tok)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Caps) != `{"roots":{},"sampling":{}}` || got.Info != nil || len(tok) > 1024 {
		t.Fatalf("caps %s info %s len %d", got.Caps, got.Info, len(tok))
	}
}

// FuzzOpenSessionToken: the opener never panics and opens nothing it did
// not seal (the sealed seed is the only input that may open).
func FuzzOpenSessionToken(f *testing.F) {
	s := mustSealer(f, "edge", "secret-one")
	good, _ := s.Seal(testClaims())
	f.Add(good)
	f.Add("")
	f.Add("U" + strings.Repeat("A", 60))
	f.Add(good[:30])
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := s.Open(tok)
		if err == nil && tok != good {
			// Base64 may have two spellings of the same bytes at the end.
			if raw, _ := tokenEncoding.DecodeString(tok); raw == nil || c.Identity != "alice" {
				t.Fatalf("opened a token it did not seal: %q → %+v", tok, c)
			}
		}
		if err != nil && !errors.Is(err, ErrBadToken) {
			t.Fatalf("error %v is not ErrBadToken", err)
		}
	})
}

// TestSessionTokenTTL: a sealer WithTTL stamps its lifetime; its tokens
// open until then and not after; tokens keep the expiry they were sealed
// with.
func TestSessionTokenTTL(t *testing.T) {
	t.Parallel()
	s := mustSealer(t, "edge", "secret-one").WithTTL(10 * time.Minute)
	if s.TTL() != 10*time.Minute {
		t.Fatalf("TTL %v", s.TTL())
	}
	now := time.Now()
	tok, _ := s.SealAt(testClaims(), now)
	c, err := s.Open(tok)
	if err != nil || c.Expires-c.Issued != 600 {
		t.Fatalf("claims %+v, %v: want a 600 s lifetime", c, err)
	}
	old, _ := s.SealAt(testClaims(), now.Add(-11*time.Minute))
	if _, err := s.Open(old); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a token sealed 11 min ago with a 10 min lifetime opened: %v", err)
	}
	// The default sealer still opens the short-lived token, by its own expiry.
	long := s.WithTTL(0)
	if long.TTL() != SessionTTL {
		t.Fatalf("WithTTL(0) = %v, want %v", long.TTL(), SessionTTL)
	}
	if _, err := long.Open(old); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a token past its own expiry opened with a longer-lived sealer: %v", err)
	}
}
