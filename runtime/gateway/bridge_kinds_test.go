package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
	// A question nobody answers (the gateway stopped first) ends soon, so
	// that the server's shutdown does not wait for it.
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Whom?", RequestedSchema: roundNameSchema()})
		if err != nil {
			return nil, fmt.Errorf("elicitation: %w", err)
		}
		name, _ := res.Content["name"].(string)
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Greet " + name}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://sampled", Name: "sampled"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
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
	t.Parallel()
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
	t.Parallel()
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

// modernRaw sends one raw 2026-07-28 request (declaring elicitation and
// sampling) to the gateway and returns its result, or its error message.
func modernRaw(t *testing.T, url, method, name, params string) (map[string]json.RawMessage, string) {
	t.Helper()
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `,"_meta":` + meta + `}}`
	_, got := modernHTTP(t, "POST", url, map[string]string{"Mcp-Method": method, "Mcp-Name": name}, body)
	if i := strings.Index(string(got), "data: "); i >= 0 { // an SSE answer
		got = []byte(strings.TrimSpace(strings.SplitN(string(got[i+6:]), "\n", 2)[0]))
	}
	var resp struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(got, &resp); err != nil {
		t.Fatalf("answer %s: %v", got, err)
	}
	if resp.Error != nil {
		return nil, resp.Error.Message
	}
	return resp.Result, ""
}

// TestBridgeStateBound: the requestState of a prompts/get round continues
// that prompts/get only: a resources/read that carries it is refused.
func TestBridgeStateBound(t *testing.T) {
	t.Parallel()
	url := startBridgeGateway(t, legacyPromptResourceUpstream(t), 0)
	res, msg := modernRaw(t, url, "prompts/get", "greet", `"name":"greet"`)
	if msg != "" || string(res["resultType"]) != `"input_required"` {
		t.Fatalf("prompts/get: result %v error %q, want input_required", res, msg)
	}
	var reqs map[string]json.RawMessage
	if err := json.Unmarshal(res["inputRequests"], &reqs); err != nil || len(reqs) != 1 {
		t.Fatalf("inputRequests %s: %v", res["inputRequests"], err)
	}
	var answers []string
	for key := range reqs {
		answers = append(answers, fmt.Sprintf(`%q:{"action":"accept","content":{"name":"Ada"}}`, key))
	}
	retry := `,"inputResponses":{` + strings.Join(answers, ",") + `},"requestState":` + string(res["requestState"])
	if res, msg := modernRaw(t, url, "resources/read", "test://sampled", `"uri":"test://sampled"`+retry); !strings.Contains(msg, "another call") {
		t.Fatalf("resources/read with the prompt's requestState: result %v error %q, want refused", res, msg)
	}
	res, msg = modernRaw(t, url, "prompts/get", "greet", `"name":"greet"`+retry)
	if msg != "" || !strings.Contains(string(res["messages"]), "Greet Ada") {
		t.Fatalf("prompts/get retry: result %v error %q, want the prompt", res, msg)
	}
}
