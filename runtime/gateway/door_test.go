package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestEverySurfaceBehindTheDoor checks that every HTTP surface of the main
// listener refuses a foreign Origin and, on a loopback listener, a foreign
// Host (DNS rebinding), as /mcp does, and that JSON endpoints refuse a body
// that is not JSON before reading it.
func TestEverySurfaceBehindTheDoor(t *testing.T) {
	t.Parallel()
	up := vaultServer(t, "vault", make(chan string, 1))
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q}}}`, up), Options{})
	base := strings.TrimSuffix(url, "/mcp")
	do := func(method, path string, hdr map[string]string, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	surfaces := []struct{ method, path string }{
		{"POST", "/mcp"}, {"GET", "/sse"}, {"GET", "/ws"}, {"GET", "/v1/tools"}, {"POST", "/v1/tools/call"},
		{"GET", "/"}, {"GET", "/status"}, {"GET", "/metrics"}, {"GET", "/healthz"}, {"GET", "/readyz"},
		{"GET", "/.well-known/oauth-protected-resource"},
	}
	for _, s := range surfaces {
		t.Run(s.method+" "+s.path, func(t *testing.T) {
			if got := do(s.method, s.path, map[string]string{"Origin": "https://evil.example"}, `{}`); got != http.StatusForbidden {
				t.Errorf("foreign Origin: status %d, want 403", got)
			}
			if got := do(s.method, s.path, map[string]string{"Host": "evil.example"}, `{}`); got != http.StatusForbidden {
				t.Errorf("foreign Host on a loopback listener: status %d, want 403", got)
			}
		})
	}
	t.Run("allowed requests pass", func(t *testing.T) {
		for _, p := range []string{"/status", "/metrics", "/v1/tools", "/healthz"} {
			if got := do("GET", p, map[string]string{"Origin": base}, ""); got != http.StatusOK {
				t.Errorf("GET %s from the gateway's own origin: status %d, want 200", p, got)
			}
		}
	})
	t.Run("JSON endpoints need a JSON body", func(t *testing.T) {
		call := `{"name": "echo", "arguments": {"text": "hi"}}`
		if got := do("POST", "/v1/tools/call", map[string]string{"Content-Type": "text/plain"}, call); got != http.StatusUnsupportedMediaType {
			t.Errorf("text/plain call: status %d, want 415", got)
		}
		if got := do("POST", "/v1/tools/call", map[string]string{"Content-Type": "application/json; charset=utf-8"}, call); got != http.StatusOK {
			t.Errorf("JSON call: status %d, want 200", got)
		}
	})
}
