package gateway

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestConformanceOverEachUpstreamTransport runs the official suite through
// edge-mcp with the everything-server reached over stdio, and over legacy
// SSE and WebSocket through a chain: a first edge-mcp serves /sse or /ws in
// front of the everything-server, a second one uses it as its upstream.
func TestConformanceOverEachUpstreamTransport(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("conformance suite: skipped in -short mode")
	}
	bin := testenv.EverythingServer(t)
	for _, tc := range []struct {
		name     string
		upstream func(t *testing.T) string // the server entry of the gateway under test
	}{
		{"stdio", func(t *testing.T) string { return fmt.Sprintf(`"everything": {"command": %q}`, bin) }},
		{"sse", func(t *testing.T) string {
			front, _ := startGateway(t, serversJSON(fmt.Sprintf(`"everything": {"url": %q}`, testenv.StartEverythingServerHTTP(t))), Options{})
			return fmt.Sprintf(`"everything": {"type": "sse", "url": %q}`, strings.TrimSuffix(front, "/mcp")+"/sse")
		}},
		{"websocket", func(t *testing.T) string {
			front, _ := startGateway(t, serversJSON(fmt.Sprintf(`"everything": {"url": %q}`, testenv.StartEverythingServerHTTP(t))), Options{})
			return fmt.Sprintf(`"everything": {"type": "websocket", "url": %q}`, "ws"+strings.TrimPrefix(strings.TrimSuffix(front, "/mcp"), "http")+"/ws")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each transport has its gateway and upstream
			url, g := startGateway(t, serversJSON(tc.upstream(t)), Options{})
			if st := g.Status()[0]; st.State != StateConnected {
				t.Fatalf("upstream over %s not connected: %+v", tc.name, st)
			}
			passed, failed, out := testenv.RunConformance(t, url)
			if passed != 40 || failed != 0 {
				t.Fatalf("conformance with the upstream over %s: %d passed, %d failed (want 40, 0)\n%s", tc.name, passed, failed, out)
			}
		})
	}
}

// TestServerEverythingFromNPM aggregates the reference TypeScript server
// over stdio and over legacy SSE beside the go-sdk one: its tools, calls,
// and the tools it adds after initialize (announced with list_changed)
// because edge-mcp declares sampling, elicitation and roots.
func TestServerEverythingFromNPM(t *testing.T) {
	t.Parallel()
	node, script := testenv.Node(t), testenv.ServerEverything(t)
	script, _ = filepath.EvalSymlinks(script)
	port := testenv.FreePort(t)
	sse := exec.Command(node, script, "sse")
	sse.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	if err := sse.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sse.Process.Kill(); sse.Wait() })
	sseURL := fmt.Sprintf("http://127.0.0.1:%d/sse", port)
	waitFor(t, "server-everything sse to listen", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})

	url, g := startGateway(t, serversJSON(
		fmt.Sprintf(`"ts_stdio": {"command": %q, "args": [%q, "stdio"], "prefix": "io"}`, node, script),
		fmt.Sprintf(`"ts_sse": {"type": "sse", "url": %q, "prefix": "sse"}`, sseURL),
		fmt.Sprintf(`"go": {"url": %q, "prefix": "go"}`, testenv.StartEverythingServerHTTP(t)),
	), Options{})
	for _, st := range g.Status() {
		if st.State != StateConnected {
			t.Fatalf("%s: %+v", st.Name, st)
		}
	}
	cs := connect(t, url, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
	})
	for _, want := range []string{"io_echo", "sse_echo", "go_test_simple_text", "io_trigger-sampling-request", "sse_trigger-sampling-request", "io_get-roots-list"} {
		waitFor(t, "tool "+want, func() bool { return slices.Contains(toolNames(t, cs), want) })
	}
	for _, name := range []string{"io_echo", "sse_echo"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "hi " + name}})
		if err != nil || !strings.Contains(textOf(res), "hi "+name) {
			t.Errorf("%s: %v %q", name, err, textOf(res))
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "io_trigger-sampling-request", Arguments: map[string]any{"prompt": "p", "maxTokens": 10}})
	if err != nil || !strings.Contains(textOf(res), "sampled") {
		t.Errorf("sampling through the TypeScript server: %v %q", err, textOf(res))
	}
}

// TestDownstreamSSEAndWebSocket drives /sse with go-sdk's legacy SSE client
// and /ws with a raw coder/websocket client sending JSON-RPC text frames.
func TestDownstreamSSEAndWebSocket(t *testing.T) {
	t.Parallel()
	demo := serveMCP(t, newDemoMathServer())
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"demo": {"url": %q}`, demo)), Options{})
	base := strings.TrimSuffix(url, "/mcp")

	t.Run("sse", func(t *testing.T) {
		c := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.SSEClientTransport{Endpoint: base + "/sse"}, &mcp.ClientSessionOptions{ProtocolVersion: "2024-11-05"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over sse"}})
		if err != nil || textOf(res) != "over sse" {
			t.Fatalf("echo over /sse: %v", err)
		}
	})

	t.Run("websocket", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", &websocket.DialOptions{Subprotocols: []string{"mcp"}})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		if resp.Header.Get("Sec-WebSocket-Protocol") != "mcp" {
			t.Fatalf("subprotocol %q", resp.Header.Get("Sec-WebSocket-Protocol"))
		}
		roundTrip := func(frame, want string) {
			t.Helper()
			if err := ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
				t.Fatal(err)
			}
			if want == "" {
				return
			}
			typ, got, err := ws.Read(ctx)
			if err != nil || typ != websocket.MessageText || !strings.Contains(string(got), want) {
				t.Fatalf("after %s: %v %v %s, want %s", frame, typ, err, got, want)
			}
		}
		roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw-ws","version":"1"}}}`, `"serverInfo"`)
		roundTrip(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "")
		roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over ws"}}}`, `"text":"over ws"`)
		roundTrip(`{"jsonrpc":"2.0","id":3,"method":"nope"}`, `"code":-32601`)
	})
}

// zombies returns the children of this process that have exited but were
// not reaped.
func zombies(t *testing.T) []string {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		rest := s[strings.LastIndexByte(s, ')')+2:] // fields after the command name
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[0] == "Z" && fields[1] == self {
			out = append(out, s)
		}
	}
	return out
}

// TestStdioRestartsLeaveNoZombies kills a stdio upstream 20 times: each time
// the gateway notices, restarts it, and the tools come back; afterwards no
// zombie process is left and the goroutine count is back to where it was.
func TestStdioRestartsLeaveNoZombies(t *testing.T) {
	bin := testenv.EverythingServer(t)
	// A banner on stdout before the server starts must not matter.
	url, g := startGateway(t, serversJSON(fmt.Sprintf(
		`"s": {"command": "sh", "args": ["-c", "echo 'everything-server starting (banner)'; exec %s"], "retry_initial": 0.01, "retry_max": 0.05}`, bin)), Options{})
	cs := connect(t, url, nil)
	pid := func() int {
		l := g.route.upstreams().list[0].current()
		if l == nil {
			return 0
		}
		p, _ := l.conn.(interface{ Pid() int })
		if p == nil {
			return 0
		}
		return p.Pid()
	}
	call := func() error {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_simple_text"})
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	for i := range 20 {
		old := pid()
		if old == 0 {
			t.Fatalf("restart %d: no child", i)
		}
		syscall.Kill(old, syscall.SIGKILL)
		waitFor(t, "a new child", func() bool { p := pid(); return p != 0 && p != old })
		waitFor(t, "calls to work again", func() bool { return call() == nil })
	}
	waitFor(t, "no zombies", func() bool { return len(zombies(t)) == 0 })
	waitFor(t, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= base+5 })
}

// TestUpstreamRestartsOnSamePort kills an HTTP upstream with SIGKILL in the
// middle of a call and starts it again on the same port: the call fails at
// once, list_changed is sent when it leaves and when it returns, and its
// tools come back without restarting edge-mcp.
func TestUpstreamRestartsOnSamePort(t *testing.T) {
	t.Parallel()
	bin := testenv.EverythingServer(t)
	port := testenv.FreePort(t)
	upURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, fmt.Sprintf("-http=127.0.0.1:%d", port), "-stateless=false")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		testenv.WaitHTTP(t, upURL)
		return cmd
	}
	cmd := start()
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"e": {"url": %q, "retry_initial": 0.05, "retry_max": 0.2}`, upURL)), Options{})
	var mu sync.Mutex
	changes := 0
	firstProgress := make(chan struct{})
	var once sync.Once
	cs := connect(t, url, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { mu.Lock(); changes++; mu.Unlock() },
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			once.Do(func() { close(firstProgress) })
		},
	})
	errc := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "test_tool_with_progress"}
		p.SetProgressToken("t")
		_, err := cs.CallTool(context.Background(), p)
		errc <- err
	}()
	<-firstProgress
	cmd.Process.Kill()
	cmd.Wait()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("the call survived the kill")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call to the killed server did not fail at once")
	}
	waitFor(t, "list_changed when the server leaves", func() bool { mu.Lock(); defer mu.Unlock(); return changes >= 1 })
	start()
	waitFor(t, "the tools to come back", func() bool { return slices.Contains(toolNames(t, cs), "test_simple_text") })
	mu.Lock()
	defer mu.Unlock()
	if changes < 2 {
		t.Errorf("list_changed sent %d times, want when it left and when it came back", changes)
	}
}

// TestInitializeNeverFinishes: a server that accepts the connection but
// never answers initialize is failed after its timeout while the others
// serve.
func TestInitializeNeverFinishes(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	silent := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang) }) // runs before the server's cleanup
	demo := serveMCP(t, newDemoMathServer())
	url, g := startGateway(t, serversJSON(
		fmt.Sprintf(`"silent": {"url": %q, "timeout": 0.3, "retry_initial": 10}`, silent),
		fmt.Sprintf(`"demo": {"url": %q}`, demo),
	), Options{})
	if st := g.Status(); st[0].State != StateFailed || !strings.Contains(st[0].LastError, "initialize") || st[1].State != StateConnected {
		t.Fatalf("status %+v", st)
	}
	cs := connect(t, url, nil)
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ok"}}); err != nil || textOf(res) != "ok" {
		t.Fatalf("the other server: %v", err)
	}
}
