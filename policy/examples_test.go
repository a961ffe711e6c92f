package policy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// Secrets of each kind the redact-secrets module knows, as they appear in
// the wild (all are well-known examples or random, none is live).
var secretSamples = []struct {
	kind, text, secret string
}{
	{"openai", "use key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234 for the call", "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234"},
	{"stripe", "STRIPE=sk_live_51HabcdefghijklmnopQRST1234", "sk_live_51HabcdefghijklmnopQRST1234"},
	{"github classic", "token: ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_0123456789abcdefghijABCDEFGHIJ012345"},
	{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz is mine", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"},
	{"slack", "slack xoxb-123456789012-123456789012-AbCdEfGhIjKlMnOpQrStUvWx ok", "xoxb-123456789012-123456789012-AbCdEfGhIjKlMnOpQrStUvWx"},
	{"aws", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n", "AKIAIOSFODNN7EXAMPLE"},
	{"google", "key=AIzaSyA-1234567890abcdefghijklmnopqrstu&q=1", "AIzaSyA-1234567890abcdefghijklmnopqrstu"},
	{"bearer", "Authorization: Bearer abcdef0123456789abcdef0123456789", "abcdef0123456789abcdef0123456789"},
	{"jwt", "session eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"},
	{"pem", "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn\n/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n-----END RSA PRIVATE KEY-----\ndone", "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn"},
	{"email", "write to jane.doe+work@example.co.uk today", "jane.doe+work@example.co.uk"},
	{"visa", "card 4111 1111 1111 1111 exp 12/30", "4111 1111 1111 1111"},
	{"mastercard", "card 5500-0000-0000-0004.", "5500-0000-0000-0004"},
	{"amex", "amex 378282246310005", "378282246310005"},
}

// pngData is base64 image data: binary payloads must pass untouched.
var pngData = func() string {
	b := []byte("\x89PNG\r\n\x1a\n")
	for i := 0; i < 3000; i++ {
		b = append(b, byte(i*7919>>3))
	}
	return base64.StdEncoding.EncodeToString(b)
}()

// Ordinary text that must pass untouched.
var innocentTexts = []string{
	"The task-management tool is great; see sk-learn docs and the ghp_ prefix.",
	"order 4111111111111112 fails the Luhn check; epoch 1700000000000 starts with 1",
	"AKIA is the prefix of AWS key ids, AIza of Google keys, eyJ of base64 JSON.",
	"Bearer tokens are short-lived. Mail user@localhost or a@b.c for help.",
	"version 2.0.1, phone 555-0100, ISBN 978-3-16-148410-0, 10 < 20 && 30 > 4",
	"日本語のテキストと emoji 🎉 stay as they are",
}

func TestRedactSecretsInArguments(t *testing.T) {
	m := load(t, "redact", ModuleOptions{})
	c := chainOf(t, OnErrorDeny, m)
	for _, s := range secretSamples {
		t.Run(s.kind, func(t *testing.T) {
			args := cfg(t, map[string]any{"query": s.text, "nested": map[string]any{"list": []any{1, s.text, true}}})
			d, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: "t", Arguments: args})
			if err != nil || d.Action != Allow || d.Arguments == nil {
				t.Fatalf("decision %+v, %v: want an allowed rewrite", d, err)
			}
			if strings.Contains(string(d.Arguments), s.secret) {
				t.Fatalf("secret survived: %s", d.Arguments)
			}
			var got struct {
				Query  string
				Nested struct{ List []any }
			}
			if err := json.Unmarshal(d.Arguments, &got); err != nil {
				t.Fatalf("rewritten arguments are not JSON: %v: %s", err, d.Arguments)
			}
			if !strings.Contains(got.Query, "[REDACTED]") || got.Nested.List[1] != got.Query || got.Nested.List[0] != 1.0 {
				t.Fatalf("rewritten arguments %s", d.Arguments)
			}
		})
	}
	t.Run("no false positives", func(t *testing.T) {
		for _, text := range innocentTexts {
			args := cfg(t, map[string]any{"q": text})
			d, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: "t", Arguments: args})
			if err != nil || d.Action != Allow || d.Arguments != nil {
				t.Errorf("%q: decision %+v (%s), %v", text, d, d.Arguments, err)
			}
		}
	})
}

func TestRedactSecretsInResults(t *testing.T) {
	m := load(t, "redact", ModuleOptions{})
	c := chainOf(t, OnErrorDeny, m)
	var all []string
	for _, s := range secretSamples {
		all = append(all, s.text)
	}
	result := cfg(t, map[string]any{
		"content": []any{
			map[string]any{"type": "text", "text": strings.Join(all, "\n")},
			map[string]any{"type": "image", "mimeType": "image/png", "data": pngData},
		},
		"structuredContent": map[string]any{"config": map[string]any{"token": "ghp_0123456789abcdefghijABCDEFGHIJ012345", "count": 3}},
		"isError":           false,
	})
	out, err := c.ToolResult(context.Background(), ResultInput{Server: "s", Tool: "t", Result: result})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Content []struct {
			Type, Text, Data string
		}
		StructuredContent struct {
			Config struct {
				Token string
				Count int
			}
		}
		IsError bool
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, s := range secretSamples {
		if strings.Contains(r.Content[0].Text, s.secret) {
			t.Errorf("%s secret survived in text content", s.kind)
		}
	}
	if got := strings.Count(r.Content[0].Text, "[REDACTED]"); got != len(secretSamples) {
		t.Errorf("%d redactions in %q, want %d", got, r.Content[0].Text, len(secretSamples))
	}
	if !strings.Contains(r.Content[0].Text, "Authorization: Bearer [REDACTED]") || !strings.Contains(r.Content[0].Text, "key:\n[REDACTED]\ndone") {
		t.Errorf("context around secrets not kept: %q", r.Content[0].Text)
	}
	if r.StructuredContent.Config.Token != "[REDACTED]" || r.StructuredContent.Config.Count != 3 {
		t.Errorf("structuredContent %+v", r.StructuredContent)
	}
	if r.Content[1].Data != pngData {
		t.Errorf("binary payload (data) was modified: %q", r.Content[1].Data)
	}

	// A clean result comes back as the very same bytes.
	clean := textResult(innocentTexts...)
	out, err = c.ToolResult(context.Background(), ResultInput{Server: "s", Tool: "t", Result: clean})
	if err != nil || string(out) != string(clean) {
		t.Fatalf("clean result changed: %s, %v", out, err)
	}
}

func TestRedactSecretsConfig(t *testing.T) {
	m := load(t, "redact", ModuleOptions{Config: []byte(`{
		"replacement": "<{kind}>",
		"disable": ["email"],
		"tokens": [{"prefix": "xai-", "min_length": 20}],
		"literals": ["corp.internal"]
	}`)})
	c := chainOf(t, OnErrorDeny, m)
	in := "key xai-ABCDEFGHIJKLMNOPQRSTUVWXYZ host db.corp.internal mail bob@example.com aws AKIAIOSFODNN7EXAMPLE"
	out, err := c.ToolResult(context.Background(), ResultInput{Server: "s", Tool: "t", Result: textResult(in)})
	if err != nil {
		t.Fatal(err)
	}
	want := "key <custom> host db.<custom> mail bob@example.com aws <api_key>"
	if got := texts(t, out); len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{`{"disable":["nonsense"]}`, `{"unknown":1}`, `{"tokens":[{"prefix":""}]}`, `{"tokens":[{"prefix":"a","charset":"klingon"}]}`} {
		if _, err := testEngine.Load(context.Background(), "redact", guestWasm(t, "redact"), ModuleOptions{Config: []byte(bad)}); err == nil || !strings.Contains(err.Error(), "configure rejected") {
			t.Errorf("config %s: err = %v", bad, err)
		}
	}
}

func TestRedactResourcesAndPrompts(t *testing.T) {
	m := load(t, "redact", ModuleOptions{})
	c := chainOf(t, OnErrorDeny, m)
	res, err := c.ResourceResult(context.Background(), ResourceInput{Server: "s", URI: "file:///etc/app.env",
		Result: []byte(`{"contents":[{"uri":"file:///etc/app.env","mimeType":"text/plain","text":"TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ012345\n"}]}`)})
	if err != nil || strings.Contains(string(res), "ghp_") || !strings.Contains(string(res), `TOKEN=[REDACTED]\n`) {
		t.Fatalf("resource: %s, %v", res, err)
	}
	res, err = c.PromptResult(context.Background(), PromptInput{Server: "s", Prompt: "p",
		Result: []byte(`{"messages":[{"role":"user","content":{"type":"text","text":"my mail is a.b@example.org"}}]}`)})
	if err != nil || strings.Contains(string(res), "a.b@example.org") {
		t.Fatalf("prompt: %s, %v", res, err)
	}
}

const routerConfig = `{
	"deny": ["delete_*"],
	"hide": ["debug_*"],
	"rename": {"search": "web_search", "files/read": "read_file"},
	"clients": [{"id": "intern-*", "allow": ["search", "files/read"]}],
	"route": [
		{"tool": "search", "argument": "region", "equals": "eu", "server": "search-eu"},
		{"tool": "search", "argument": "tier", "equals": 2, "server": "search-premium", "to_tool": "search_v2"}
	]
}`

func catalogue() []ToolEntry {
	mk := func(server, name string) ToolEntry {
		return ToolEntry{Server: server, Name: name, Tool: json.RawMessage(`{"name":"` + name + `","description":"the ` + name + ` tool","inputSchema":{"type":"object"}}`)}
	}
	return []ToolEntry{mk("files", "read"), mk("files", "delete_all"), mk("web", "search"), mk("web", "debug_dump"), mk("web", "fetch")}
}

func visible(list []ToolEntry) []string {
	var out []string
	for _, e := range list {
		name := e.Name
		if e.Exposed != "" {
			name += "->" + e.Exposed
			if toolNameOf(e.Tool) != e.Exposed {
				name += "(definition not renamed)"
			}
		}
		out = append(out, e.Server+"/"+name)
	}
	return out
}

func TestToolRouterCatalogue(t *testing.T) {
	m := load(t, "router", ModuleOptions{Config: []byte(routerConfig)})
	c := chainOf(t, OnErrorDeny, m)
	tests := []struct {
		client Client
		want   string
	}{
		{Client{ID: "alice"}, "files/read->read_file web/search->web_search web/fetch"},
		{Client{ID: "intern-bob"}, "files/read->read_file web/search->web_search"},
		{Client{}, "files/read->read_file web/search->web_search web/fetch"},
	}
	for _, tt := range tests {
		t.Run(tt.client.ID, func(t *testing.T) {
			in := catalogue()
			got, err := c.ToolsList(context.Background(), tt.client, in)
			if err != nil {
				t.Fatal(err)
			}
			if s := strings.Join(visible(got), " "); s != tt.want {
				t.Fatalf("visible tools %q, want %q", s, tt.want)
			}
			if visible(in)[0] != "files/read" {
				t.Fatal("ToolsList modified its input")
			}
		})
	}
	got, _ := c.ToolsList(context.Background(), Client{ID: "alice"}, catalogue())
	var def map[string]any
	if err := json.Unmarshal(got[0].Tool, &def); err != nil || def["name"] != "read_file" || def["description"] != "the read tool" || def["inputSchema"] == nil {
		t.Fatalf("renamed definition %s", got[0].Tool)
	}
}

func TestToolRouterCalls(t *testing.T) {
	m := load(t, "router", ModuleOptions{Config: []byte(routerConfig)})
	c := chainOf(t, OnErrorDeny, m)
	tests := []struct {
		name   string
		client string
		server string
		tool   string
		args   string
		want   Decision
	}{
		{"allowed", "alice", "web", "fetch", `{}`, Decision{Action: Allow}},
		{"denied everywhere", "alice", "files", "delete_all", `{}`, Decision{Action: Deny, Reason: "tool delete_all is not allowed for alice", Module: "router"}},
		{"not on the intern allow list", "intern-bob", "web", "fetch", `{}`, Decision{Action: Deny, Reason: "tool fetch is not allowed for intern-bob", Module: "router"}},
		{"intern allowed", "intern-bob", "files", "read", `{}`, Decision{Action: Allow}},
		{"hidden but callable", "alice", "web", "debug_dump", `{}`, Decision{Action: Allow}},
		{"route by string", "alice", "web", "search", `{"q":"x","region":"eu"}`, Decision{Action: Route, Server: "search-eu", Module: "router"}},
		{"no route", "alice", "web", "search", `{"q":"x","region":"us"}`, Decision{Action: Allow}},
		{"route by number", "alice", "web", "search", `{"tier":2}`, Decision{Action: Route, Server: "search-premium", Tool: "search_v2", Module: "router"}},
		{"number must match", "alice", "web", "search", `{"tier":"2"}`, Decision{Action: Allow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := c.ToolCall(context.Background(), CallInput{Client: Client{ID: tt.client}, Server: tt.server, Tool: tt.tool, Arguments: []byte(tt.args)})
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != tt.want.Action || d.Reason != tt.want.Reason || d.Server != tt.want.Server || d.Tool != tt.want.Tool || d.Module != tt.want.Module || d.Arguments != nil {
				t.Fatalf("decision %+v, want %+v", d, tt.want)
			}
		})
	}
}

func TestContentNormalizer(t *testing.T) {
	ctx := context.Background()
	m := load(t, "normalizer", ModuleOptions{Config: []byte(`{"max_text_bytes": 2000, "media_placeholder": true}`)})
	c := chainOf(t, OnErrorDeny, m)
	run := func(t *testing.T, result string) json.RawMessage {
		t.Helper()
		out, err := c.ToolResult(ctx, ResultInput{Server: "s", Tool: "t", Result: []byte(result)})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkToolResult(out); err != nil {
			t.Fatalf("normalized result has a bad shape: %v: %s", err, out)
		}
		return out
	}
	t.Run("html to markdown", func(t *testing.T) {
		html := `<!DOCTYPE html><html><head><title>x</title><style>.a{color:red}</style></head><body>
			<h1>Weather</h1><p>Today is <b>sunny</b> &amp; warm. See <a href="https://example.com/w">details</a>.</p>
			<ul><li>Morning: 12&deg;C</li><li>Noon: 21&#176;C</li></ul><script>alert("x")</script><!-- hidden --></body></html>`
		out := run(t, string(textResult(html)))
		want := "# Weather\n\nToday is **sunny** & warm. See [details](https://example.com/w).\n\n- Morning: 12°C\n- Noon: 21°C"
		if got := texts(t, out); len(got) != 1 || got[0] != want {
			t.Fatalf("got %q\nwant %q", got, want)
		}
	})
	t.Run("truncation note", func(t *testing.T) {
		out := run(t, string(textResult(strings.Repeat("a", 1500), strings.Repeat("b", 1500), strings.Repeat("c", 100))))
		got := texts(t, out)
		if len(got) != 2 || got[0] != strings.Repeat("a", 1500) || !strings.HasPrefix(got[1], strings.Repeat("b", 500)+"\n\n[truncated") {
			t.Fatalf("got %d blocks: %.80q", len(got), got)
		}
		if !strings.Contains(got[1], "kept 2000 of 3100 bytes of text, 1100 bytes cut, 1 text block(s) dropped]") {
			t.Fatalf("note: %q", got[1][500:])
		}
	})
	t.Run("media placeholder", func(t *testing.T) {
		out := run(t, `{"content":[{"type":"text","text":"chart:"},{"type":"image","mimeType":"image/png","data":"iVBORw0KGgo="},{"type":"audio","mimeType":"audio/wav","data":"AAAA"}]}`)
		got := texts(t, out)
		if len(got) != 3 || got[1] != "[image omitted: image/png, 8 bytes]" || got[2] != "[audio omitted: audio/wav, 3 bytes]" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("structuredContent mirrored", func(t *testing.T) {
		out := run(t, `{"content":[],"structuredContent":{"temp":21,"unit":"C"}}`)
		if got := texts(t, out); len(got) != 1 || got[0] != `{"temp":21,"unit":"C"}` {
			t.Fatalf("got %q (%s)", got, out)
		}
		if !strings.Contains(string(out), `"structuredContent":{"temp":21,"unit":"C"}`) {
			t.Fatalf("structuredContent lost: %s", out)
		}
	})
	t.Run("unchanged result keeps its bytes", func(t *testing.T) {
		in := `{"content":[{"type":"text","text":"plain <3 text"}],"structuredContent":{"a":1}}`
		if out := run(t, in); string(out) != in {
			t.Fatalf("got %s", out)
		}
	})
	t.Run("html resource", func(t *testing.T) {
		out, err := c.ResourceResult(ctx, ResourceInput{Server: "s", URI: "https://x/y", Result: []byte(`{"contents":[{"uri":"https://x/y","mimeType":"text/html","text":"<p>Hi <i>there</i></p>"}]}`)})
		if err != nil || string(out) != `{"contents":[{"uri":"https://x/y","mimeType":"text/markdown","text":"Hi _there_"}]}` {
			t.Fatalf("got %s, %v", out, err)
		}
	})
}
