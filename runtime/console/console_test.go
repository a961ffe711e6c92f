package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
)

// TestTemplatesParsedOnFirstUse: a console that is built but never opened
// holds no parsed template (idle memory unchanged); the first page parses
// them.
func TestTemplatesParsedOnFirstUse(t *testing.T) {
	if parses.Load() != 0 {
		t.Skip("a page of this process parsed the templates already (-count > 1)")
	}
	c := New(Options{Auth: openAuth{}})
	if n := parses.Load(); n != 0 {
		t.Fatalf("templates parsed %d time(s) by New", n)
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/ui/fleet", nil))
	if rec.Code != 200 || parses.Load() != 1 {
		t.Fatalf("first page: %d, %d parsing(s)", rec.Code, parses.Load())
	}
	c.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "http://127.0.0.1/ui/login", nil))
	if parses.Load() != 1 {
		t.Errorf("templates parsed again")
	}
}

// openAuth is an admin API without tokens.
type openAuth struct{}

func (openAuth) TokenIdentity(string) (string, bool) { return "", false }
func (openAuth) Identities() []string                { return nil }

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, host, origin string
		ok                 bool
	}{
		{"no Origin (not a browser)", "127.0.0.1:9000", "", true},
		{"its own", "127.0.0.1:9000", "http://127.0.0.1:9000", true},
		{"its own over TLS", "admin.example:443", "https://admin.example:443", true},
		{"another port", "127.0.0.1:9000", "http://127.0.0.1:9001", false},
		{"another host", "127.0.0.1:9000", "http://localhost:9000", false},
		{"null", "127.0.0.1:9000", "null", false},
		{"another scheme", "127.0.0.1:9000", "ftp://127.0.0.1:9000", false},
		{"with a path", "127.0.0.1:9000", "http://127.0.0.1:9000/x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "http://"+tc.host+"/ui/policies", nil)
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if got := sameOrigin(r); got != tc.ok {
				t.Errorf("sameOrigin(Host %s, Origin %s) = %v", tc.host, tc.origin, got)
			}
		})
	}
}

func TestMoveDestination(t *testing.T) {
	for _, tc := range []struct {
		name, how, position string
		i, n, want          int
		bad                 bool
	}{
		{name: "up", how: "up", i: 2, n: 3, want: 1},
		{name: "up from the top stays", how: "up", i: 0, n: 3, want: 0},
		{name: "down", how: "down", i: 0, n: 3, want: 1},
		{name: "down from the bottom stays", how: "down", i: 2, n: 3, want: 2},
		{name: "to the top", how: "move", position: "1", i: 2, n: 3, want: 0},
		{name: "to the bottom", how: "move", position: "3", i: 0, n: 3, want: 2},
		{name: "past the end", how: "move", position: "4", i: 0, n: 3, bad: true},
		{name: "zero", how: "move", position: "0", i: 0, n: 3, bad: true},
		{name: "not a number", how: "move", position: "top", i: 0, n: 3, bad: true},
		{name: "empty", how: "move", position: "", i: 0, n: 3, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := destination(tc.i, tc.n, tc.how, tc.position)
			if (err != nil) != tc.bad || !tc.bad && got != tc.want {
				t.Errorf("destination(%d, %d, %q, %q) = %d, %v", tc.i, tc.n, tc.how, tc.position, got, err)
			}
		})
	}
}

func TestNewTool(t *testing.T) {
	for _, tc := range []struct{ name, def, want string }{
		{"described", `{"name":"echo","description":"Echoes it back."}`, "Echoes it back."},
		{"no description", `{"name":"echo"}`, ""},
		{"not an object", `[1]`, ""},
		{"not JSON", `{`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewTool("docs", "echo", json.RawMessage(tc.def))
			if got.Server != "docs" || got.Name != "echo" || got.Description != tc.want || string(got.Def) != tc.def {
				t.Errorf("NewTool = %+v, want description %q and the definition as it is", got, tc.want)
			}
		})
	}
}

func TestKeyFileIn(t *testing.T) {
	if got := KeyFileIn(""); got != "" {
		t.Errorf(`KeyFileIn("") = %q, want "" (a key for this process only)`, got)
	}
	if got, want := KeyFileIn("/state/gw-1"), filepath.Join("/state/gw-1", "console.key"); got != want {
		t.Errorf("KeyFileIn = %q, want %q", got, want)
	}
}
