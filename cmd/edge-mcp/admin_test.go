package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/guest/abi"
	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

func TestMain(m *testing.M) {
	// Re-executed by runMain: be the edge-mcp command itself.
	if os.Getenv("EDGE_MCP_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	// The default state folder is under the user's home; tests keep theirs
	// apart.
	dir, err := os.MkdirTemp("", "edge-mcp-state")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	testTempDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startServe runs edge-mcp serve with args and returns the /mcp URL once
// it listens; the server stops when the test ends.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"serve"}, args...), pw, io.Discard); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("edge-mcp did not shut down")
		}
	})
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if m := regexp.MustCompile(`listening on (http://\S+/mcp)`).FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, pr)
			return m[1]
		}
	}
	t.Fatal("edge-mcp did not print where it listens")
	return ""
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	return out.String() + errb.String(), err
}

// TestModuleCommands: push, ls, rollback and rm against a running gateway's
// admin API, with a signed module, test vectors and the token from the
// environment; then policy test replays an input recorded by serve --record.
func TestModuleCommands(t *testing.T) {
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	keyFile := filepath.Join(dir, "signing.key")
	os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(priv)), 0o600)
	token := "cli-test-token-0123456789"
	t.Setenv("EDGE_MCP_ADMIN_TOKEN", token)
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(func() { upSrv.CloseClientConnections(); upSrv.Close() })
	cfgPath := filepath.Join(dir, "gw.json")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}}, "admin": {"require_signed": true, "trusted_keys": [%q]}}`,
		upSrv.URL, base64.StdEncoding.EncodeToString(pub))), 0o600)
	recDir := filepath.Join(dir, "recorded")
	url := startServe(t, "--config", cfgPath, "--listen", "127.0.0.1:0", "--admin", adminAddr, "--state-dir", filepath.Join(dir, "state"), "--record", recDir)
	admin := "http://" + adminAddr

	redact := filepath.Join(dir, "redact.wasm")
	redactWasm := redactModule(t)
	os.WriteFile(redact, redactWasm, 0o600)
	vectors := filepath.Join(dir, "vectors.json")
	os.WriteFile(vectors, []byte(`[{"name":"masks a key","hook":"tool_call","input":{"server":"up","tool":"echo","arguments":{"text":"sk-proj-AbCdEf0123456789AbCdEf0123456789xyz"}},"expect":{"arguments":{"text":"[REDACTED]"}}}]`), 0o600)

	if out, err := runCLI(t, "module", "push", redact, "--admin", admin); err == nil || !strings.Contains(out+err.Error(), "signed") {
		t.Fatalf("unsigned push: %v %s", err, out)
	}
	out, err := runCLI(t, "module", "push", redact, "--name", "guard", "--sign", keyFile, "--vectors", vectors, "--admin", admin)
	if err != nil || !strings.Contains(out, "pushed") || !strings.Contains(out, "sha256:") {
		t.Fatalf("push: %v %s", err, out)
	}
	// Attach it through the API (the CLI manages modules; attachments are
	// configuration).
	req, _ := http.NewRequest("POST", admin+"/admin/policies", strings.NewReader(`{"name":"guard","module":"guard","tools":["echo"]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("attach: %v %v", err, resp)
	}
	resp.Body.Close()

	c := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "key sk-proj-AbCdEf0123456789AbCdEf0123456789xyz here"}})
	if err != nil || strings.Contains(fmt.Sprint(res.Content[0]), "sk-proj") {
		t.Fatalf("echo through the pushed module: %v %+v", err, res)
	}

	out, err = runCLI(t, "module", "ls", "--admin", admin)
	if err != nil || !regexp.MustCompile(fmt.Sprintf(`(?m)^guard\s+sha256:\S+\s+\d+\s+%d\.%d\s.*\btrue\b.*\bguard\b`, abi.Major, abi.Minor)).MatchString(out) {
		t.Fatalf("ls: %v\n%s", err, out)
	}
	// A second version, then roll back to the first.
	os.WriteFile(redact+"2", append(redactWasm, customSection("v2")...), 0o600)
	if out, err := runCLI(t, "module", "push", redact+"2", "--name", "guard", "--sign", keyFile, "--admin", admin); err != nil {
		t.Fatalf("push v2: %v %s", err, out)
	}
	if out, err := runCLI(t, "module", "rollback", "guard", "--admin", admin); err != nil || !strings.Contains(out, "rolled back guard") {
		t.Fatalf("rollback: %v %s", err, out)
	}
	if out, err := runCLI(t, "module", "rm", "guard", "--admin", admin); err == nil || !strings.Contains(err.Error(), "detach it first") {
		t.Fatalf("rm while attached: %v %s", err, out)
	}
	if out, err := runCLI(t, "module", "ls", "--admin", admin, "--token", "wrong-token-0123456789"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v %s", err, out)
	}

	// policy test replays what serve --record wrote, redacted.
	files, _ := filepath.Glob(filepath.Join(recDir, "*tool_call.json"))
	if len(files) == 0 {
		t.Fatal("serve --record wrote no tool_call input")
	}
	rec, _ := os.ReadFile(files[0])
	if bytes.Contains(rec, []byte("sk-proj")) {
		t.Errorf("the recorded input holds the secret: %s", rec)
	}
	var wrapped struct{ Hook string }
	json.Unmarshal(rec, &wrapped)
	if wrapped.Hook != "tool_call" {
		t.Errorf("recorded hook %q", wrapped.Hook)
	}
	// Replay an unredacted case too: the decision is printed as JSON.
	caseFile := filepath.Join(dir, "case.json")
	os.WriteFile(caseFile, []byte(`{"server":"s","tool":"echo","arguments":{"text":"mail alice@example.com"}}`), 0o600)
	out, err = runCLI(t, "policy", "test", redact, "--hook", "tool_call", "--input", caseFile)
	if err != nil || !strings.Contains(out, `"arguments"`) || strings.Contains(out, "alice@example.com") {
		t.Fatalf("policy test: %v\n%s", err, out)
	}
	out, err = runCLI(t, "policy", "test", redact, "--input", files[0])
	if err != nil || !strings.Contains(out, `"action"`) {
		t.Fatalf("policy test on a recorded file: %v\n%s", err, out)
	}
	cfgFile := filepath.Join(dir, "cfg.json")
	os.WriteFile(cfgFile, []byte(`{"no_such_option": true}`), 0o600)
	if out, err := runCLI(t, "policy", "test", redact, "--input", caseFile, "--hook", "tool_call", "--config", cfgFile); err == nil {
		t.Fatalf("policy test with a config the module rejects: %s", out)
	}
}

// redactModule is the C build of redact-secrets (it answers what the Go
// build answers: TestRedactPortsAgreeWithGo in policy): 20 KB that
// compile in milliseconds, where the Go build's 2 MB took each CLI
// command that loads it (policy test keeps no compile cache) several
// seconds under the race detector. What TestModuleCommands,
// TestAdminSubcommands, TestModuleRegistry and
// TestPolicyTestVectorsReportsFailures check is the CLI, the admin API and
// the registry, not the module's language.
func redactModule(t *testing.T) []byte {
	t.Helper()
	return wasmtest.Port(t, "c")
}

// customSection is a WebAssembly custom section: appended to a module it
// changes the bytes (and digest) but not the behaviour.
func customSection(name string) []byte {
	payload := append([]byte{byte(len(name))}, name...)
	return append([]byte{0, byte(len(payload))}, payload...)
}

func TestAdminRefusesNonLoopbackWithoutToken(t *testing.T) {
	t.Setenv("EDGE_MCP_ADMIN_TOKEN", "")
	err := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--admin", "0.0.0.0:0"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("got %v, want a refusal naming the reason", err)
	}
}

// TestAdminPortTaken: an admin address that is taken, the default one
// included, stops the start with an error saying what to do, rather than a
// warning and a gateway without its admin API.
func TestAdminPortTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := filepath.Join(t.TempDir(), "gw.json")
	os.WriteFile(cfg, []byte(`{"mcpServers": {}, "admin": {"listen": "`+taken.Addr().String()+`"}}`), 0o600)
	for _, args := range [][]string{
		{"serve", "--listen", "127.0.0.1:0", "--admin", taken.Addr().String()},
		{"serve", "--listen", "127.0.0.1:0", "--config", cfg}, // from the config, not a flag
	} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "--admin") {
			t.Errorf("%v: got %v, want a start-up error naming the taken address and --admin", args, err)
		}
	}
}

// TestPublicListenerNeedsAuth: without authentication, serving on a public
// address is refused unless explicitly allowed.
func TestPublicListenerNeedsAuth(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"serve", "--listen", "0.0.0.0:0", "--admin", "off"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "auth.mode") {
		t.Fatalf("got %v, want a refusal naming auth.mode", err)
	}
	url := startServe(t, "--listen", "0.0.0.0:0", "--admin", "off", "--allow-unauthenticated")
	if !strings.Contains(url, "/mcp") {
		t.Fatalf("url %q", url)
	}
}

// TestSIGHUPReloads: SIGHUP makes a running gateway read its config file
// again (file watching is off here, so only the signal can explain it).
func TestSIGHUPReloads(t *testing.T) {
	newServer := func(tool string) string {
		s := mcp.NewServer(&mcp.Implementation{Name: tool, Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: tool}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool}}}, nil, nil
		})
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
		t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
		return srv.URL
	}
	a, b := newServer("alpha"), newServer("beta")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.json")
	write := func(servers string) {
		os.WriteFile(cfg, []byte(`{"admin": {"watch_config": false}, "mcpServers": {`+servers+`}}`), 0o600)
	}
	write(fmt.Sprintf(`"a": {"url": %q}`, a))
	url := startServe(t, "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", filepath.Join(dir, "state"))
	c := mcp.NewClient(&mcp.Implementation{Name: "hup", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	write(fmt.Sprintf(`"a": {"url": %q}, "b": {"url": %q}`, a, b))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "beta"})
		if err == nil && !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("beta never appeared after SIGHUP: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
