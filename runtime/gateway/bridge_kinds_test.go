package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// legacyPromptResourceUpstream is a 2025 go-sdk server whose prompt asks
// the client (elicitation) and whose resource asks it (sampling) while
// they are being got and read.
func legacyPromptResourceUpstream(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "asker2025", Version: "1"}, nil)
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Whom?", RequestedSchema: roundNameSchema()})
		if err != nil {
			return nil, fmt.Errorf("elicitation: %w", err)
		}
		name, _ := res.Content["name"].(string)
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Greet " + name}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://sampled", Name: "sampled"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "summarize"}}}})
		if err != nil {
			return nil, fmt.Errorf("sampling: %w", err)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "sampled: " + textContent(res.Content)}}}, nil
	})
	return serveMCP(t, s)
}

// TestBridgePromptAndResource: a 2025 server's elicitation during
// prompts/get and sampling during resources/read reach a 2026-07-28
// client as input_required results, and its retries get the final
// results.
func TestBridgePromptAndResource(t *testing.T) {
	url := startBridgeGateway(t, legacyPromptResourceUpstream(t), 0)
	c := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &roundAnswers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connecting with protocol 2026-07-28: %v", err)
	}
	defer cs.Close()
	t.Run("prompts/get", func(t *testing.T) {
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) != 1 || textContent(res.Messages[0].Content) != "Greet Ada" {
			t.Fatalf("prompt %+v, want one message %q", res, "Greet Ada")
		}
	})
	t.Run("resources/read", func(t *testing.T) {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://sampled"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Contents) != 1 || res.Contents[0].Text != "sampled: Paris (summarize)" {
			t.Fatalf("contents %+v", res.Contents)
		}
	})
}

// TestBridgeLegacySecondRound: a go-sdk server on a 2025 link asks the
// client directly in a call's first round (bridged to input_required with
// the gateway's keys) but returns its second round's inputRequests as a
// plain result; the gateway marks that input_required for a 2026-07-28
// client, whose retry carries the server's own keys and requestState. The
// client drives the rounds itself, as the conformance suite does, and
// goes by resultType.
func TestBridgeLegacySecondRound(t *testing.T) {
	seen := &roundAttempts{}
	url := startBridgeGateway(t, serveMCP(t, roundsServer(seen)), 0)
	c := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: roundAnswers.ElicitationHandler, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connecting with protocol 2026-07-28: %v", err)
	}
	defer cs.Close()
	p := &mcp.CallToolParams{Name: "two", Arguments: map[string]any{}}
	for round := 1; round <= 2; round++ {
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() || len(res.InputRequests) != 1 {
			t.Fatalf("round %d: %+v, want input_required with one input request", round, res)
		}
		p = &mcp.CallToolParams{Name: "two", Arguments: map[string]any{}, RequestState: res.RequestState, InputResponses: mcp.InputResponseMap{}}
		for key := range res.InputRequests {
			p.InputResponses[key] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": fmt.Sprintf("n%d", round)}}
		}
		if round == 2 && (p.RequestState != "round-2" || p.InputResponses["first_name"] == nil) {
			t.Fatalf("round 2 asks %v with requestState %q, want the server's key first_name and state round-2", res.InputRequests, p.RequestState)
		}
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(res); got != "two rounds: n2" || res.NeedsInput() {
		t.Fatalf("result %q (needs input %v), want %q", got, res.NeedsInput(), "two rounds: n2")
	}
}
