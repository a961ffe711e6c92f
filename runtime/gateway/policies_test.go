package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// A secret of each kind the redact-secrets example masks.
const (
	secretKey   = "sk-proj-AbCdEf0123456789AbCdEf0123456789xyz"
	secretEmail = "alice.smith@example.com"
)

// vaultServer is an upstream whose tools make policies visible: echo
// answers with the server's name and the text, record reports the text it
// received on a channel, leak returns secrets, html, image and structured
// return content for the normalizer; loop, panic and client are plain tools
// whose names make the hostile test module misbehave.
func vaultServer(t *testing.T, name string, received chan<- string) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	type args struct {
		Text   string `json:"text,omitempty"`
		Region string `json:"region,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		return text(name + ":" + in.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "record", Description: "record"}, func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		received <- in.Text
		return text("recorded"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "leak", Description: "leak"}, func(context.Context, *mcp.CallToolRequest, args) (*mcp.CallToolResult, any, error) {
		return text("the key is " + secretKey + ", ask " + secretEmail), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "html", Description: "html"}, func(context.Context, *mcp.CallToolRequest, args) (*mcp.CallToolResult, any, error) {
		return text("<html><body><h1>Title</h1><p>Hello <b>world</b></p><script>evil()</script></body></html>"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "image"}, func(context.Context, *mcp.CallToolRequest, args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "structured", Description: "structured"}, func(context.Context, *mcp.CallToolRequest, args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{StructuredContent: map[string]any{"temperature": 21.5}}, nil, nil
	})
	for _, n := range []string{"loop", "panic", "client"} {
		mcp.AddTool(s, &mcp.Tool{Name: n, Description: n}, func(context.Context, *mcp.CallToolRequest, args) (*mcp.CallToolResult, any, error) {
			return text(n + " reached the upstream"), nil, nil
		})
	}
	return serveMCP(t, s)
}

// writeModule writes a module built from the repository to a temp file and
// returns its path.
func writeModule(t *testing.T, wasm []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(p, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func policyOptions(t *testing.T) Options {
	dir, err := wasmtest.CompileCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return Options{PolicyCacheDir: dir}
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return textOf(res), res.IsError
}

func TestRedactSecretsThroughGateway(t *testing.T) {
	t.Parallel()
	received := make(chan string, 1)
	up := vaultServer(t, "vault", received)
	mod := writeModule(t, wasmtest.Example(t, "redact-secrets"))
	url, g := startGateway(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q}},
		"policies": [{"name": "redact", "module": %q, "tools": ["*"], "config": {"replacement": "[REDACTED]"}}]}`, up, mod), policyOptions(t))
	cs := connect(t, url, nil)

	// In the arguments, before they leave the gateway.
	callText(t, cs, "record", map[string]any{"text": "use " + secretKey + " and mail " + secretEmail + " please"})
	got := <-received
	if strings.Contains(got, secretKey) || strings.Contains(got, secretEmail) || !strings.Contains(got, "[REDACTED]") || !strings.Contains(got, "please") {
		t.Errorf("the upstream received %q", got)
	}
	// In the result, before it reaches the client.
	txt, _ := callText(t, cs, "leak", nil)
	if strings.Contains(txt, secretKey) || strings.Contains(txt, secretEmail) || !strings.Contains(txt, "the key is [REDACTED]") {
		t.Errorf("the client received %q", txt)
	}
	// Ordinary text passes untouched.
	if txt, _ := callText(t, cs, "echo", map[string]any{"text": "order 4111 1111 1111 1112 ships"}); txt != "vault:order 4111 1111 1111 1112 ships" {
		t.Errorf("non-Luhn number changed: %q", txt)
	}
	if st := g.PolicyStatus(); len(st) != 1 || !st[0].Healthy || st[0].Calls == 0 || !strings.HasPrefix(st[0].Digest, "sha256:") {
		t.Errorf("policy status %+v", st)
	}
}

func TestToolRouterThroughGateway(t *testing.T) {
	t.Parallel()
	received := make(chan string, 1)
	us, eu := vaultServer(t, "vault", received), vaultServer(t, "vault-eu", received)
	mod := writeModule(t, wasmtest.Example(t, "tool-router"))
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q}, "vault-eu": {"url": %q, "prefix": "eu"}},
		"policies": [{"name": "router", "module": %q, "servers": ["vault"],
		  "config": {"deny": ["vault/leak"], "hide": ["record"], "rename": {"echo": "say"},
		             "route": [{"tool": "echo", "argument": "region", "equals": "eu", "server": "vault-eu"}]}}]}`, us, eu, mod), policyOptions(t))
	cs := connect(t, url, nil)

	names := toolNames(t, cs)
	if !slices.Contains(names, "say") || slices.Contains(names, "echo") || slices.Contains(names, "record") || slices.Contains(names, "leak") || !slices.Contains(names, "eu_record") {
		t.Errorf("catalogue %v: want echo renamed to say, record and the denied leak hidden (the eu server is not governed)", names)
	}
	if txt, _ := callText(t, cs, "say", map[string]any{"text": "hi", "region": "us"}); txt != "vault:hi" {
		t.Errorf("say (us) = %q", txt)
	}
	if txt, _ := callText(t, cs, "say", map[string]any{"text": "hi", "region": "eu"}); txt != "vault-eu:hi" {
		t.Errorf("say (eu) = %q, want routed to vault-eu", txt)
	}
	// A client cannot call what it cannot see.
	for _, name := range []string{"leak", "record"} {
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name}); err == nil {
			t.Errorf("hidden tool %s could be called: %q", name, textOf(res))
		}
	}
}

func TestContentNormalizerThroughGateway(t *testing.T) {
	t.Parallel()
	up := vaultServer(t, "vault", make(chan string, 1))
	mod := writeModule(t, wasmtest.Example(t, "content-normalizer"))
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q}},
		"policies": [{"name": "normalize", "module": %q, "config": {"html_to_text": true, "media_placeholder": true, "mirror_structured": true}}]}`, up, mod), policyOptions(t))
	cs := connect(t, url, nil)

	txt, _ := callText(t, cs, "html", nil)
	if strings.Contains(txt, "<") || strings.Contains(txt, "evil()") || !strings.Contains(txt, "Title") || !strings.Contains(txt, "world") {
		t.Errorf("html as text = %q", txt)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "image"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.Content[0].(*mcp.TextContent); !ok {
		t.Errorf("image block not replaced by a placeholder: %T", res.Content[0])
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "structured"})
	if err != nil {
		t.Fatal(err)
	}
	if txt := textOf(res); !strings.Contains(txt, "21.5") {
		t.Errorf("structuredContent not mirrored into text: %q", txt)
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), "21.5") {
		t.Errorf("structuredContent lost: %s", b)
	}
}

// TestHostileModuleContained: a module that loops, or panics, is stopped
// at its deadline; the call follows on_error; the gateway and the next
// calls carry on, and the module sees the caller's identity, not secrets.
func TestHostileModuleContained(t *testing.T) {
	t.Parallel()
	up := vaultServer(t, "vault", make(chan string, 1))
	mod := writeModule(t, wasmtest.Build(t, "policy/testdata/hostile/gohostile"))
	for _, tc := range []struct {
		onError string
		wantErr bool
	}{{"deny", true}, {"allow", false}} {
		t.Run("on_error="+tc.onError, func(t *testing.T) {
			url, g := startGateway(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q}},
				"policies": [{"name": "hostile", "module": %q, "on_error": %q, "timeout_ms": 100}]}`, up, mod, tc.onError), policyOptions(t))
			cs := connect(t, url, &mcp.ClientOptions{})
			for _, tool := range []string{"loop", "panic"} {
				start := time.Now()
				txt, isErr := callText(t, cs, tool, nil)
				if isErr != tc.wantErr || (tc.wantErr && !strings.Contains(txt, "hostile")) || (!tc.wantErr && txt != tool+" reached the upstream") {
					t.Errorf("%s: %q (isError %v)", tool, txt, isErr)
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("%s took %v: the deadline did not stop the module", tool, d)
				}
			}
			if txt, _ := callText(t, cs, "echo", map[string]any{"text": "after"}); txt != "vault:after" {
				t.Errorf("the next call: %q", txt)
			}
			if st := g.PolicyStatus()[0]; st.Failures < 2 {
				t.Errorf("failures not counted: %+v", st)
			}
		})
	}
	t.Run("identity", func(t *testing.T) {
		url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q, "headers": {"X-Secret": "upstream-credential"}}},
			"policies": [{"name": "hostile", "module": %q}]}`, up, mod), policyOptions(t))
		cs := connect(t, url, nil)
		txt, _ := callText(t, cs, "client", nil)
		if !strings.Contains(txt, "|edge-mcp-test|vault") || strings.Contains(txt, "upstream-credential") {
			t.Errorf("the module saw %q, want the client's name and the server", txt)
		}
	})
}
