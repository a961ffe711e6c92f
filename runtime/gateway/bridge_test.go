package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// askingUpstream is a 2025 go-sdk server whose tools ask the client during
// the call: "ask" for sampling, "confirm" for elicitation. Each handler's
// end (whether its ctx was cancelled) is sent on ended.
func askingUpstream(t *testing.T, ended chan<- bool) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	report := func(ctx context.Context) {
		select {
		case <-ctx.Done():
			ended <- true
		case <-time.After(5 * time.Second):
			ended <- false
		}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Q string `json:"q"`
	}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Q}}}})
		if err != nil {
			go report(ctx)
			return nil, nil, fmt.Errorf("sampling: %w", err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "model said: " + textContent(res.Content)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "confirm"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "sure?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}})
		if err != nil {
			return nil, nil, fmt.Errorf("elicitation: %w", err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %v", res.Action, res.Content["ok"])}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "twice"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		sampled, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "first"}}}})
		if err != nil {
			return nil, nil, fmt.Errorf("sampling: %w", err)
		}
		elicited, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "then?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}})
		if err != nil {
			return nil, nil, fmt.Errorf("elicitation: %w", err)
		}
		text := textContent(sampled.Content) + " / " + elicited.Action
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "both"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		sampled := make(chan string, 1)
		go func() {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "q"}}}})
			if err != nil {
				sampled <- err.Error()
				return
			}
			sampled <- textContent(res.Content)
		}()
		roots, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("roots: %w", err)
		}
		text := fmt.Sprintf("%s / %d roots", <-sampled, len(roots.Roots))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
	return serveMCP(t, s)
}

func textContent(c mcp.Content) string {
	if tc, ok := c.(*mcp.TextContent); ok {
		return tc.Text
	}
	return fmt.Sprintf("%T", c)
}

// startBridgeGateway starts a gateway in front of upstream pinned to
// 2025-11-25, with limits.input_timeout inputTimeout (0: the default).
func startBridgeGateway(t *testing.T, upstream string, inputTimeout time.Duration) string {
	t.Helper()
	cfg, err := config.Parse("test.json", []byte(serversJSON(fmt.Sprintf(`"up": {"url": %q, "protocol_version": "2025-11-25"}`, upstream))))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Limits.InputTimeout = inputTimeout
	url, _ := startGatewayConfig(t, cfg, Options{})
	return url
}

// sampled answers every sampling request with text.
func sampled(text string) func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: text}}, nil
	}
}

// callThrough calls tool with args through a gateway in front of
// askingUpstream, from a go-sdk client pinned to 2026-07-28 with opts and
// roots, and checks the result's text is want.
func callThrough(t *testing.T, opts *mcp.ClientOptions, roots []*mcp.Root, tool string, args map[string]any, want string) {
	t.Helper()
	url := startBridgeGateway(t, askingUpstream(t, make(chan bool, 4)), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, opts)
	c.AddRoots(roots...)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connecting with protocol 2026-07-28: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(res); got != want || res.IsError {
		t.Fatalf("result %q (isError %v), want %q", got, res.IsError, want)
	}
}

// TestBridgeSampling: a 2025 upstream's sampling request during a
// 2026-07-28 client's tools/call reaches the client as input_required and
// the call ends with the result built from the client's answer.
func TestBridgeSampling(t *testing.T) {
	t.Parallel()
	asked := 0
	callThrough(t, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			asked++
			return sampled("42 for "+textContent(req.Params.Messages[0].Content))(nil, req)
		},
	}, nil, "ask", map[string]any{"q": "why"}, "model said: 42 for why")
	if asked != 1 {
		t.Errorf("client asked %d times, want 1", asked)
	}
}

// TestBridgeElicitation is TestBridgeSampling for elicitation.
func TestBridgeElicitation(t *testing.T) {
	t.Parallel()
	callThrough(t, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	}, nil, "confirm", map[string]any{}, "accept true")
}

// TestBridgeTwoRounds: a call that asks twice (sampling, then
// elicitation) takes two input_required rounds, the second answered to
// the first retry.
func TestBridgeTwoRounds(t *testing.T) {
	t.Parallel()
	callThrough(t, &mcp.ClientOptions{
		CreateMessageHandler: sampled("sampled"),
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	}, nil, "twice", map[string]any{}, "sampled / decline")
}

// TestBridgeAtOnce: two requests the upstream sends at once (sampling and
// roots) go out in one input_required round.
func TestBridgeAtOnce(t *testing.T) {
	t.Parallel()
	callThrough(t, &mcp.ClientOptions{CreateMessageHandler: sampled("sampled")},
		[]*mcp.Root{{URI: "file:///a"}, {URI: "file:///b"}}, "both", map[string]any{}, "sampled / 2 roots")
}

// bridgeCall sends a raw 2026-07-28 tools/call of "ask" with extra params
// and returns the decoded answer.
func bridgeCall(t *testing.T, url, extra string) (result map[string]json.RawMessage, rpcErr *struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}) {
	t.Helper()
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"q":"x"}` + extra + `,"_meta":` + meta + `}}`
	_, got := modernHTTP(t, "POST", url, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "ask"}, body)
	if i := strings.Index(string(got), "data: "); i >= 0 { // an SSE answer
		got = []byte(strings.TrimSpace(strings.SplitN(string(got[i+6:]), "\n", 2)[0]))
	}
	var resp struct {
		Result map[string]json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(got, &resp); err != nil {
		t.Fatalf("answer %s: %v", got, err)
	}
	return resp.Result, resp.Error
}

// TestBridgeRequestState: a tampered requestState is refused; a round
// nobody answers is cancelled upstream after limits.input_timeout.
func TestBridgeRequestState(t *testing.T) {
	t.Parallel()
	ended := make(chan bool, 4)
	url := startBridgeGateway(t, askingUpstream(t, ended), 300*time.Millisecond)
	res, rpcErr := bridgeCall(t, url, "")
	if rpcErr != nil || string(res["resultType"]) != `"input_required"` {
		t.Fatalf("first round: result %v error %+v, want input_required", res, rpcErr)
	}
	var state string
	if err := json.Unmarshal(res["requestState"], &state); err != nil || state == "" {
		t.Fatalf("requestState %s: %v", res["requestState"], err)
	}
	var reqs map[string]struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(res["inputRequests"], &reqs); err != nil || len(reqs) != 1 {
		t.Fatalf("inputRequests %s: %v", res["inputRequests"], err)
	}
	var key string
	for k, r := range reqs {
		key = k
		if r.Method != "sampling/createMessage" {
			t.Errorf("input request method %q", r.Method)
		}
	}
	answer := fmt.Sprintf(`,"inputResponses":{%q:{"role":"assistant","model":"m","content":{"type":"text","text":"hi"}}}`, key)
	tampered := []byte(state)
	tampered[len(tampered)-3] ^= 1
	if res, rpcErr := bridgeCall(t, url, answer+fmt.Sprintf(`,"requestState":%q`, tampered)); rpcErr == nil || !strings.Contains(rpcErr.Message, "requestState") {
		t.Fatalf("tampered requestState: result %v error %+v, want a requestState error", res, rpcErr)
	}
	select {
	case cancelled := <-ended:
		if !cancelled {
			t.Fatal("the upstream's call was not cancelled after the input timeout")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's sampling request was never answered")
	}
	if res, rpcErr := bridgeCall(t, url, answer+fmt.Sprintf(`,"requestState":%q`, state)); rpcErr == nil {
		t.Fatalf("expired requestState: result %v, want an error", res)
	}
}
