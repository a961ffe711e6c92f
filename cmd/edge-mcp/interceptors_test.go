package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
	"github.com/edge-mcp/edge-mcp/runtime/interceptors"
)

// serveInterceptors runs an interceptor server for ics on 127.0.0.1.
func serveInterceptors(t *testing.T, ics ...intercept.Interceptor) string {
	t.Helper()
	reg, err := intercept.NewRegistry(0, ics...)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "ics", Version: "1"}, nil)
	if err := interceptors.Register(srv, reg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// verdict is a validator with a fixed answer on tools/call, both phases.
func verdict(name string, pass bool) intercept.Interceptor {
	hooks := []intercept.Hook{{Events: []string{"tools/call"}, Phase: intercept.Request}, {Events: []string{"tools/call"}, Phase: intercept.Response}}
	return &intercept.Func{Desc: intercept.Descriptor{Name: name, Type: intercept.Validation, Hooks: hooks},
		Fn: func(context.Context, *intercept.Invocation) (*intercept.Result, error) {
			if pass {
				return intercept.Pass(), nil
			}
			return intercept.Deny("no"), nil
		}}
}

// securityModule is the C build of a security module (its interceptors
// are those of the Go build: FuzzSecurityPortsAgree): a few tens of KB
// that compile in milliseconds, where the Go build's 2 MB took the CLI,
// which keeps no compile cache, 20 s a run under the race detector.
func securityModule(t *testing.T, name string) []byte {
	t.Helper()
	wasm, err := wasmtest.CExample(name, t.TempDir())
	wasmtest.SkipOrFail(t, err)
	return wasm
}

// interceptorsConfig writes a config with the two security modules, one
// interceptor server up and one down.
func interceptorsConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, m := range []string{"cross-boundary-guard", "secretless-redactor"} {
		if err := os.WriteFile(filepath.Join(dir, m+".wasm"), securityModule(t, m), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	up := serveInterceptors(t, verdict("pii/allow", true), verdict("pii/deny", false))
	cfg := fmt.Sprintf(`{
	  "interceptorServers": {"pii": {"url": %q}, "down": {"url": "http://127.0.0.1:%d/mcp", "timeout": 2}},
	  "policies": [
	    {"name": "guard", "module": "cross-boundary-guard.wasm"},
	    {"name": "redactor", "module": "secretless-redactor.wasm"}
	  ],
	  "interceptors": [
	    {"server": "pii", "names": ["pii/allow"], "mode": "audit"},
	    {"server": "down", "tools": ["write_*"]},
	    {"module": "redactor", "fail_open": true}
	  ]}`, up, testenv.FreePort(t))
	path := filepath.Join(dir, "gw.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestInterceptorsLs: the modules' and the servers' interceptors with
// their source, type, events and effective mode, whether the chain has
// them, the stand-in of the server that is down and why.
func TestInterceptorsLs(t *testing.T) {
	t.Parallel()
	out, err := runCLI(t, "interceptors", "ls", "--config", interceptorsConfig(t))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		`security/cross-boundary-guard\s+module guard\s+validation\s+\S*tools/call\S*\s+active\s+false\s+yes`,
		`security/secretless-redactor\s+module redactor\s+mutation\s+\S+\s+active\s+true\s+yes`,
		`pii/allow\s+server pii\s+validation\s+tools/call:both\s+audit\s+false\s+yes`,
		`pii/deny\s+server pii\s+validation\s+tools/call:both\s+active\s+false\s+no`,
		`interceptorServers.down\s+server down \(not reached\)\s+validation\s+\*:both\s+active\s+false\s+yes`,
		`server down: not reached: connecting to interceptor server "down"`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no line matching %s in\n%s", want, out)
		}
	}
}

// TestInterceptorsTest: a fixture runs against a module file's
// interceptor and against a configured server's; a fixture whose
// expectations the interceptor does not meet fails with the step and why.
func TestInterceptorsTest(t *testing.T) {
	t.Parallel()
	fixtures := filepath.Join("..", "..", "testdata", "interceptors-conformance", "fixtures")
	dir := t.TempDir()
	guard := filepath.Join(dir, "guard.wasm")
	if err := os.WriteFile(guard, securityModule(t, "cross-boundary-guard"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := interceptorsConfig(t)
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{"module file, exfiltration denied", []string{"security/cross-boundary-guard", "--module", guard, "--fixture", filepath.Join(fixtures, "behavior", "relaybleed-github_pat.json")},
			"ok   behavior/relaybleed-github_pat", false},
		{"two interceptors of the config by name", []string{"security/cross-boundary-guard", "--config", cfg, "--fixture", filepath.Join(fixtures, "behavior", "redaction-defuses-relaybleed.json")},
			"ok   behavior/redaction-defuses-relaybleed", false},
		{"remote interceptor meets the fixture", []string{"pii/allow", "--config", cfg, "--fixture", filepath.Join(fixtures, "protocol", "invoke-validation-pass.json")},
			"ok   protocol/invoke-validation-pass", false},
		{"remote interceptor fails the fixture", []string{"pii/deny", "--config", cfg, "--fixture", filepath.Join(fixtures, "protocol", "invoke-validation-pass.json")},
			"FAIL protocol/invoke-validation-pass: step 1 (invoke)", true},
		{"fixture of another type", []string{"security/cross-boundary-guard", "--module", guard, "--fixture", filepath.Join(fixtures, "protocol", "invoke-mutation-modified.json")},
			"binding validation interceptor", true},
		{"unknown name", []string{"pii/nope", "--module", guard, "--fixture", filepath.Join(fixtures, "protocol", "invoke-validation-pass.json")},
			`no interceptor "pii/nope"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(t, append([]string{"interceptors", "test"}, tc.args...)...)
			if (err != nil) != tc.wantErr || !strings.Contains(out+fmt.Sprint(err), tc.want) {
				t.Fatalf("err %v, output\n%s\nwant %q", err, out, tc.want)
			}
		})
	}
	if _, err := runCLI(t, "interceptors", "test", "x", "--module", guard); err == nil || !strings.Contains(err.Error(), "--fixture is required") {
		t.Errorf("no fixture: %v", err)
	}
}

// TestInterceptorsLsRunning: without --config, interceptors ls asks a
// running gateway's admin API (GET /admin/interceptors): the remote
// interceptors and the module's with the chain's counts after a refused
// call, each server's state, the stand-in of the one that is down.
func TestInterceptorsLsRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "redactor.wasm"), securityModule(t, "secretless-redactor"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(func() { upSrv.CloseClientConnections(); upSrv.Close() })
	pii := serveInterceptors(t, verdict("pii/deny", false), verdict("pii/allow", true))
	cfg := filepath.Join(dir, "gw.json")
	doc := fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}},
	  "interceptorServers": {"pii": {"url": %q}, "down": {"url": "http://127.0.0.1:%d/mcp", "timeout": 2, "retry_initial": 60}},
	  "policies": [{"name": "redactor", "module": "redactor.wasm"}],
	  "interceptors": [{"server": "pii", "names": ["pii/deny"]}, {"server": "down", "tools": ["write_*"]}, {"module": "redactor"}]}`,
		upSrv.URL, pii, testenv.FreePort(t))
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	url := startServe(t, "--config", cfg, "--listen", "127.0.0.1:0", "--admin", adminAddr, "--state-dir", filepath.Join(dir, "state"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err == nil || !strings.Contains(err.Error(), "pii/deny") {
		t.Fatalf("call: %v, want the refusal by pii/deny", err)
	}
	out, err := runCLI(t, "interceptors", "ls", "--admin", "http://"+adminAddr)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		`NAME\s+SOURCE\s+TYPE\s+EVENTS\s+MODE\s+FAIL-OPEN\s+CHAIN\s+CALLS\s+DENIALS\s+FAILURES\s+AUDITS\s+P50`,
		`pii/deny\s+server pii\s+validation\s+tools/call:both\s+active\s+false\s+yes\s+1\s+1\s+0\s+0\s+[0-9.]+(µs|ms|s)\n`,
		`pii/allow\s+server pii\s+validation\s+tools/call:both\s+active\s+false\s+no\s+0\s+0\s+0\s+0\s+-\n`,
		`security/secretless-redactor\s+module redactor\s+mutation\s+\S+\s+active\s+false\s+yes\s+\d+`,
		`interceptorServers.down\s+server down \(not reached\)\s+validation\s+\*:both\s+active\s+false\s+yes\s+0\s+0\s+0\s+0`,
		`server pii: reached, 2 interceptors`,
		`server down: not reached: connecting to interceptor server "down"`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no line matching %s in\n%s", want, out)
		}
	}

	// Demoted, pii/deny lets the call through; promoted, it refuses again;
	// promoted twice is a conflict.
	for _, step := range []struct {
		verb, out string
		refused   bool
	}{
		{"demote", "pii/deny: active → audit until the next reload", false},
		{"promote", "pii/deny: audit → active until the next reload", true},
		{"promote", "409", true},
	} {
		out, err := runCLI(t, "interceptors", step.verb, "pii/deny", "--admin", "http://"+adminAddr)
		if !strings.Contains(out+fmt.Sprint(err), step.out) {
			t.Errorf("interceptors %s: %q, %v; want %q", step.verb, out, err, step.out)
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if refused := err != nil && strings.Contains(err.Error(), "pii/deny"); refused != step.refused {
			t.Errorf("after %s the call: %v", step.verb, err)
		}
	}
}

// TestInterceptorsOAuthConfig: interceptors ls --config and interceptors
// test --config reach an interceptor server behind OAuth (a real
// authorization server, client credentials) with the gateway's OAuth
// manager (runtime/oauth): its interceptors are listed and a fixture
// runs against one; the token came from the client-credentials grant.
func TestInterceptorsOAuthConfig(t *testing.T) {
	const secret = "ic-cli-secret-0123456789"
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{Clients: map[string]string{"svc": secret}})
	reg, err := intercept.NewRegistry(0, verdict("pii/allow", true), verdict("pii/deny", false))
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "pii", Version: "1"}, nil)
	if err := interceptors.Register(srv, reg); err != nil {
		t.Fatal(err)
	}
	icURL := as.Mount("/ics", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Setenv("EDGE_MCP_TEST_IC_SECRET", secret)
	path := filepath.Join(t.TempDir(), "gw.json")
	cfg := fmt.Sprintf(`{"interceptorServers": {"pii": {"url": %q, "timeout": 10,
	    "oauth": {"grant": "client_credentials", "clientId": "svc", "clientSecret": "${EDGE_MCP_TEST_IC_SECRET}"}}},
	  "interceptors": [{"server": "pii", "names": ["pii/allow"]}]}`, icURL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "interceptors", "ls", "--config", path)
	if err != nil {
		t.Fatalf("ls: %v\n%s", err, out)
	}
	for _, want := range []string{`pii/allow\s+server pii\s+validation\s+tools/call:both\s+active\s+false\s+yes`, `pii/deny\s+server pii\s+validation`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("ls: no line matching %s in\n%s", want, out)
		}
	}
	if strings.Contains(out, "not reached") {
		t.Errorf("ls: the OAuth-protected server was not reached:\n%s", out)
	}
	fixture := filepath.Join("..", "..", "testdata", "interceptors-conformance", "fixtures", "protocol", "invoke-validation-pass.json")
	if out, err := runCLI(t, "interceptors", "test", "pii/allow", "--config", path, "--fixture", fixture); err != nil || !strings.Contains(out, "ok   protocol/invoke-validation-pass") {
		t.Fatalf("test: %v\n%s", err, out)
	}
	if as.Grants("client_credentials") == 0 {
		t.Fatal("no client credentials grant")
	}
}
