package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
)

// TestFleetModernCallWithoutLogLevel: a sessionless 2026-07-28 tools/call
// that names no log level, through a fleet to an upstream offering
// logging, is answered (its "no level" must not be passed upstream as a
// level: it once indexed past the level names and panicked).
func TestFleetModernCallWithoutLogLevel(t *testing.T) {
	t.Parallel()
	srv := newBenchServer()
	up := serveHandler(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	front, _ := startOpsFleet(t, 2, natstest.Start(t).ClientURL(), fmt.Sprintf(`"up": {"url": %q}`, up), "")
	for i := range 4 { // every replica, twice
		resp, err := fleetEchoCall(http.DefaultClient, front, fmt.Sprint("call-", i))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), fmt.Sprint("call-", i)) {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
	}
}
