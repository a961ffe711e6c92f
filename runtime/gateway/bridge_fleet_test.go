package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFleetBridgeAcrossReplicas: a 2026-07-28 client's multi-round calls
// through a strict round-robin proxy over three replicas in front of a 2025
// upstream that asks the client during the call (sampling, then
// elicitation): each retry reaches another replica than the one whose
// upstream call waits, which opens its requestState (the fleet's key) and
// hands it there. Before, the retry failed: "requestState was not issued
// by this gateway".
func TestFleetBridgeAcrossReplicas(t *testing.T) {
	t.Parallel()
	// A short input_timeout: a round whose retry goes astray ends soon.
	f := startFleet(t, 3, fmt.Sprintf(`{"mcpServers": {"up": {"url": %q, "protocol_version": "2025-11-25"}}, "limits": {"input_timeout": 2}}`,
		askingUpstream(t, make(chan bool, 16))))
	cl := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: sampled("sampled"),
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"ask", map[string]any{"q": "why"}, "model said: sampled"},
		{"twice", map[string]any{}, "sampled / accept"},
		{"confirm", map[string]any{}, "accept true"},
		{"twice", map[string]any{}, "sampled / accept"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			// The round's upstream request stays parked until
			// input_timeout: let it expire, so that the upstream's
			// handler ends before the servers close.
			time.Sleep(3 * time.Second)
			t.Fatalf("call %d (%s): %v", i, c.tool, err)
		}
		if got := textOf(res); res.IsError || got != c.want {
			t.Fatalf("call %d (%s): %q (isError %v), want %q", i, c.tool, got, res.IsError, c.want)
		}
	}
}
