package dial

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/transports"
)

// TestSSEClient: the configured headers reach the server, and an event
// stream silent for longer than sse_read_timeout fails with an error that
// names the setting.
func TestSSEClient(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Echo", r.Header.Get("X-Team"))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for the handler
	sc := config.Server{Name: "s", Type: "sse", URL: srv.URL, Timeout: 5 * time.Second, SSEReadTimeout: 100 * time.Millisecond}
	c := sseClient(sc, http.Header{"X-Team": {"blue"}})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("X-Echo"); got != "blue" {
		t.Errorf("the server saw X-Team %q, want blue", got)
	}
	_, err = io.ReadAll(resp.Body)
	if err == nil || !strings.Contains(err.Error(), "sse_read_timeout") {
		t.Fatalf("read of a silent stream: %v, want the sse_read_timeout error", err)
	}
}

// TestTransport: a stdio server gets its command with the configured
// environment; an unknown type an error naming it.
func TestTransport(t *testing.T) {
	tr, err := Transport(config.Server{Name: "s", Type: "stdio", Command: "true", Env: map[string]string{"EDGE_X": "1"}}, Options{Log: slog.Default()})
	if c, ok := tr.(*transports.CommandTransport); err != nil || !ok || c.Command != "true" || !slices.Contains(c.Env, "EDGE_X=1") {
		t.Errorf("stdio: %#v %v", tr, err)
	}
	if _, err := Transport(config.Server{Name: "s", Type: "carrier-pigeon"}, Options{Log: slog.Default()}); err == nil || !strings.Contains(err.Error(), "carrier-pigeon") {
		t.Errorf("unknown type: %v", err)
	}
}
