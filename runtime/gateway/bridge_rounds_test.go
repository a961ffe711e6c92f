package gateway

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// These tests put the gateway between 2025 clients and a 2026-07-28
// server that asks for client input by input_required results
// (bridge_rounds.go). The 2025 clients are go-sdk clients pinned to
// 2025-11-25 with the SDK's own multi-round-trip handling turned off: a
// 2025 client knows nothing of input_required, it is asked by sampling,
// elicitation and roots requests over its session.

// roundAttempt is one call a 2026-07-28 upstream got: the input response keys
// and the requestState it carried.
type roundAttempt struct {
	what  string
	keys  []string
	state string
}

// roundAttempts records what the upstream got, in order.
type roundAttempts struct {
	mu  sync.Mutex
	all []roundAttempt
}

func (a *roundAttempts) add(what string, responses mcp.InputResponseMap, state string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all = append(a.all, roundAttempt{what, slices.Sorted(maps.Keys(responses)), state})
}

func (a *roundAttempts) of(what string) []roundAttempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []roundAttempt
	for _, at := range a.all {
		if at.what == what {
			out = append(out, at)
		}
	}
	return out
}

func roundNameSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}}, Required: []string{"name"}}
}

// roundAcceptedName is the name an accepted elicitation under key carries.
func roundAcceptedName(responses mcp.InputResponseMap, key string) (string, bool) {
	r, ok := responses[key].(*mcp.ElicitResult)
	if !ok || r == nil || r.Action != "accept" {
		return "", false
	}
	name, _ := r.Content["name"].(string)
	return name, true
}

// roundSampledText is the text of a sampling answer under key.
func roundSampledText(responses mcp.InputResponseMap, key string) (string, bool) {
	r, ok := responses[key].(*mcp.CreateMessageWithToolsResult)
	if !ok || r == nil || len(r.Content) == 0 {
		return "", false
	}
	return textContent(r.Content[0]), true
}

// roundsUpstream serves roundsServer stateless (2026-07-28).
func roundsUpstream(t *testing.T, seen *roundAttempts) string {
	t.Helper()
	s := roundsServer(seen)
	return serveHandler(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
}

// roundsServer is a go-sdk server whose tools, prompt and resource ask for
// client input with input_required results, under keys of the server's
// choosing.
func roundsServer(seen *roundAttempts) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "asker2026", Version: "1"}, nil)
	type who struct {
		Who string `json:"who"`
	}
	text := func(format string, args ...any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, in who) (*mcp.CallToolResult, any, error) {
		seen.add("sample", req.Params.InputResponses, req.Params.RequestState)
		if answer, ok := roundSampledText(req.Params.InputResponses, "capital_question"); ok {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 1})
			}
			return text("Sampling response: %s", answer), nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"capital_question": &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "capital for " + in.Who}}}}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		seen.add("elicit", req.Params.InputResponses, req.Params.RequestState)
		if name, ok := roundAcceptedName(req.Params.InputResponses, "user_name"); ok {
			return text("Hello, %s!", name), nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"user_name": &mcp.ElicitParams{Message: "What is your name?", RequestedSchema: roundNameSchema()}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		seen.add("roots", req.Params.InputResponses, req.Params.RequestState)
		if r, ok := req.Params.InputResponses["client_roots"].(*mcp.ListRootsResult); ok && r != nil {
			var uris []string
			for _, root := range r.Roots {
				uris = append(uris, root.URI)
			}
			return text("%d root(s): %s", len(uris), strings.Join(uris, ", ")), nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}, RequestState: "roots-state"}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "two"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		p := req.Params
		seen.add("two", p.InputResponses, p.RequestState)
		name, named := roundAcceptedName(p.InputResponses, "first_name")
		switch {
		case p.RequestState == "round-2" && named:
			return text("two rounds: %s", name), nil, nil
		case p.RequestState == "round-1" && named:
			return &mcp.CallToolResult{RequestState: "round-2", InputRequests: mcp.InputRequestMap{
				"first_name": &mcp.ElicitParams{Message: "Again, " + name + "?", RequestedSchema: roundNameSchema()}}}, nil, nil
		}
		return &mcp.CallToolResult{RequestState: "round-1", InputRequests: mcp.InputRequestMap{
			"first_name": &mcp.ElicitParams{Message: "Name?", RequestedSchema: roundNameSchema()}}}, nil, nil
	})
	var forever atomic.Int64
	mcp.AddTool(s, &mcp.Tool{Name: "forever"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		seen.add("forever", req.Params.InputResponses, req.Params.RequestState)
		return &mcp.CallToolResult{RequestState: fmt.Sprint(forever.Add(1)), InputRequests: mcp.InputRequestMap{
			"again": &mcp.ElicitParams{Message: "once more?", RequestedSchema: roundNameSchema()}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		seen.add("greet", req.Params.InputResponses, req.Params.RequestState)
		if name, ok := roundAcceptedName(req.Params.InputResponses, "user_name"); ok {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Greet " + name}}}}, nil
		}
		return &mcp.GetPromptResult{RequestState: "prompt-state", InputRequests: mcp.InputRequestMap{
			"user_name": &mcp.ElicitParams{Message: "Whom?", RequestedSchema: roundNameSchema()}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://sampled", Name: "sampled"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		seen.add("sampled", req.Params.InputResponses, req.Params.RequestState)
		if answer, ok := roundSampledText(req.Params.InputResponses, "summary"); ok {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "sampled: " + answer}}}, nil
		}
		return &mcp.ReadResourceResult{InputRequests: mcp.InputRequestMap{"summary": &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "summarize"}}}}}}, nil
	})
	return s
}

// startRoundsGateway starts a gateway in front of a 2026-07-28 upstream,
// with limits.input_rounds rounds (0: the default), and checks that its
// link speaks 2026-07-28.
func startRoundsGateway(t *testing.T, upstream string, rounds int, inputTimeout time.Duration) (string, *Gateway) {
	t.Helper()
	cfg, err := config.Parse("test.json", []byte(serversJSON(fmt.Sprintf(`"up": {"url": %q}`, upstream))))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Limits.InputRounds, cfg.Limits.InputTimeout = rounds, inputTimeout
	url, g := startGatewayConfig(t, cfg, Options{})
	if st := g.Status()[0]; st.ProtocolVersion != protocol2026 {
		t.Fatalf("the gateway's link speaks %q, want %s", st.ProtocolVersion, protocol2026)
	}
	return url, g
}

// connectRounds2025 connects a go-sdk client pinned to 2025-11-25 with opts (its
// own multi-round-trip handling off) and roots.
func connectRounds2025(t *testing.T, url string, opts mcp.ClientOptions, roots ...*mcp.Root) *mcp.ClientSession {
	t.Helper()
	opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, &opts)
	c.AddRoots(roots...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting with protocol 2025-11-25: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// roundAnswers are client handlers that answer as the tests expect.
var roundAnswers = mcp.ClientOptions{
	CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "Paris (" + textContent(req.Params.Messages[0].Content) + ")"}}, nil
	},
	ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	},
}

// TestBridgeRoundsAsk: a 2026-07-28 server's sampling, elicitation and
// roots input requests during a 2025 client's tools/call reach the client
// as real requests; the server gets the roundAnswers under its own keys, with
// its requestState unchanged, and the client the final result.
func TestBridgeRoundsAsk(t *testing.T) {
	t.Parallel()
	seen := &roundAttempts{}
	url, _ := startRoundsGateway(t, roundsUpstream(t, seen), 0, 0)
	cs := connectRounds2025(t, url, roundAnswers, &mcp.Root{URI: "file:///a"}, &mcp.Root{URI: "file:///b"})
	for _, tc := range []struct {
		tool      string
		args      map[string]any
		want, key string
		state     string
	}{
		{"sample", map[string]any{"who": "France"}, "Sampling response: Paris (capital for France)", "capital_question", ""},
		{"elicit", map[string]any{}, "Hello, Ada!", "user_name", ""},
		{"roots", map[string]any{}, "2 root(s): file:///a, file:///b", "client_roots", "roots-state"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			if got := textOf(res); got != tc.want || res.IsError {
				t.Fatalf("result %q (isError %v), want %q", got, res.IsError, tc.want)
			}
			got := seen.of(tc.tool)
			if len(got) != 2 || len(got[0].keys) != 0 || !slices.Equal(got[1].keys, []string{tc.key}) || got[1].state != tc.state {
				t.Fatalf("upstream roundAttempts %+v, want a first one without inputResponses and a retry with key %q and requestState %q", got, tc.key, tc.state)
			}
		})
	}
}

// TestBridgeRoundsTwo: a server that asks twice, with an evolving
// requestState, gets each round's roundAnswers (only that round's) and the
// state it gave in that round.
func TestBridgeRoundsTwo(t *testing.T) {
	t.Parallel()
	seen := &roundAttempts{}
	url, _ := startRoundsGateway(t, roundsUpstream(t, seen), 0, 0)
	asked := 0
	opts := roundAnswers
	opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": fmt.Sprintf("n%d", asked)}}, nil
	}
	cs := connectRounds2025(t, url, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "two", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(res); got != "two rounds: n2" || asked != 2 {
		t.Fatalf("result %q after %d questions, want %q after 2", got, asked, "two rounds: n2")
	}
	var states []string
	for _, at := range seen.of("two") {
		states = append(states, at.state)
	}
	if !slices.Equal(states, []string{"", "round-1", "round-2"}) {
		t.Fatalf("requestStates the server got: %q", states)
	}
}

// TestBridgeRoundsLimit: a server that never stops asking is stopped after
// limits.input_rounds rounds with an error naming the limit.
func TestBridgeRoundsLimit(t *testing.T) {
	t.Parallel()
	seen := &roundAttempts{}
	url, _ := startRoundsGateway(t, roundsUpstream(t, seen), 3, 0)
	cs := connectRounds2025(t, url, roundAnswers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "forever", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "limits.input_rounds") {
		t.Fatalf("result %+v, error %v; want an error naming limits.input_rounds", res, err)
	}
	if n := len(seen.of("forever")); n != 4 {
		t.Fatalf("the server got %d roundAttempts, want 4 (the first and 3 retries)", n)
	}
}

// TestBridgeRoundsNoCapability: a client that did not declare sampling is
// not asked; its call gets an error naming the capability.
func TestBridgeRoundsNoCapability(t *testing.T) {
	t.Parallel()
	seen := &roundAttempts{}
	url, _ := startRoundsGateway(t, roundsUpstream(t, seen), 0, 0)
	cs := connectRounds2025(t, url, mcp.ClientOptions{ElicitationHandler: roundAnswers.ElicitationHandler})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"who": "x"}})
	if err == nil || !strings.Contains(err.Error(), `client capability "sampling"`) {
		t.Fatalf("result %+v, error %v; want an error naming the sampling capability", res, err)
	}
	if n := len(seen.of("sample")); n != 1 {
		t.Fatalf("the server got %d roundAttempts, want 1", n)
	}
}

// TestBridgeRoundsCancel: a client that cancels its call while it is being
// asked sees its elicitation request cancelled, and the call is not sent
// again.
func TestBridgeRoundsCancel(t *testing.T) {
	t.Parallel()
	seen := &roundAttempts{}
	url, _ := startRoundsGateway(t, roundsUpstream(t, seen), 0, 0)
	asked := make(chan struct{})
	released := make(chan error, 1)
	cs := connectRounds2025(t, url, mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		close(asked)
		select {
		case <-ctx.Done():
			released <- nil
		case <-time.After(10 * time.Second):
			released <- fmt.Errorf("the elicitation request was never cancelled")
		}
		return nil, context.Canceled
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "elicit", Arguments: map[string]any{}})
		done <- err
	}()
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the client was never asked")
	}
	cancel()
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	// Another call on the same session goes through: the gateway is not
	// stuck, and the cancelled call was not sent again meanwhile.
	cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ccancel()
	if _, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "roots", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if n := len(seen.of("elicit")); n != 1 {
		t.Fatalf("the server got %d roundAttempts of the cancelled call, want 1", n)
	}
}

// TestBridgeRoundsProgress: the client's progress token reaches it on the
// progress the server sends in the call's last round.
func TestBridgeRoundsProgress(t *testing.T) {
	t.Parallel()
	url, _ := startRoundsGateway(t, roundsUpstream(t, &roundAttempts{}), 0, 0)
	got := make(chan any, 4)
	opts := roundAnswers
	opts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		got <- req.Params.ProgressToken
	}
	cs := connectRounds2025(t, url, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"who": "x"}}
	p.SetProgressToken("client-token")
	if _, err := cs.CallTool(ctx, p); err != nil {
		t.Fatal(err)
	}
	select {
	case tok := <-got:
		if tok != "client-token" {
			t.Fatalf("progress token %v, want client-token", tok)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no progress reached the client")
	}
}

// TestBridgeRoundsPromptAndResource: prompts/get and resources/read of a
// 2025 client are bridged as tools/call is.
func TestBridgeRoundsPromptAndResource(t *testing.T) {
	t.Parallel()
	seen := &roundAttempts{}
	url, _ := startRoundsGateway(t, roundsUpstream(t, seen), 0, 0)
	cs := connectRounds2025(t, url, roundAnswers)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Run("prompts/get", func(t *testing.T) {
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) != 1 || textContent(res.Messages[0].Content) != "Greet Ada" {
			t.Fatalf("prompt %+v, want one message %q", res, "Greet Ada")
		}
		if at := seen.of("greet"); len(at) != 2 || at[1].state != "prompt-state" || !slices.Equal(at[1].keys, []string{"user_name"}) {
			t.Fatalf("upstream roundAttempts %+v", at)
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

// TestBridgeRoundsConcurrent: several 2025 clients at once against one
// 2026-07-28 upstream; each is asked only its own question.
func TestBridgeRoundsConcurrent(t *testing.T) {
	t.Parallel()
	url, _ := startRoundsGateway(t, roundsUpstream(t, &roundAttempts{}), 0, 0)
	const clients = 6
	var wg sync.WaitGroup
	errs := make(chan error, clients*4) // each client reports at most 3 errors
	for i := range clients {
		me := fmt.Sprintf("client-%d", i)
		cs := connectRounds2025(t, url, mcp.ClientOptions{CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if q := textContent(req.Params.Messages[0].Content); q != "capital for "+me {
				return nil, fmt.Errorf("%s was asked %q", me, q)
			}
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: me}}, nil
		}})
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for range 3 {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sample", Arguments: map[string]any{"who": me}})
				if err != nil {
					errs <- fmt.Errorf("%s: %v", me, err)
					return
				}
				if got := textOf(res); got != "Sampling response: "+me {
					errs <- fmt.Errorf("%s got %q", me, got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBridgeRoundsModernPassThrough: a 2026-07-28 client through the
// gateway to a 2026-07-28 server sees the server's own input request keys
// and requestState, and its roundAnswers reach the server under those keys.
func TestBridgeRoundsModernPassThrough(t *testing.T) {
	t.Parallel()
	seen := &roundAttempts{}
	url, _ := startRoundsGateway(t, roundsUpstream(t, seen), 0, 0)
	c := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: roundAnswers.ElicitationHandler, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "roots", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !first.NeedsInput() || first.InputRequests["client_roots"] == nil || first.RequestState != "roots-state" {
		t.Fatalf("first answer %+v, want input_required asking client_roots with the server's requestState", first)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "roots", Arguments: map[string]any{},
		InputResponses: mcp.InputResponseMap{"client_roots": &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///m"}}}},
		RequestState:   first.RequestState})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(res); got != "1 root(s): file:///m" {
		t.Fatalf("result %q", got)
	}
}
