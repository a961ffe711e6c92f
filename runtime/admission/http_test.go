package admission

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBearerToken: the token of an Authorization header, any case of
// "Bearer", and nothing for other schemes.
func TestBearerToken(t *testing.T) {
	for _, tc := range []struct{ header, want string }{
		{"Bearer abc", "abc"},
		{"bearer  abc ", "abc"},
		{"Basic abc", ""},
		{"Bearer", ""},
		{"", ""},
	} {
		t.Run(tc.header, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Authorization", tc.header)
			if got := BearerToken(r); got != tc.want {
				t.Fatalf("BearerToken(%q) = %q, want %q", tc.header, got, tc.want)
			}
		})
	}
	if AuthReason(`Bearer error="invalid_token"`) != "invalid_token" || AuthReason("Bearer") != "missing_credentials" {
		t.Fatal("AuthReason")
	}
	if id := IdentityOf(httptest.NewRequest(http.MethodGet, "/", nil)); id.Name != Anonymous.Name || id.Method != Anonymous.Method {
		t.Fatalf("IdentityOf an unauthenticated request = %v", id)
	}
}

// TestToolCall: only a tools/call within the limit is looked at, and the
// body is put back as read: whole, or over the limit by one byte for the
// transport to refuse (413).
func TestToolCall(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`
	for _, tc := range []struct {
		name, body string
		limit      int64
		want       string
		ok         bool
	}{
		{"tools/call", call, 1 << 10, "echo", true},
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 1 << 10, "", false},
		{"over the limit", call, 10, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tc.body))
			_, name, ok := ToolCall(r, tc.limit)
			if name != tc.want || ok != tc.ok {
				t.Fatalf("ToolCall = %q, %v; want %q, %v", name, ok, tc.want, tc.ok)
			}
			want := tc.body[:min(int64(len(tc.body)), tc.limit+1)]
			if rest, _ := io.ReadAll(r.Body); string(rest) != want {
				t.Fatalf("body put back as %q", rest)
			}
		})
	}
}

// TestWriteRateLimited: HTTP 429 with Retry-After, the request's id, the
// code given and the scope and wait in the error's data.
func TestWriteRateLimited(t *testing.T) {
	w := httptest.NewRecorder()
	WriteRateLimited(w, []byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call"}`), &RateLimited{Scope: "client", RetryAfter: 1500 * time.Millisecond}, -32029)
	var resp struct {
		ID    string `json:"id"`
		Error struct {
			Code int64 `json:"code"`
			Data struct {
				RetryAfter int    `json:"retryAfter"`
				Scope      string `json:"scope"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" || resp.ID != "a" ||
		resp.Error.Code != -32029 || resp.Error.Data.RetryAfter != 2 || resp.Error.Data.Scope != "client" {
		t.Fatalf("429 answer: %d %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
}
