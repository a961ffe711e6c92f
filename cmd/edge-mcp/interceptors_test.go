package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
