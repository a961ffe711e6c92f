package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Issue #27 item 6: GET / says what this is and where to go; other
// unknown paths stay 404.
func TestIndexSaysWhereToGo(t *testing.T) {
	t.Parallel()
	url, _ := startGateway(t, serversJSON(), Options{})
	base := strings.TrimSuffix(url, "/mcp")
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "claude mcp add --transport http edge "+url) || !strings.Contains(string(body), "/status") {
		t.Errorf("GET /: %s\n%s", resp.Status, body)
	}
	if resp, err := http.Get(base + "/nothing-here"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing-here: %v %v, want 404", resp.Status, err)
	}
}
