package gateway

import (
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestDoorStatusHidesPendingLogin: with client authentication on, /status
// needs it as /mcp does, and even then never carries a pending upstream
// login's URL or its OAuth state (whoever opens the URL completes the
// login with their own account: login CSRF); /healthz and /readyz stay
// open and say nothing of it. The admin side (OAuthStatus, which the admin
// API and `edge-mcp auth status` show) keeps the URL.
func TestDoorStatusHidesPendingLogin(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	og := startOAuthGatewayWith(t, fmt.Sprintf(`{"url": %q, "oauth": {}}`, as.MCPURL), t.TempDir(),
		`"auth": {"mode": "api_key", "api_keys": [{"name": "ops", "key": "status-key-0123456789"}]},`)
	pending := og.pendingURL(t)
	u, err := neturl.Parse(pending)
	if err != nil {
		t.Fatal(err)
	}
	state := u.Query().Get("state")
	if state == "" {
		t.Fatalf("pending URL without a state: %s", pending)
	}
	get := func(path, key string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, og.base+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path, key string
		want            int
	}{
		{"status without a key", "/status", "", http.StatusUnauthorized},
		{"status with a wrong key", "/status", "wrong", http.StatusUnauthorized},
		{"status with the key", "/status", "status-key-0123456789", http.StatusOK},
		{"healthz without a key", "/healthz", "", http.StatusOK},
		{"readyz without a key", "/readyz", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.path, tc.key)
			if code != tc.want {
				t.Errorf("HTTP %d, want %d: %s", code, tc.want, body)
			}
			if strings.Contains(body, state) || strings.Contains(body, "pending_url") {
				t.Errorf("%s shows the pending login: %s", tc.path, body)
			}
			if tc.want == http.StatusOK && tc.path == "/status" && !strings.Contains(body, `"needs_authorization"`) {
				t.Errorf("/status does not say the server needs authorization: %s", body)
			}
		})
	}
}
