package transports_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// The stdio tests run real child processes: this test binary re-executed
// with stdioHelperEnv set runs TestHelperProcess in the mode it names.
const (
	stdioHelperEnv  = "EDGE_MCP_STDIO_HELPER"
	stdioPidFileEnv = "EDGE_MCP_STDIO_PIDFILE"
	stdioValueEnv   = "EDGE_MCP_STDIO_VALUE"
)

// TestHelperProcess is not a test: it is the child process of the stdio
// tests. Modes:
//
//   - server: prints a banner and a debug line on stdout and a line on
//     stderr, then serves a go-sdk MCP server on stdin/stdout with the tools
//     "echo", "env" (the value of stdioValueEnv and the working directory)
//     and "exit" (exits with status 3 in the middle of the call).
//   - stubborn: ignores SIGTERM and stdin EOF, starts a grandchild that does
//     the same and shares its stdout, writes both pids to the pid file, and
//     sleeps.
//   - grandchild: ignores SIGTERM and sleeps.
//   - bigline: prints a 4 KiB line on stdout, then sleeps.
//   - budget: answers "big" calls with a 16 MiB result, others with a
//     small one (see stdioBudgetServer).
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(stdioHelperEnv)
	if mode == "" {
		t.Skip("only runs as a child process of the stdio tests")
	}
	switch mode {
	case "server":
		fmt.Println("Helper MCP server v1.0 starting...")
		fmt.Println("debug: listening on stdio")
		fmt.Fprintln(os.Stderr, "helper stderr: hello")
		s := mcp.NewServer(&mcp.Implementation{Name: "stdio-helper", Version: "1.0.0"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, args echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + args.Text}}}, nil, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "env"}, func(ctx context.Context, req *mcp.CallToolRequest, args struct{}) (*mcp.CallToolResult, any, error) {
			wd, _ := os.Getwd()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: os.Getenv(stdioValueEnv) + "|" + wd}}}, nil, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "exit"}, func(ctx context.Context, req *mcp.CallToolRequest, args struct{}) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
		_ = s.Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		gc := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		gc.Env = append(os.Environ(), stdioHelperEnv+"=grandchild")
		gc.Stdout = os.Stdout // holds the parent's stdout pipe open
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "starting grandchild:", err)
			os.Exit(1)
		}
		pids := fmt.Sprintf("%d %d", os.Getpid(), gc.Process.Pid)
		if err := os.WriteFile(os.Getenv(stdioPidFileEnv), []byte(pids), 0o644); err != nil {
			os.Exit(1)
		}
		_, _ = io.Copy(io.Discard, os.Stdin) // stdin EOF changes nothing
		time.Sleep(time.Hour)
	case "grandchild":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
	case "bigline":
		fmt.Println(`{"jsonrpc":"2.0","method":"notifications/x","params":{"p":"` + strings.Repeat("x", 4096) + `"}}`)
		time.Sleep(time.Hour)
	case "budget":
		stdioBudgetServer()
	}
	os.Exit(2)
}

// stdioLog is a slog destination that tests can search.
type stdioLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *stdioLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *stdioLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *stdioLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// stdioHelper returns a transport running the helper in mode.
func stdioHelper(mode string, log *slog.Logger, extraEnv ...string) *transports.CommandTransport {
	return &transports.CommandTransport{
		Command: os.Args[0],
		Args:    []string{"-test.run=^TestHelperProcess$"},
		// GORACE: a race-enabled child would otherwise sleep 1 s at exit.
		Env:       append(append(os.Environ(), stdioHelperEnv+"="+mode, "GORACE=atexit_sleep_ms=0"), extraEnv...),
		Logger:    log,
		Name:      "helper-" + mode,
		KillGrace: 300 * time.Millisecond,
	}
}

// stdioGone waits until pid no longer exists. A process that is not our
// child may linger as a zombie until its new parent reaps it: that counts
// as gone (it is dead; it just has not been waited for by init).
func stdioGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		if stdioProcState(pid) == 'Z' && stdioProcPPid(pid) != os.Getpid() {
			t.Logf("process %d is dead, a zombie of %d (not of this process)", pid, stdioProcPPid(pid))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still alive (kill 0: %v, state %c)", pid, err, stdioProcState(pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stdioStat returns the fields of /proc/pid/stat after the command name.
func stdioStat(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

func stdioProcState(pid int) byte {
	if f := stdioStat(pid); len(f) > 0 {
		return f[0][0]
	}
	return '?'
}

func stdioProcPPid(pid int) int {
	if f := stdioStat(pid); len(f) > 1 {
		n, _ := strconv.Atoi(f[1])
		return n
	}
	return 0
}

// stdioZombies lists zombie children of this process.
func stdioZombies(t testing.TB) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var z []int
	me := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if f := stdioStat(pid); len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(me) {
			z = append(z, pid)
		}
	}
	return z
}

// TestCommandTransportGoSDK runs a go-sdk client over CommandTransport
// against a go-sdk server in a child process that prints a banner first.
func TestCommandTransportGoSDK(t *testing.T) {
	t.Parallel()
	var logs stdioLog
	wd := t.TempDir()
	tr := stdioHelper("server", logs.logger(), stdioValueEnv+"=from-env")
	tr.Dir = wd
	ctx := wsCtx(t)
	conn, err := tr.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cc := conn.(transports.CommandConnection)
	if cc.Pid() <= 0 {
		t.Fatalf("Pid = %d", cc.Pid())
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, connTransport{conn}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if got := cs.InitializeResult().ServerInfo.Name; got != "stdio-helper" {
		t.Errorf("server name = %q", got)
	}
	if n := cc.DroppedLines(); n != 2 {
		t.Errorf("DroppedLines = %d, want 2 (the banner and the debug line)", n)
	}
	for _, tt := range []struct {
		tool string
		args any
		want string
	}{
		{"echo", map[string]any{"text": "hi"}, "echo: hi"},
		{"echo", json.RawMessage("{\n  \"text\": \"multi\\nline\"\r\n}"), "echo: multi\nline"},
		{"env", map[string]any{}, "from-env|" + wd},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
		if err != nil {
			t.Fatalf("tools/call %s: %v", tt.tool, err)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != tt.want {
			t.Fatalf("tools/call %s = %+v, want %q", tt.tool, res.Content[0], tt.want)
		}
	}

	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(logs.String(), `line="helper stderr: hello"`) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	if !strings.Contains(out, `level=INFO msg="stdio server stderr" server_name=helper-server line="helper stderr: hello"`) {
		t.Errorf("stderr line not logged at Info with the server name:\n%s", out)
	}
	if !strings.Contains(out, "Helper MCP server v1.0 starting...") {
		t.Errorf("dropped banner not logged at Debug:\n%s", out)
	}

	pid := cc.Pid()
	start := time.Now()
	if err := cs.Close(); err != nil {
		t.Logf("closing the session: %v", err)
	}
	conn.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("closing a well-behaved server took %v", d)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still exists after Close: %v", pid, err)
	}
}

// TestCommandTransportKillsStubbornGroup checks the escalation of Close on
// a child that ignores stdin EOF and SIGTERM and has a grandchild holding
// its stdout: both must be gone afterwards.
func TestCommandTransportKillsStubbornGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	var logs stdioLog
	tr := stdioHelper("stubborn", logs.logger(), stdioPidFileEnv+"="+pidFile)
	conn, err := tr.Connect(wsCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var child, grandchild int
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(pidFile)
		if n, _ := fmt.Sscanf(string(b), "%d %d", &child, &grandchild); n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the helper did not write its pids")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if child != conn.(transports.CommandConnection).Pid() {
		t.Fatalf("helper pid %d, Pid() %d", child, conn.(transports.CommandConnection).Pid())
	}
	readErr := make(chan error, 1)
	go func() { _, err := conn.Read(context.Background()); readErr <- err }()

	start := time.Now()
	conn.Close()
	d := time.Since(start)
	if d < 2*tr.KillGrace || d > 2*tr.KillGrace+3*time.Second {
		t.Errorf("Close took %v, want about 2×KillGrace (%v) before SIGKILL", d, tr.KillGrace)
	}
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d survived Close: %v", child, err)
	}
	stdioGone(t, grandchild)
	if err := <-readErr; !errors.Is(err, transports.ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	out := logs.String()
	if !strings.Contains(out, "SIGTERM") || !strings.Contains(out, "SIGKILL") {
		t.Errorf("the escalation was not logged:\n%s", out)
	}
}

// TestCommandTransportChildExits checks that Read fails promptly, with the
// exit status, when the child exits in the middle of a call.
func TestCommandTransportChildExits(t *testing.T) {
	ctx := wsCtx(t)
	conn, err := stdioHelper("server", nil).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	write := func(msg jsonrpc.Message) {
		t.Helper()
		if err := conn.Write(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	write(wsCall(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
	if msg, err := conn.Read(ctx); err != nil {
		t.Fatal(err)
	} else if r, ok := msg.(*jsonrpc.Response); !ok || r.Error != nil {
		t.Fatalf("initialize answer: %+v", msg)
	}
	write(&jsonrpc.Request{Method: "notifications/initialized"})
	write(wsCall(2, "tools/call", `{"name":"exit","arguments":{}}`))
	start := time.Now()
	_, err = conn.Read(ctx)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Read noticed the exit after %v", d)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Fatalf("Read = %v, want an error wrapping exit status 3", err)
	}
	if !strings.Contains(err.Error(), "helper-server") {
		t.Errorf("Read error %q does not name the server", err)
	}
	if err := conn.Write(ctx, wsCall(3, "ping", "")); err == nil {
		t.Error("Write to an exited child succeeded")
	}
	if z := stdioZombies(t); len(z) > 0 {
		t.Errorf("zombie children %v after the child exited, before Close", z)
	}
}

func TestCommandTransportErrors(t *testing.T) {
	t.Parallel()
	t.Run("missing command", func(t *testing.T) {
		_, err := (&transports.CommandTransport{Command: "/nonexistent/mcp-server", Name: "ghost"}).Connect(context.Background())
		if err == nil || !strings.Contains(err.Error(), "ghost") || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Connect = %v, want a not-exist error naming the server", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := stdioHelper("server", nil).Connect(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Connect = %v, want context.Canceled", err)
		}
	})
	t.Run("line too long", func(t *testing.T) {
		tr := stdioHelper("bigline", nil)
		tr.MaxLineBytes = 1024
		conn, err := tr.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Read(wsCtx(t)); err == nil || !strings.Contains(err.Error(), "longer than 1024 bytes") {
			t.Fatalf("Read = %v, want a line-too-long error", err)
		}
	})
	t.Run("close unblocks read", func(t *testing.T) {
		conn, err := stdioHelper("server", nil).Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			for {
				if _, err := conn.Read(context.Background()); err != nil {
					errc <- err
					return
				}
			}
		}()
		time.Sleep(50 * time.Millisecond)
		conn.Close()
		conn.Close() // idempotent
		select {
		case err := <-errc:
			if !errors.Is(err, transports.ErrClosed) {
				t.Fatalf("Read = %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not unblock Read")
		}
		if err := conn.Write(context.Background(), wsCall(1, "ping", "")); !errors.Is(err, transports.ErrClosed) {
			t.Fatalf("Write after Close = %v, want ErrClosed", err)
		}
	})
}

// TestCommandTransportNoZombies runs 20 connect/close cycles and checks
// that no zombie child and no goroutine is left.
func TestCommandTransportNoZombies(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := wsCtx(t)
	for i := range 20 {
		conn, err := stdioHelper("server", nil).Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // half of them get a full exchange first
			if err := conn.Write(ctx, wsCall(1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Read(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if z := stdioZombies(t); len(z) > 0 {
		t.Fatalf("zombie children left: %v", z)
	}
	wsWaitGoroutines(t, before)
}

// FuzzCommandTransportLines runs `cat` on arbitrary bytes as a stdio server:
// every line that is a JSON-RPC message must be delivered once and in order,
// every other non-blank line dropped and counted, a line over MaxLineBytes
// must fail Read, and the end must be reported as a clean exit.
func FuzzCommandTransportLines(f *testing.F) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		f.Skip("no cat on PATH")
	}
	f.Add([]byte("banner\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\r\n\r\n  {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"n\"}"))
	f.Add([]byte("{not json}\n[{\"jsonrpc\":\"2.0\",\"method\":\"m\"}]\n\t\n{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-1,\"message\":\"e\"}}\n"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"method\":\"big\",\"params\":{\"p\":\"" + strings.Repeat("y", 70<<10) + "\"}}\nafter\n"))
	f.Add([]byte(strings.Repeat("z", 300) + "\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n"))
	const maxLine = 100 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "out")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		var dropped int64
		tooLong := false
		for _, line := range bytes.Split(data, []byte("\n")) {
			line = bytes.TrimRight(line, "\r\n")
			if len(line) > maxLine {
				tooLong = true
				break
			}
			trimmed := bytes.TrimLeft(line, " \t")
			if len(trimmed) == 0 {
				continue
			}
			if msg, err := wire.Decode(bytes.Clone(line)); err == nil && trimmed[0] == '{' {
				enc, _ := wire.Encode(msg)
				want = append(want, enc)
				continue
			}
			dropped++
		}

		conn, err := (&transports.CommandTransport{Command: cat, Args: []string{file}, MaxLineBytes: maxLine}).Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var got [][]byte
		for {
			msg, err := conn.Read(ctx)
			if err != nil {
				switch {
				case tooLong:
					if !strings.Contains(err.Error(), "longer than") {
						t.Fatalf("Read = %v, want a line-too-long error", err)
					}
				case !errors.Is(err, io.EOF):
					t.Fatalf("Read at the end = %v, want a clean exit (io.EOF)", err)
				}
				break
			}
			enc, _ := wire.Encode(msg)
			got = append(got, enc)
		}
		if len(got) != len(want) {
			t.Fatalf("delivered %d messages, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("message %d = %s, want %s", i, got[i], want[i])
			}
		}
		if n := conn.(transports.CommandConnection).DroppedLines(); !tooLong && n != dropped {
			t.Fatalf("DroppedLines = %d, want %d", n, dropped)
		}
	})
}

// stdioBudgetServer answers each call read from stdin, one per line, with
// a 16 MiB result for "big" and a small one otherwise, until stdin ends.
func stdioBudgetServer() {
	blob := strings.Repeat("x", 16<<20)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	w := bufio.NewWriter(os.Stdout)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		result := "small"
		if req.Method == "big" {
			result = blob
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"blob":"%s"}}`+"\n", req.ID, result)
		w.Flush()
	}
	os.Exit(0)
}
