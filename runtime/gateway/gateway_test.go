package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestConformanceThroughGateway runs the official conformance server suite
// against edge-mcp in pass-through mode in front of the go-sdk conformance
// everything-server: it must pass exactly as it does against the server
// directly (testenv's own test pins that baseline at 40 passed, 0 failed).
func TestConformanceThroughGateway(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("conformance suite: skipped in -short mode")
	}
	up := testenv.StartEverythingServerHTTP(t)
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"everything": {"url": %q}`, up)), Options{})
	passed, failed, out := testenv.RunConformance(t, url)
	if passed != 40 || failed != 0 {
		t.Fatalf("conformance through edge-mcp: %d passed, %d failed (want 40 passed, 0 failed)\n%s", passed, failed, out)
	}
}

// everythingTools lists the tool names of an everything-server directly.
func everythingTools(t *testing.T, url string) []string {
	t.Helper()
	return toolNames(t, connect(t, url, nil))
}

func TestThreeUpstreamsAggregated(t *testing.T) {
	t.Parallel()
	a := testenv.StartEverythingServerHTTP(t)
	b := testenv.StartEverythingServerHTTP(t)
	demo := serveMCP(t, newDemoMathServer())
	direct := everythingTools(t, a)

	url, _ := startGateway(t, serversJSON(
		fmt.Sprintf(`"a": {"url": %q, "prefix": "a"}`, a),
		fmt.Sprintf(`"b": {"url": %q, "prefix": "b"}`, b),
		fmt.Sprintf(`"demo": {"url": %q}`, demo),
	), Options{PageSize: 7}) // several pages

	var (
		logMu    sync.Mutex
		logs     []string
		progress []float64
		updated  = make(chan string, 10)
	)
	cs := connect(t, url, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			logMu.Lock()
			logs = append(logs, fmt.Sprint(r.Params.Data))
			logMu.Unlock()
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			logMu.Lock()
			if r.Params.ProgressToken == "my-token" {
				progress = append(progress, r.Params.Progress)
			}
			logMu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		},
	})
	ctx := context.Background()

	t.Run("catalogue", func(t *testing.T) {
		got := toolNames(t, cs)
		var want []string
		for _, n := range direct {
			want = append(want, "a_"+n, "b_"+n)
		}
		want = append(want, "echo", "add", "time")
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("tools through the gateway:\n got %v\nwant %v", got, want)
		}
		var prompts []string
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			prompts = append(prompts, p.Name)
		}
		if !slices.Contains(prompts, "a_test_simple_prompt") || !slices.Contains(prompts, "b_test_simple_prompt") {
			t.Errorf("prompts %v lack the prefixed test_simple_prompt of a and b", prompts)
		}
		// Both everything-servers offer the same resource URIs: resources keep
		// their URIs, so the first server in config order serves them.
		var uris []string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			uris = append(uris, r.URI)
		}
		if n := strings.Count(strings.Join(uris, " "), "test://static-text"); n != 1 {
			t.Errorf("test://static-text listed %d times (want once, conflict resolved): %v", n, uris)
		}
		var templates []string
		for rt, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			templates = append(templates, rt.URITemplate)
		}
		if len(templates) != 1 {
			t.Errorf("templates = %v, want the one shared template once", templates)
		}
	})

	t.Run("tools/call routes by prefix", func(t *testing.T) {
		for _, tc := range []struct{ name, want string }{
			{"a_test_simple_text", "This is a simple text response for testing."},
			{"b_test_simple_text", "This is a simple text response for testing."},
			{"echo", "hello through the gateway"},
		} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.name, Arguments: map[string]any{"text": "hello through the gateway"}})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := textOf(res); got != tc.want {
				t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
			}
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b_test_error_handling"})
		if err != nil || !res.IsError {
			t.Errorf("b_test_error_handling: err=%v isError=%v, want a tool error result", err, res != nil && res.IsError)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 40}})
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := res.StructuredContent.(map[string]any); m["sum"] != float64(42) {
			t.Errorf("add structuredContent = %v, want sum 42", res.StructuredContent)
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
		if err == nil || !strings.Contains(err.Error(), "no_such_tool") {
			t.Errorf("unknown tool: err = %v, want an error naming it", err)
		}
	})

	t.Run("prompts/get, resources/read, templates, completion, ping", func(t *testing.T) {
		pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "b_test_prompt_with_arguments", Arguments: map[string]string{"arg1": "x1", "arg2": "y2"}})
		if err != nil {
			t.Fatal(err)
		}
		if txt := pr.Messages[0].Content.(*mcp.TextContent).Text; !strings.Contains(txt, "x1") || !strings.Contains(txt, "y2") {
			t.Errorf("prompt text %q lacks the arguments", txt)
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
		if err != nil || len(rr.Contents) == 0 || rr.Contents[0].Text == "" {
			t.Fatalf("read static-text: %v %+v", err, rr)
		}
		rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/42/data"})
		if err != nil || len(rr.Contents) == 0 || !strings.Contains(rr.Contents[0].Text, "42") {
			t.Fatalf("read through template: %v %+v", err, rr)
		}
		_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "nowhere://x"})
		if err == nil || !strings.Contains(err.Error(), "nowhere://x") {
			t.Errorf("unknown resource: err = %v", err)
		}
		if _, err := cs.Complete(ctx, &mcp.CompleteParams{
			Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "a_test_prompt_with_arguments"},
			Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "x"},
		}); err != nil {
			t.Errorf("completion/complete routed by prompt: %v", err)
		}
		if err := cs.Ping(ctx, nil); err != nil {
			t.Errorf("ping: %v", err)
		}
	})

	t.Run("logging and progress come back to the caller", func(t *testing.T) {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a_test_tool_with_logging"}); err != nil {
			t.Fatal(err)
		}
		p := &mcp.CallToolParams{Name: "b_test_tool_with_progress"}
		p.SetProgressToken("my-token")
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		// The upstream echoes the token it saw: the gateway's own, not the client's.
		if textOf(res) == "my-token" {
			t.Errorf("the client's progress token reached the upstream unmapped")
		}
		logMu.Lock()
		defer logMu.Unlock()
		if len(logs) < 3 {
			t.Errorf("log messages = %v, want the tool's three", logs)
		}
		if !slices.Equal(progress, []float64{0, 50, 100}) {
			t.Errorf("progress with the client's token = %v, want [0 50 100]", progress)
		}
	})

	t.Run("subscriptions", func(t *testing.T) {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
			t.Fatal(err)
		}
		select {
		case uri := <-updated:
			if uri != "test://watched-resource" {
				t.Errorf("updated %q", uri)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no notifications/resources/updated within 10s")
		}
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestListChangedWhenUpstreamToolsChange(t *testing.T) {
	t.Parallel()
	a := testenv.StartEverythingServerHTTP(t)
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"a": {"url": %q, "prefix": "a"}`, a)), Options{})
	changed := make(chan struct{}, 10)
	cs := connect(t, url, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if slices.Contains(toolNames(t, cs), "a___transient_tool_for_list_changed") {
		t.Fatal("transient tool listed before it exists")
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "a_test_trigger_tool_change"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed from the gateway")
	}
	if !slices.Contains(toolNames(t, cs), "a___transient_tool_for_list_changed") {
		t.Fatal("the upstream's new tool is not in the catalogue after list_changed")
	}
}

func TestUpstreamKilledMidCall(t *testing.T) {
	t.Parallel()
	bin := testenv.EverythingServer(t)
	port := testenv.FreePort(t)
	cmd := exec.Command(bin, fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	upURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	testenv.WaitHTTP(t, upURL)
	demo := serveMCP(t, newDemoMathServer())

	url, _ := startGateway(t, serversJSON(
		fmt.Sprintf(`"doomed": {"url": %q, "prefix": "d"}`, upURL),
		fmt.Sprintf(`"demo": {"url": %q}`, demo),
	), Options{})
	changed := make(chan struct{}, 10)
	firstProgress := make(chan struct{})
	var once sync.Once
	cs := connect(t, url, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			once.Do(func() { close(firstProgress) })
		},
	})

	errc := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "d_test_tool_with_progress"}
		p.SetProgressToken(1)
		_, err := cs.CallTool(context.Background(), p)
		errc <- err
	}()
	select {
	case <-firstProgress:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never started")
	}
	killed := time.Now()
	cmd.Process.Kill() // SIGKILL
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), `"doomed"`) {
			t.Fatalf("call to the killed upstream: err = %v, want an error naming server \"doomed\"", err)
		}
		if d := time.Since(killed); d > 5*time.Second {
			t.Errorf("the call failed %v after the kill; want at once", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call to the killed upstream never answered")
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no list_changed after the upstream died")
	}
	names := toolNames(t, cs)
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "d_") }) {
		t.Errorf("the dead upstream's tools are still listed: %v", names)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}})
	if err != nil || textOf(res) != "still here" {
		t.Fatalf("the other upstream stopped serving: %v", err)
	}
}

func TestServesWithEveryUpstreamDown(t *testing.T) {
	t.Parallel()
	port := testenv.FreePort(t) // nothing listens there
	url, g := startGateway(t, serversJSON(fmt.Sprintf(`"gone": {"url": "http://127.0.0.1:%d/mcp"}`, port)), Options{})
	cs := connect(t, url, nil)
	if names := toolNames(t, cs); len(names) != 0 {
		t.Errorf("tools = %v, want none", names)
	}
	st := g.Status()
	if len(st) != 1 || st[0].State != StateFailed || st[0].LastError == "" {
		t.Errorf("status = %+v, want one failed server with its error", st)
	}
}

// TestServerRequestsReachTheirCaller runs two clients calling the sampling
// tool at once: each sampling request must reach the client whose call
// caused it, and a client without the capability gets a clear error.
func TestServerRequestsReachTheirCaller(t *testing.T) {
	t.Parallel()
	a := testenv.StartEverythingServerHTTP(t)
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"a": {"url": %q}`, a)), Options{})
	client := func(name string) *mcp.ClientSession {
		return connect(t, url, &mcp.ClientOptions{
			CreateMessageHandler: func(ctx context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				time.Sleep(20 * time.Millisecond) // keep both calls in flight together
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "answer from " + name}}, nil
			},
		})
	}
	c1, c2 := client("one"), client("two")
	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := range 10 {
		for name, cs := range map[string]*mcp.ClientSession{"one": c1, "two": c2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": fmt.Sprint(i)}})
				if err != nil || textOf(res) != "LLM response: answer from "+name {
					failures.Add(1)
					t.Errorf("client %s: err=%v result=%q", name, err, textOf(res))
				}
			}()
		}
	}
	wg.Wait()

	plain := connect(t, url, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	res, err := plain.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "x"}})
	if err == nil && !res.IsError {
		t.Fatalf("a client without sampling got %q, want an error", textOf(res))
	}
	msg := fmt.Sprint(err)
	if res != nil {
		msg += textOf(res)
	}
	if !strings.Contains(msg, "does not support sampling") {
		t.Errorf("error %q does not say the client lacks sampling", msg)
	}
}

// TestCancellationReachesUpstream checks both ways a call ends early: the
// client cancels it, or the client goes away.
func TestCancellationReachesUpstream(t *testing.T) {
	t.Parallel()
	started := make(chan string, 4)
	cancelled := make(chan string, 4)
	s := mcp.NewServer(&mcp.Implementation{Name: "blocker"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		started <- in.Text
		select {
		case <-ctx.Done():
			cancelled <- in.Text
			return nil, nil, ctx.Err()
		case <-time.After(30 * time.Second):
			return nil, nil, errors.New("never cancelled")
		}
	})
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"blocker": {"url": %q}`, serveMCP(t, s))), Options{})

	awaitCancel := func(t *testing.T, name string) {
		t.Helper()
		select {
		case got := <-cancelled:
			if got != name {
				t.Fatalf("cancelled %q, want %q", got, name)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream handler was never cancelled")
		}
	}
	t.Run("client cancels", func(t *testing.T) {
		cs := connect(t, url, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go cs.CallTool(ctx, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{"text": "cancel"}})
		if got := <-started; got != "cancel" {
			t.Fatalf("started %q", got)
		}
		cancel() // the go-sdk client sends notifications/cancelled
		awaitCancel(t, "cancel")
	})
	// A client that goes away: its HTTP request is dropped, or it ends the
	// session while the call is in flight.
	for _, tc := range []struct {
		name string
		end  func(c *rawClient, abort context.CancelFunc)
	}{
		{"client drops the request", func(_ *rawClient, abort context.CancelFunc) { abort() }},
		{"client deletes the session", func(c *rawClient, _ context.CancelFunc) {
			req, _ := http.NewRequest(http.MethodDelete, c.url, nil)
			req.Header.Set("Mcp-Session-Id", c.sid)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRawClient(t, url)
			ctx, abort := context.WithCancel(context.Background())
			defer abort()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{"text":"`+tc.name+`"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", c.sid)
			go func() {
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			if got := <-started; got != tc.name {
				t.Fatalf("started %q", got)
			}
			tc.end(c, abort)
			awaitCancel(t, tc.name)
		})
	}
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "slow"}, nil)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	mcp.AddTool(s, &mcp.Tool{Name: "hang"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
		case <-release:
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"slow": {"url": %q, "timeout": 0.3}`, serveMCP(t, s))), Options{})
	cs := connect(t, url, nil)
	start := time.Now()
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hang"})
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("err = %v, want a timeout error", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("timed out after %v, want about 0.3s", d)
	}
}
