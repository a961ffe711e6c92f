package statuspage

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/runtime/oauth"
)

type source struct {
	missing  []string
	started  bool
	degraded string
	doc      Document
}

func (s source) Version() string                       { return "1.2.3" }
func (s source) Missing() ([]string, bool)             { return s.missing, s.started }
func (s source) Degraded() string                      { return s.degraded }
func (s source) Document(ctx context.Context) Document { return s.doc }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestReadyz(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    source
		status int
		body   string
	}{
		{"not started", source{}, 503, `{"missing":null,"status":"not ready"}`},
		{"missing", source{started: true, missing: []string{"db"}}, 503, `{"missing":["db"],"status":"not ready"}`},
		{"degraded", source{started: true, degraded: "NATS away"}, 200, `{"reason":"NATS away","status":"degraded"}`},
		{"ready", source{started: true}, 200, `{"status":"ready"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, Readyz(tc.src), "/readyz")
			if status != tc.status || strings.TrimSpace(body) != tc.body {
				t.Fatalf("%d %s, want %d %s", status, body, tc.status, tc.body)
			}
		})
	}
}

// TestStatus: a pending authorization's URL stays out of the document;
// empty parts are left out.
func TestStatus(t *testing.T) {
	auth := &oauth.Status{PendingURL: "https://idp.example/authorize?state=secret"}
	src := source{doc: Document{Servers: []Server{{Name: "up", State: "needs_authorization", Authorization: auth}}}}
	status, body := get(t, Status(src), "/status")
	if status != 200 || strings.Contains(body, "secret") || !strings.Contains(body, `"name":"up"`) {
		t.Fatalf("%d %s: want the server without its pending URL", status, body)
	}
	for _, absent := range []string{"policies", "fleet", "client_memory", "interceptors"} {
		if strings.Contains(body, absent) {
			t.Errorf("%s: %q present though empty", body, absent)
		}
	}
	if auth.PendingURL == "" {
		t.Error("the OAuth status itself lost its pending URL")
	}
}

func TestIndexAndHealthz(t *testing.T) {
	if _, body := get(t, Index(source{}), "/"); !strings.Contains(body, "edge-mcp 1.2.3") || !strings.Contains(body, "http://127.0.0.1:") {
		t.Fatalf("index %s: want the version and the address", body)
	}
	if status, body := get(t, http.HandlerFunc(Healthz), "/healthz"); status != 200 || body != "{\"status\":\"ok\"}\n" {
		t.Fatalf("healthz %d %q", status, body)
	}
}
