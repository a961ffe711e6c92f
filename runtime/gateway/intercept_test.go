package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/interceptors"
)

// icValidator refuses payloads that contain word, on event's phase.
func icValidator(name, event string, phase intercept.Phase, word string) intercept.Interceptor {
	return &intercept.Func{Desc: intercept.Descriptor{Name: name, Type: intercept.Validation,
		Hooks: []intercept.Hook{{Events: []string{event}, Phase: phase}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			if strings.Contains(string(inv.Payload), word) {
				return intercept.Deny(name + " found " + word), nil
			}
			return intercept.Pass(), nil
		}}
}

// icMutator replaces from by to in requests of events (tools/call when none).
func icMutator(name, from, to string, events ...string) intercept.Interceptor {
	if len(events) == 0 {
		events = []string{"tools/call"}
	}
	return &intercept.Func{Desc: intercept.Descriptor{Name: name, Type: intercept.Mutation,
		Hooks: []intercept.Hook{{Events: events, Phase: intercept.Request}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			return intercept.Replace(json.RawMessage(strings.ReplaceAll(string(inv.Payload), from, to))), nil
		}}
}

// serveInterceptors runs a real interceptor server (go-sdk, streamable
// HTTP on 127.0.0.1) for ics and returns its URL.
func serveInterceptors(t testing.TB, ics ...intercept.Interceptor) string {
	t.Helper()
	return serveInterceptorsWith(t, func(*mcp.Server) {}, ics...)
}

// serveInterceptorsWith is serveInterceptors with setup run on the server
// first.
func serveInterceptorsWith(t testing.TB, setup func(*mcp.Server), ics ...intercept.Interceptor) string {
	t.Helper()
	reg, err := intercept.NewRegistry(0, ics...)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "ics", Version: "1"}, nil)
	setup(srv)
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

// lockedBuf is a log sink tests read.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func parseConfig(t *testing.T, doc string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge-mcp.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func icCall(t *testing.T, cs *mcp.ClientSession, tool, text string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", textOf(res))
	}
	return textOf(res), nil
}

// TestInterceptorsRemote: an interceptor server on 127.0.0.1 in the
// gateway's chain refuses a tools/call (the client's JSON-RPC error names
// the interceptor), rewrites the arguments the upstream sees, lets an
// audit validator's refusal through and logs it, and withholds a result
// its response validator refuses, counted as a denied call in /metrics,
// /status and the audit log, as a refused request is.
func TestInterceptorsRemote(t *testing.T) {
	t.Parallel()
	received := make(chan string, 4)
	up := vaultServer(t, "vault", received)
	seen := make(chan *intercept.Context, 16)
	ctxRecorder := &intercept.Func{Desc: intercept.Descriptor{Name: "acme/ctx", Type: intercept.Validation,
		Hooks: []intercept.Hook{{Events: []string{"tools/call"}, Phase: intercept.Request}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			select {
			case seen <- inv.Context:
			default:
			}
			return intercept.Pass(), nil
		}}
	ics := serveInterceptors(t, ctxRecorder,
		icValidator("acme/no-secret", "tools/call", intercept.Request, "SECRET"),
		icMutator("acme/shout", "hello", "HELLO"),
		icValidator("acme/audited", "tools/call", intercept.Request, "AUDITME"),
		icValidator("acme/no-leak", "tools/call", intercept.Response, "the key is"),
	)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "prefix": "vault"}},
	  "observability": {"metrics": true}, "audit": {"path": %q},
	  "interceptorServers": {"acme": {"url": %q}},
	  "interceptors": [
	    {"server": "acme", "names": ["acme/no-secret", "acme/shout", "acme/no-leak", "acme/ctx"]},
	    {"server": "acme", "names": ["acme/audited"], "mode": "audit"}
	  ]}`, up, auditPath, ics))
	logs := &lockedBuf{}
	url, g := startGatewayConfig(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if g.icept.Load().Chain() == nil {
		t.Fatal("no interceptor chain")
	}
	cs := connect(t, url, nil)

	t.Run("validator refuses", func(t *testing.T) {
		_, err := icCall(t, cs, "vault_record", "a SECRET")
		if err == nil || !strings.Contains(err.Error(), `interceptor "acme/no-secret" refused tools/call`) || !strings.Contains(err.Error(), "found SECRET") {
			t.Fatalf("err %v, want the refusal naming acme/no-secret", err)
		}
		select {
		case got := <-received:
			t.Fatalf("the upstream received %q", got)
		default:
		}
	})
	t.Run("mutator rewrites the arguments", func(t *testing.T) {
		if _, err := icCall(t, cs, "vault_record", "hello world"); err != nil {
			t.Fatal(err)
		}
		if got := <-received; got != "HELLO world" {
			t.Fatalf("upstream received %q, want the mutated %q", got, "HELLO world")
		}
	})
	t.Run("context", func(t *testing.T) {
		c := <-seen
		if c == nil || c.Principal == nil || c.Principal.Type != "anonymous" || c.SessionID == "" || c.Server != "vault" || c.Subject != "vault_record" {
			t.Fatalf("invocation context %+v", c)
		}
	})
	t.Run("audit passes and logs", func(t *testing.T) {
		got, err := icCall(t, cs, "vault_echo", "AUDITME")
		if err != nil || got != "vault:AUDITME" {
			t.Fatalf("%q, %v", got, err)
		}
		if !strings.Contains(logs.String(), "acme/audited") {
			t.Fatalf("no log of the audit refusal in:\n%s", logs.String())
		}
	})
	t.Run("response validator withholds", func(t *testing.T) {
		_, err := icCall(t, cs, "vault_leak", "")
		if err == nil || !strings.Contains(err.Error(), `interceptor "acme/no-leak" refused tools/call (response)`) {
			t.Fatalf("err %v, want the result withheld by acme/no-leak", err)
		}
	})
	t.Run("metrics and status", func(t *testing.T) {
		base := strings.TrimSuffix(url, "/mcp")
		metricsText := httpGet(t, base+"/metrics")
		for _, want := range []string{
			`edge_mcp_interceptor_server_up{server="acme"} 1`,
			`edge_mcp_interceptor_denials_total{interceptor="acme/no-secret"} 1`,
			`edge_mcp_interceptor_audits_total{interceptor="acme/audited"} 1`,
			`edge_mcp_tool_calls_total{outcome="denied",server="vault",tool="vault_record"} 1`,
			`edge_mcp_interceptor_denials_total{interceptor="acme/no-leak"} 1`,
			`edge_mcp_tool_calls_total{outcome="denied",server="vault",tool="vault_leak"} 1`,
			`edge_mcp_interceptor_duration_seconds_bucket{interceptor="acme/no-secret",le="+Inf"} 4`,
			`edge_mcp_interceptor_duration_seconds_count{interceptor="acme/no-leak"} 3`,
		} {
			if !strings.Contains(metricsText, want) {
				t.Errorf("/metrics lacks %s in:\n%s", want, grepLines(metricsText, "tool_calls_total{"))
			}
		}
		var st struct {
			Interceptors InterceptorStatus `json:"interceptors"`
		}
		if err := json.Unmarshal([]byte(httpGet(t, base+"/status")), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Interceptors.Servers) != 1 || st.Interceptors.Servers[0].State != "reached" || len(st.Interceptors.Interceptors) != 5 {
			t.Fatalf("/status interceptors %+v", st.Interceptors)
		}
		for _, c := range st.Interceptors.Interceptors {
			if c.Name == "acme/no-leak" && c.Denials != 1 {
				t.Errorf("/status: acme/no-leak %+v, want 1 denial", c)
			}
			if c.Calls > 0 && c.P50Micros <= 0 {
				t.Errorf("/status: %s %+v, want its p50_us", c.Name, c)
			}
		}
		// The audit writer is not on the call's path: its last records
		// may land a moment after the answers.
		outcomes := map[string]string{}
		waitFor(t, "the refused calls in the audit log", func() bool {
			clear(outcomes)
			for _, r := range readAudit(t, auditPath) {
				if r.Type == "tool_call" {
					outcomes[r.Tool] += r.Outcome + " "
				}
			}
			return outcomes["vault_leak"] != "" && outcomes["vault_record"] != ""
		})
		if outcomes["vault_leak"] != "denied " || !strings.HasPrefix(outcomes["vault_record"], "denied ") {
			t.Errorf("audit outcomes %q, want vault_leak and the refused vault_record denied", outcomes)
		}
	})
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d %s", url, resp.StatusCode, b.String())
	}
	return b.String()
}

// freeAddress is a 127.0.0.1 address nothing listens on.
func freeAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestInterceptorsServerDownAtStart: an interceptor server down when the
// gateway starts does not stop it; in a fail-closed entry's scope calls
// are refused naming the server, in a fail_open entry's they pass, and
// everything else is served.
func TestInterceptorsServerDownAtStart(t *testing.T) {
	t.Parallel()
	received := make(chan string, 4)
	up := vaultServer(t, "vault", received)
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "prefix": "vault"}},
	  "interceptorServers": {"down": {"url": "http://%s/mcp", "retry_initial": 60}},
	  "interceptors": [
	    {"server": "down", "tools": ["vault_record"]},
	    {"server": "down", "tools": ["vault_echo"], "fail_open": true}
	  ]}`, up, freeAddress(t)))
	url, g := startGatewayConfig(t, cfg, Options{})
	if st := g.InterceptorStatus(); st == nil || len(st.Servers) != 1 || st.Servers[0].State != "unreached" || st.Servers[0].LastError == "" {
		t.Fatalf("status %+v, want the server unreached with its error", st)
	}
	cs := connect(t, url, nil)
	if _, err := icCall(t, cs, "vault_record", "x"); err == nil || !strings.Contains(err.Error(), `"interceptorServers.down"`) {
		t.Fatalf("fail-closed scope: %v, want a refusal naming interceptorServers.down", err)
	}
	if got, err := icCall(t, cs, "vault_echo", "x"); err != nil || got != "vault:x" {
		t.Fatalf("fail_open scope: %q, %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "vault_structured"})
	if err != nil || res.IsError {
		t.Fatalf("outside every scope: %v %v", err, res)
	}
}

// TestInterceptorsReload: a reload that adds interceptors swaps the chain
// in; one that leaves the interceptor server's config alone rebuilds the
// chain on the same connection (the server sees one session); one that
// removes them takes it out (and closes it).
func TestInterceptorsReload(t *testing.T) {
	t.Parallel()
	up := vaultServer(t, "vault", make(chan string, 4))
	var sessions atomic.Int32 // MCP sessions the interceptor server opened
	ics := serveInterceptorsWith(t, func(srv *mcp.Server) {
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "initialize" {
					sessions.Add(1)
				}
				return next(ctx, method, req)
			}
		})
	}, icValidator("acme/no-secret", "tools/call", intercept.Request, "SECRET"))
	path := filepath.Join(t.TempDir(), "edge-mcp.json")
	write := func(extra string) {
		doc := fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "prefix": "vault"}}%s}`, up, extra)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	url, g := startGatewayFile(t, path, Options{})
	cs := connect(t, url, nil)
	if _, err := icCall(t, cs, "vault_echo", "SECRET"); err != nil {
		t.Fatalf("before: %v", err)
	}
	write(fmt.Sprintf(`, "interceptorServers": {"acme": {"url": %q}}, "interceptors": [{"server": "acme"}]`, ics))
	if _, err := g.ReloadFile(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := g.icept.Load()
	if _, err := icCall(t, cs, "vault_echo", "SECRET"); err == nil || !strings.Contains(err.Error(), "acme/no-secret") {
		t.Fatalf("after the reload: %v, want the refusal", err)
	}
	if _, err := g.ReloadFile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g.icept.Load() == first {
		t.Fatal("the chain was not rebuilt on reload")
	}
	if n := sessions.Load(); n != 1 {
		t.Fatalf("the interceptor server (config unchanged) saw %d sessions, want 1: the reload dialed it again", n)
	}
	if _, err := icCall(t, cs, "vault_echo", "SECRET"); err == nil || !strings.Contains(err.Error(), "acme/no-secret") {
		t.Fatalf("after a reload keeping the connection: %v, want the refusal", err)
	}
	write("")
	if _, err := g.ReloadFile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := icCall(t, cs, "vault_echo", "SECRET"); err != nil || got != "vault:SECRET" {
		t.Fatalf("after removing the chain: %q, %v", got, err)
	}
}

// TestInterceptorsWasmModule: a Wasm module named by an interceptors
// entry runs in the chain: secretless-redactor (ABI 1.1 mutator) redacts
// the arguments the upstream receives.
func TestInterceptorsWasmModule(t *testing.T) {
	t.Parallel()
	received := make(chan string, 4)
	up := vaultServer(t, "vault", received)
	mod := writeModule(t, wasmtest.Example(t, "secretless-redactor"))
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "prefix": "vault"}},
	  "policies": [{"name": "redact", "module": %q}],
	  "interceptors": [{"module": "redact"}]}`, up, mod))
	url, _ := startGatewayConfig(t, cfg, policyOptions(t))
	cs := connect(t, url, nil)
	if _, err := icCall(t, cs, "vault_record", "key AKIA5MZXN8QRF3WBY6OE here"); err != nil {
		t.Fatal(err)
	}
	if got := <-received; got != "key [REDACTED:aws_access_key] here" {
		t.Fatalf("upstream received %q", got)
	}
}

// TestInterceptorsDownstream: edge-mcp is an interceptor server on /mcp,
// behind its authentication: a real interceptor client lists the chain's
// module interceptor (secretless-redactor) and invokes it; without the
// key it is refused. /status reports the chain's counts.
func TestInterceptorsDownstream(t *testing.T) {
	t.Parallel()
	up := vaultServer(t, "vault", make(chan string, 4))
	mod := writeModule(t, wasmtest.Example(t, "secretless-redactor"))
	const key = "ic-key-0123456789abcdef"
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "prefix": "vault"}},
	  "auth": {"mode": "api_key", "api_keys": [{"name": "ops", "key": %q}]},
	  "policies": [{"name": "redact", "module": %q}],
	  "interceptors": [{"module": "redact"}]}`, up, key, mod))
	url, g := startGatewayConfig(t, cfg, policyOptions(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := interceptors.Dial(ctx, "edge", interceptors.ServerOptions{URL: url}); err == nil {
		t.Fatal("dialed without the key")
	}
	c, err := interceptors.Dial(ctx, "edge", interceptors.ServerOptions{URL: url, Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ics, skipped, err := c.Interceptors(ctx)
	if err != nil || len(skipped) > 0 || len(ics) != 1 || ics[0].Describe().Name != "security/secretless-redactor" {
		t.Fatalf("list: %v %v %v", ics, skipped, err)
	}
	res, err := ics[0].Invoke(ctx, &intercept.Invocation{Name: "security/secretless-redactor", Event: "tools/call", Phase: intercept.Request,
		Payload: json.RawMessage(`{"name":"x","arguments":{"q":"AKIA5MZXN8QRF3WBY6OE"}}`)})
	if err != nil || !res.Modified || !strings.Contains(string(res.Payload), "[REDACTED:aws_access_key]") {
		t.Fatalf("invoke: %+v %v", res, err)
	}
	raw, err := c.Invoke(ctx, json.RawMessage(`{"name":"nope","event":"tools/call","phase":"request","payload":{}}`))
	if err == nil {
		t.Fatalf("an unknown interceptor answered %s", raw)
	}
	st := g.InterceptorStatus()
	if st == nil || len(st.Interceptors) != 1 || st.Interceptors[0].Name != "security/secretless-redactor" {
		t.Fatalf("status %+v", st)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// promptServer is an upstream with a prompt and a resource.
func promptServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"]}}}}, nil
		})
	for _, r := range []struct{ uri, text string }{{"mem://note", "a note"}, {"mem://key", "the key is 42"}} {
		s.AddResource(&mcp.Resource{URI: r.uri, Name: r.uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.uri, Text: r.text}}}, nil
		})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestInterceptorsPromptsResources: the chain runs on prompts/get and
// resources/read: a request validator refuses, a request mutator rewrites
// the prompt's arguments, a response validator withholds a resource.
func TestInterceptorsPromptsResources(t *testing.T) {
	t.Parallel()
	up := promptServer(t)
	ics := serveInterceptors(t,
		icValidator("acme/no-secret", "prompts/get", intercept.Request, "SECRET"),
		icMutator("acme/shout", "world", "WORLD", "prompts/get"),
		icValidator("acme/no-key", "resources/read", intercept.Response, "the key is"),
	)
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"docs": {"url": %q}},
	  "interceptorServers": {"acme": {"url": %q}}, "interceptors": [{"server": "acme"}]}`, up, ics))
	url, _ := startGatewayConfig(t, cfg, Options{})
	cs := connect(t, url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "SECRET"}}); err == nil || !strings.Contains(err.Error(), `interceptor "acme/no-secret" refused prompts/get (request)`) {
		t.Fatalf("prompts/get refused: %v", err)
	}
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "world"}})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].Content.(*mcp.TextContent).Text != "hello WORLD" {
		t.Fatalf("prompts/get mutated: %+v %v", res, err)
	}
	if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mem://note"}); err != nil || rr.Contents[0].Text != "a note" {
		t.Fatalf("resources/read passed: %+v %v", rr, err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mem://key"}); err == nil || !strings.Contains(err.Error(), `interceptor "acme/no-key" refused resources/read (response)`) {
		t.Fatalf("resources/read withheld: %v", err)
	}
}

// TestInterceptorsNoChain: a config without interceptors or
// interceptorServers has no chain: its ABI 1.0 policy runs on the
// gateway's own path as before (redact-secrets masks a result), the
// downstream interceptors/list is empty, /status has no interceptors
// section.
func TestInterceptorsNoChain(t *testing.T) {
	t.Parallel()
	up := vaultServer(t, "vault", make(chan string, 4))
	mod := writeModule(t, wasmtest.Example(t, "redact-secrets"))
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "prefix": "vault"}},
	  "policies": [{"name": "redact", "module": %q, "tools": ["*"], "config": {"replacement": "[REDACTED]"}}]}`, up, mod))
	url, g := startGatewayConfig(t, cfg, policyOptions(t))
	if g.icept.Load() != nil || g.InterceptorStatus() != nil {
		t.Fatal("a chain without interceptors in the config")
	}
	cs := connect(t, url, nil)
	if got, err := icCall(t, cs, "vault_leak", ""); err != nil || strings.Contains(got, secretKey) || !strings.Contains(got, "the key is [REDACTED]") {
		t.Fatalf("the ABI 1.0 result policy: %q, %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := interceptors.Dial(ctx, "edge", interceptors.ServerOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ics, _, err := c.Interceptors(ctx); err != nil || len(ics) != 0 {
		t.Fatalf("interceptors/list without a chain: %v %v", ics, err)
	}
	if body := httpGet(t, strings.TrimSuffix(url, "/mcp")+"/status"); strings.Contains(body, `"interceptors"`) {
		t.Fatalf("/status has an interceptors section: %s", body)
	}
}

// TestInterceptorsSampling: the chain runs on a server→client
// sampling/createMessage: a request validator refuses it (the upstream's
// tool sees the error naming the interceptor), a request mutator rewrites
// what the client is asked, a response validator refuses the client's
// answer.
func TestInterceptorsSampling(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Q string `json:"q"`
	}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Q}}}})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling: " + err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "model said: " + textContent(res.Content)}}}, nil, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(up.Close)
	ics := serveInterceptors(t,
		icValidator("acme/no-secret", "sampling/createMessage", intercept.Request, "SECRET"),
		icMutator("acme/shout", "hello", "HELLO", "sampling/createMessage"),
		icValidator("acme/no-paris", "sampling/createMessage", intercept.Response, "Paris (bad)"),
	)
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"asker": {"url": %q}},
	  "interceptorServers": {"acme": {"url": %q}}, "interceptors": [{"server": "acme"}]}`, up.URL, ics))
	url, _ := startGatewayConfig(t, cfg, Options{})
	opts := roundAnswers
	cs := connect(t, url, &opts)
	ask := func(q string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"q": q}})
		if err != nil {
			t.Fatal(err)
		}
		return textOf(res)
	}
	if got := ask("a SECRET"); !strings.Contains(got, `interceptor "acme/no-secret" refused sampling/createMessage (request)`) {
		t.Fatalf("refused request: %q", got)
	}
	if got := ask("hello"); got != "model said: Paris (HELLO)" {
		t.Fatalf("mutated request: %q", got)
	}
	if got := ask("bad"); !strings.Contains(got, `interceptor "acme/no-paris" refused sampling/createMessage (response)`) {
		t.Fatalf("refused answer: %q", got)
	}
}

// TestInterceptorsMutationRevalidated: a mutator whose arguments no longer
// fit the tool's inputSchema fails: the call is refused with -32602
// naming it and the upstream never sees it; a fail-open one's change is
// dropped and the call goes on with the client's arguments.
func TestInterceptorsMutationRevalidated(t *testing.T) {
	t.Parallel()
	received := make(chan string, 4)
	up := vaultServer(t, "vault", received)
	ics := serveInterceptors(t,
		icMutator("acme/numbers", `"NUMBER"`, `42`),
		icMutator("acme/numbers-open", `"NUMBER"`, `42`))
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "prefix": "vault"}},
	  "interceptorServers": {"acme": {"url": %q}},
	  "interceptors": [
	    {"server": "acme", "names": ["acme/numbers"], "tools": ["vault_record"]},
	    {"server": "acme", "names": ["acme/numbers-open"], "tools": ["vault_echo"], "fail_open": true}
	  ]}`, up, ics))
	url, _ := startGatewayConfig(t, cfg, Options{})
	cs := connect(t, url, nil)
	_, err := icCall(t, cs, "vault_record", "NUMBER")
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpc.Message, `interceptor "acme/numbers"`) ||
		!strings.Contains(rpc.Message, `invalid arguments for tool "vault_record"`) {
		t.Fatalf("err %v, want -32602 naming acme/numbers and the invalid arguments", err)
	}
	select {
	case got := <-received:
		t.Fatalf("the upstream received %q", got)
	default:
	}
	if got, err := icCall(t, cs, "vault_echo", "NUMBER"); err != nil || got != "vault:NUMBER" {
		t.Fatalf("fail-open mutator: %q, %v, want its change dropped", got, err)
	}
	if got, err := icCall(t, cs, "vault_record", "fine"); err != nil || got != "recorded" || <-received != "fine" {
		t.Fatalf("a call the mutator leaves alone: %q, %v", got, err)
	}
}

// icFunc is an interceptor of type typ hooking events in phase ph.
func icFunc(name string, typ intercept.Type, ph intercept.Phase, fn func(payload string) *intercept.Result, events ...string) intercept.Interceptor {
	return &intercept.Func{Desc: intercept.Descriptor{Name: name, Type: typ, Hooks: []intercept.Hook{{Events: events, Phase: ph}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			return fn(string(inv.Payload)), nil
		}}
}

// TestInterceptorsListsAndSubscribe: the list methods and
// resources/subscribe are interceptable events: a response mutator takes
// a tool out of tools/list (and renames a template in
// resources/templates/list), a request validator refuses prompts/list
// (-32602), a response validator withholds resources/list (-32603), and a
// request validator refuses a subscription, which never reaches the
// upstream, while another goes through.
func TestInterceptorsListsAndSubscribe(t *testing.T) {
	t.Parallel()
	subscribed := make(chan string, 4)
	s := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			subscribed <- req.Params.URI
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for _, n := range []string{"visible", "hidden"} {
		s.AddTool(&mcp.Tool{Name: n, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: n}}}, nil
		})
	}
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	for _, uri := range []string{"mem://note", "mem://key"} {
		s.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "x"}}}, nil
		})
	}
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "mem://t/{id}", Name: "tmpl"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	up := serveHandler(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))

	hide := icFunc("acme/hide", intercept.Mutation, intercept.Response, func(p string) *intercept.Result {
		var res struct {
			Tools []map[string]any `json:"tools"`
		}
		_ = json.Unmarshal([]byte(p), &res)
		res.Tools = slices.DeleteFunc(res.Tools, func(tool map[string]any) bool { return tool["name"] == "hidden" })
		b, _ := json.Marshal(res)
		return intercept.Replace(b)
	}, "tools/list")
	rename := icFunc("acme/rename", intercept.Mutation, intercept.Response, func(p string) *intercept.Result {
		return intercept.Replace(json.RawMessage(strings.ReplaceAll(p, `"tmpl"`, `"TMPL"`)))
	}, "resources/templates/list")
	noPrompts := icFunc("acme/no-prompts", intercept.Validation, intercept.Request, func(string) *intercept.Result { return intercept.Deny("no prompts here") }, "prompts/list")
	ics := serveInterceptors(t, hide, rename, noPrompts,
		icValidator("acme/no-key-listed", "resources/list", intercept.Response, "mem://key"),
		icValidator("acme/no-key-subscription", "resources/subscribe", intercept.Request, "mem://key"))
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"docs": {"url": %q}},
	  "interceptorServers": {"acme": {"url": %q}}, "interceptors": [{"server": "acme"}]}`, up, ics))
	url, _ := startGatewayConfig(t, cfg, Options{})
	cs := connect(t, url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "visible" {
		t.Fatalf("tools/list %+v %v, want only the visible tool", tools, err)
	}
	tmpls, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpls.ResourceTemplates) != 1 || tmpls.ResourceTemplates[0].Name != "TMPL" {
		t.Fatalf("resources/templates/list %+v %v, want the renamed template", tmpls, err)
	}
	var rpc *jsonrpc.Error
	if _, err := cs.ListPrompts(ctx, nil); !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpc.Message, `interceptor "acme/no-prompts" refused prompts/list (request): no prompts here`) {
		t.Fatalf("prompts/list: %v, want -32602 naming acme/no-prompts", err)
	}
	if _, err := cs.ListResources(ctx, nil); !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInternalError || !strings.Contains(rpc.Message, `interceptor "acme/no-key-listed" refused resources/list (response)`) {
		t.Fatalf("resources/list: %v, want -32603 naming acme/no-key-listed", err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://key"}); !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpc.Message, `interceptor "acme/no-key-subscription" refused resources/subscribe (request)`) {
		t.Fatalf("resources/subscribe mem://key: %v, want -32602 naming acme/no-key-subscription", err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://note"}); err != nil {
		t.Fatalf("resources/subscribe mem://note: %v", err)
	}
	if got := <-subscribed; got != "mem://note" {
		t.Fatalf("the upstream was asked to subscribe to %q, want only mem://note", got)
	}
}

// TestInterceptorsOAuth: an interceptor server behind OAuth (a real
// authorization server, client credentials, as for an upstream) is
// reached with the gateway's OAuth client (runtime/oauth): its
// interceptor refuses a call; the token came from the client-credentials
// grant, and without the oauth section the server stays unreached with
// its 401.
func TestInterceptorsOAuth(t *testing.T) {
	const secret = "ic-cc-secret-0123456789"
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{Clients: map[string]string{"svc": secret}})
	reg, err := intercept.NewRegistry(0, icValidator("pii/no-secret", "tools/call", intercept.Request, "SECRET"))
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "pii", Version: "1"}, nil)
	if err := interceptors.Register(srv, reg); err != nil {
		t.Fatal(err)
	}
	icURL := as.Mount("/ics", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	up := vaultServer(t, "vault", make(chan string, 4))
	t.Setenv("EDGE_MCP_TEST_IC_SECRET", secret)
	for _, c := range []struct {
		name, oauth string
		reached     bool
	}{
		{"with oauth", `, "oauth": {"grant": "client_credentials", "clientId": "svc", "clientSecret": "${EDGE_MCP_TEST_IC_SECRET}"}`, true},
		{"without oauth", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "prefix": "vault"}},
			  "interceptorServers": {"pii": {"url": %q, "retry_initial": 60%s}},
			  "interceptors": [{"server": "pii"}]}`, up, icURL, c.oauth))
			url, g := startGatewayConfig(t, cfg, Options{})
			st := g.InterceptorStatus()
			if got := st.Servers[0].State == "reached"; got != c.reached {
				t.Fatalf("interceptor server %+v, want reached %v", st.Servers[0], c.reached)
			}
			if !c.reached {
				if !strings.Contains(st.Servers[0].LastError, "Unauthorized") {
					t.Errorf("last error %q, want Unauthorized", st.Servers[0].LastError)
				}
				return
			}
			if as.Grants("client_credentials") == 0 {
				t.Fatal("no client credentials grant")
			}
			cs := connect(t, url, nil)
			if _, err := icCall(t, cs, "vault_echo", "a SECRET"); err == nil || !strings.Contains(err.Error(), `interceptor "pii/no-secret" refused`) {
				t.Fatalf("call: %v, want the refusal of the OAuth-protected interceptor", err)
			}
			if got, err := icCall(t, cs, "vault_echo", "fine"); err != nil || got != "vault:fine" {
				t.Fatalf("call: %q %v", got, err)
			}
		})
	}
}

// TestInterceptorsPerVirtualServer: a virtual server's "interceptors"
// confine the named interceptor server's members to its sessions: its
// validator refuses a call on the virtual server's path and not on /mcp,
// while the chain's other members run on both.
func TestInterceptorsPerVirtualServer(t *testing.T) {
	t.Parallel()
	up := vaultServer(t, "vault", make(chan string, 16))
	strict := serveInterceptors(t, icValidator("strict/no-secret", "tools/call", intercept.Request, "SECRET"))
	global := serveInterceptors(t, icValidator("global/no-forbidden", "tools/call", intercept.Request, "FORBIDDEN"))
	cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "prefix": "vault"}},
	  "interceptorServers": {"strict": {"url": %q}, "global": {"url": %q}},
	  "interceptors": [{"server": "strict"}, {"server": "global"}],
	  "virtual_servers": {"triage": {"path": "/mcp/triage", "tools": ["vault_*"], "interceptors": ["strict"]}}}`, up, strict, global))
	url, _ := startGatewayConfig(t, cfg, Options{})
	for _, tc := range []struct {
		path       string
		secretDeny bool
	}{{"/mcp", false}, {"/mcp/triage", true}} {
		t.Run(tc.path, func(t *testing.T) {
			cs := connect(t, strings.TrimSuffix(url, "/mcp")+tc.path, nil)
			_, err := icCall(t, cs, "vault_record", "a SECRET")
			if denied := err != nil && strings.Contains(err.Error(), `interceptor "strict/no-secret" refused`); denied != tc.secretDeny || (err != nil && !denied) {
				t.Fatalf("SECRET: err %v, want refused by strict/no-secret: %v", err, tc.secretDeny)
			}
			if _, err := icCall(t, cs, "vault_record", "FORBIDDEN"); err == nil || !strings.Contains(err.Error(), `interceptor "global/no-forbidden" refused`) {
				t.Fatalf("FORBIDDEN: err %v, want the global interceptor's refusal", err)
			}
		})
	}
}

// TestInterceptorsListScoped: members scoped with servers or tools see,
// change and refuse only the entries of their scope in a list: over two
// real upstreams, a tools/list mutator scoped to server "a" changes only
// a's tools (its invocation context naming a), a validator scoped to one
// tool of b withholds only that tool, and every other entry passes
// untouched, in the order of a gateway without a chain.
func TestInterceptorsListScoped(t *testing.T) {
	a := vaultServer(t, "a", make(chan string, 4))
	b := vaultServer(t, "b", make(chan string, 4))
	seen := make(chan *intercept.Context, 4)
	upper := &intercept.Func{Desc: intercept.Descriptor{Name: "acme/upper", Type: intercept.Mutation,
		Hooks: []intercept.Hook{{Events: []string{"tools/list"}, Phase: intercept.Response}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			select {
			case seen <- inv.Context:
			default:
			}
			return intercept.Replace(json.RawMessage(strings.ReplaceAll(string(inv.Payload), `"description":"`, `"description":"UPPER `))), nil
		}}
	noLeak := icFunc("acme/no-leak", intercept.Validation, intercept.Response, func(string) *intercept.Result { return intercept.Deny("not listed") }, "tools/list")
	ics := serveInterceptors(t, upper, noLeak)
	servers := fmt.Sprintf(`"mcpServers": {"a": {"url": %q, "prefix": "a"}, "b": {"url": %q, "prefix": "b"}}`, a, b)
	plainURL, _ := startGateway(t, "{"+servers+"}", Options{})
	cfg := parseConfig(t, fmt.Sprintf(`{%s, "interceptorServers": {"acme": {"url": %q}},
	  "interceptors": [{"server": "acme", "names": ["acme/upper"], "servers": ["a"]},
	                   {"server": "acme", "names": ["acme/no-leak"], "tools": ["b_leak"]}]}`, servers, ics))
	url, _ := startGatewayConfig(t, cfg, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plain, err := connect(t, plainURL, nil).ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := connect(t, url, nil).ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want, names []string
	for _, tool := range plain.Tools {
		if tool.Name != "b_leak" {
			want = append(want, tool.Name)
		}
	}
	for _, tool := range got.Tools {
		names = append(names, tool.Name)
		upper := strings.HasPrefix(tool.Description, "UPPER ")
		if upper != strings.HasPrefix(tool.Name, "a_") {
			t.Errorf("tool %s: description %q: the mutator scoped to a changed it: %v", tool.Name, tool.Description, upper)
		}
	}
	if !slices.Equal(names, want) {
		t.Fatalf("tools\n %v\nwant (no b_leak, the order of a gateway without a chain)\n %v", names, want)
	}
	if c := <-seen; c == nil || c.Server != "a" || !slices.Equal(c.Servers, []string{"a"}) || c.SessionID == "" {
		t.Fatalf("invocation context %+v, want server a", c)
	}
}

// TestInterceptorsSubscribeAnswered: the response phase of
// resources/subscribe runs on the answers the gateway gives itself: the
// {} of a second session's subscription to a URI the upstream already
// sends updates for, and the {} of a subscription to a 2026-07-28
// upstream (a subscriptions/listen); a response validator refusing it is
// the client's -32603 naming the interceptor.
func TestInterceptorsSubscribeAnswered(t *testing.T) {
	legacy := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	legacy.AddResource(&mcp.Resource{URI: "res://watched", Name: "watched"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "res://watched", Text: "x"}}}, nil
	})
	var deny atomic.Value // the session id whose subscription the validator refuses
	deny.Store("")
	var answered atomic.Int32
	refuse := &intercept.Func{Desc: intercept.Descriptor{Name: "acme/no-sub", Type: intercept.Validation,
		Hooks: []intercept.Hook{{Events: []string{"resources/subscribe"}, Phase: intercept.Response}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			answered.Add(1)
			if inv.Context != nil && inv.Context.SessionID == deny.Load().(string) && inv.Context.Subject == "res://watched" {
				return intercept.Deny("no subscription for you"), nil
			}
			return intercept.Pass(), nil
		}}
	ics := serveInterceptors(t, refuse)
	for _, tc := range []struct {
		name, up   string
		denySecond bool // else the first session is refused
	}{
		{"second session, gateway's own answer", serveMCP(t, legacy), true},
		{"2026-07-28 upstream", legacyFeaturesUpstream(t), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answered.Store(0)
			cfg := parseConfig(t, fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}},
			  "interceptorServers": {"acme": {"url": %q}}, "interceptors": [{"server": "acme"}]}`, tc.up, ics))
			url, _ := startGatewayConfig(t, cfg, Options{})
			first, second := connect(t, url, nil), connect(t, url, nil)
			denied, allowed := first, second
			if tc.denySecond {
				denied, allowed = second, first
			}
			deny.Store(denied.ID())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var rpc *jsonrpc.Error
			for _, cs := range []*mcp.ClientSession{first, second} {
				err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "res://watched"})
				if cs == allowed && err != nil {
					t.Fatalf("allowed subscription: %v", err)
				}
				if cs == denied && (!errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInternalError || !strings.Contains(rpc.Message, `interceptor "acme/no-sub" refused resources/subscribe (response): no subscription for you`)) {
					t.Fatalf("refused subscription: %v, want -32603 naming acme/no-sub", err)
				}
			}
			if n := answered.Load(); n != 2 {
				t.Fatalf("the response phase ran %d times, want 2", n)
			}
		})
	}
}
