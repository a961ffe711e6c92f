package policy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

func TestChainRewritesCompose(t *testing.T) {
	redact := load(t, "redact", ModuleOptions{})
	echo := load(t, "gohostile", ModuleOptions{})
	c := chainOf(t, OnErrorDeny, redact, echo)
	args := `{"token":"ghp_0123456789abcdefghijABCDEFGHIJ012345"}`
	d, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: "echo", Arguments: []byte(args)})
	if err != nil {
		t.Fatal(err)
	}
	// gohostile echoes what it received: the redacted arguments.
	if d.Action != Allow || string(d.Arguments) != `{"token":"[REDACTED]"}` {
		t.Fatalf("decision %+v args %s", d, d.Arguments)
	}
}

func TestChainStopsAtDenyAndRoute(t *testing.T) {
	router := load(t, "router", ModuleOptions{Config: []byte(routerConfig)})
	after := load(t, "gohostile", ModuleOptions{})
	c := chainOf(t, OnErrorDeny, router, after)
	for _, in := range []CallInput{
		{Client: Client{ID: "alice"}, Server: "files", Tool: "delete_all"},
		{Client: Client{ID: "alice"}, Server: "web", Tool: "search", Arguments: []byte(`{"region":"eu"}`)},
	} {
		d, err := c.ToolCall(context.Background(), in)
		if err != nil || d.Action == Allow || d.Module != "router" {
			t.Fatalf("%s: decision %+v, %v", in.Tool, d, err)
		}
	}
	if n := after.Stats().Calls; n != 0 {
		t.Fatalf("module after a deny/route was called %d times", n)
	}
	// An allowed call goes on to the next module, which can still deny.
	d, _ := c.ToolCall(context.Background(), CallInput{Client: Client{ID: "alice"}, Server: "web", Tool: "count"})
	if d.Action != Deny || d.Reason != "1" || d.Module != "gohostile" {
		t.Fatalf("decision %+v", d)
	}
}

func TestChainMatching(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{})
	c, err := NewChain(
		Attachment{Name: "search-only", Module: m, Tools: []string{"search*", "count"}, Servers: []string{"web-??"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		server, tool string
		match        bool
	}{
		{"web-eu", "count", true},
		{"web-eu", "search_all", true},
		{"web-europe", "count", false},
		{"web-eu", "fetch", false},
		{"files", "count", false},
	}
	for _, tt := range tests {
		got := c.Match(tt.server, tt.tool)
		if (len(got) == 1) != tt.match {
			t.Errorf("Match(%s, %s) = %d attachments, want match=%v", tt.server, tt.tool, len(got), tt.match)
		}
		d, err := c.ToolCall(context.Background(), CallInput{Server: tt.server, Tool: tt.tool})
		if err != nil {
			t.Fatal(err)
		}
		if tt.match != (d.Action == Deny && d.Module == "search-only") && tt.tool == "count" {
			t.Errorf("%s/%s: decision %+v", tt.server, tt.tool, d)
		}
	}
	if n := m.Stats().Calls; n != 2 {
		t.Fatalf("module called %d times; tools without policy must cost no call", n)
	}
	if _, err := NewChain(Attachment{Module: m, Tools: []string{""}}); err == nil {
		t.Fatal("empty glob accepted")
	}
	if _, err := NewChain(Attachment{Name: "x"}); err == nil {
		t.Fatal("attachment without module accepted")
	}
	var nilChain *Chain
	if d, err := nilChain.ToolCall(context.Background(), CallInput{Tool: "t"}); err != nil || d.Action != Allow {
		t.Fatalf("nil chain: %+v, %v", d, err)
	}
	if r, err := nilChain.ToolResult(context.Background(), ResultInput{Result: []byte(`{}`)}); err != nil || string(r) != `{}` {
		t.Fatalf("nil chain result: %s, %v", r, err)
	}
}

// toolsListWAT is a hand-assembled module whose tools_list answer is fixed.
func toolsListWAT(out string) []byte {
	return constOutput(w.PolicyModule(abi10, nil), "edge_hook_tools_list", out).Bytes()
}

func TestToolsListPatchesAndFailures(t *testing.T) {
	ctx := context.Background()
	tools := []ToolEntry{
		{Server: "a", Name: "one", Tool: json.RawMessage(`{"name":"one","description":"first","annotations":{"readOnlyHint":false,"title":"One"},"inputSchema":{"type":"object"}}`)},
		{Server: "a", Name: "two", Tool: json.RawMessage(`{"name":"two","inputSchema":{"type":"object"}}`)},
		{Server: "b", Name: "three", Tool: json.RawMessage(`{"name":"three"}`)},
	}
	patch := toolsListWAT(`{"tools":[
		{"server":"a","name":"one","rename":"uno","description":"primero","annotations":{"readOnlyHint":true,"openWorldHint":false}},
		{"server":"a","name":"two","title":"Two"},
		{"server":"b","name":"three","hide":true},
		{"server":"zzz","name":"not-shown","hide":true}]}`)
	m := loadBytes(t, "patcher", patch, ModuleOptions{MemoryMB: 4})
	c, err := NewChain(Attachment{Module: m, Servers: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ToolsList(ctx, Client{}, tools)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"name":"uno","description":"primero","annotations":{"readOnlyHint":true,"title":"One","openWorldHint":false},"inputSchema":{"type":"object"}}`,
		`{"name":"two","inputSchema":{"type":"object"},"title":"Two"}`,
		`{"name":"three"}`, // server b is not governed by this attachment
	}
	if len(got) != len(want) {
		t.Fatalf("got %d tools", len(got))
	}
	for i := range want {
		if string(got[i].Tool) != want[i] {
			t.Errorf("tool %d = %s\nwant %s", i, got[i].Tool, want[i])
		}
	}
	if got[0].Exposed != "uno" || got[1].Exposed != "" {
		t.Errorf("exposed names %q %q", got[0].Exposed, got[1].Exposed)
	}

	// Failing modules: fail closed hides what they govern, fail open
	// leaves it.
	for _, tt := range []struct {
		name string
		wasm []byte
	}{
		{"trap", w.PolicyModule(abi10, map[string][]byte{"edge_hook_tools_list": {w.OpUnreachable}}).Bytes()},
		{"bad rename", toolsListWAT(`{"tools":[{"server":"a","name":"one","rename":"bad name!"}]}`)},
		{"not a list", toolsListWAT(`{"tools":{"server":"a"}}`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := loadBytes(t, "broken", tt.wasm, ModuleOptions{MemoryMB: 4})
			for _, onErr := range []OnError{OnErrorDeny, OnErrorAllow} {
				c, _ := NewChain(Attachment{Module: m, Servers: []string{"a"}, OnError: onErr})
				got, err := c.ToolsList(ctx, Client{}, tools)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, e := range got {
					names = append(names, e.Name)
				}
				want := "one two three"
				if onErr == OnErrorDeny {
					want = "three"
				}
				if strings.Join(names, " ") != want {
					t.Fatalf("on_error %v: visible %q, want %q", onErr, names, want)
				}
			}
		})
	}
}

func TestResourceAndPromptFailuresDeny(t *testing.T) {
	trap := w.PolicyModule(abi10, map[string][]byte{
		"edge_hook_resource_result": {w.OpUnreachable},
		"edge_hook_prompt_result":   {w.OpUnreachable},
	}).Bytes()
	m := loadBytes(t, "trapper", trap, ModuleOptions{MemoryMB: 4})
	deny, allow := chainOf(t, OnErrorDeny, m), chainOf(t, OnErrorAllow, m)
	ctx := context.Background()
	res := []byte(`{"contents":[]}`)
	if _, err := deny.ResourceResult(ctx, ResourceInput{Server: "s", URI: "file:///x", Result: res}); !errors.As(err, new(*DeniedError)) {
		t.Fatalf("resource deny: %v", err)
	}
	if out, err := allow.ResourceResult(ctx, ResourceInput{Server: "s", URI: "file:///x", Result: res}); err != nil || string(out) != string(res) {
		t.Fatalf("resource allow: %s, %v", out, err)
	}
	var de *DeniedError
	if _, err := deny.PromptResult(ctx, PromptInput{Server: "s", Prompt: "p", Result: []byte(`{"messages":[]}`)}); !errors.As(err, &de) || de.Module != "trapper" || !strings.Contains(de.Error(), "trapped") {
		t.Fatalf("prompt deny: %v", err)
	}
}

func TestEvents(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1})
	c := chainOf(t, OnErrorDeny, m)
	ctx := context.Background()
	events := []struct {
		ev   Event
		want string
	}{
		{Event{Kind: EventServerConnected, Server: "web"}, "server_connected|web|||false||false|true"},
		{Event{Kind: EventToolExecuted, Server: "web", Tool: "search", Client: Client{ID: "alice"}, Duration: 12 * time.Millisecond, IsError: true, Error: "upstream said no"}, "tool_executed|web|search|alice|true|upstream said no|true|true"},
		{Event{Kind: EventServerDisconnected, Server: "web", Error: "EOF"}, "server_disconnected|web|||false|EOF|false|true"},
	}
	for _, e := range events {
		if err := c.Event(ctx, e.ev); err != nil {
			t.Fatal(err)
		}
		if d := callTool(t, m, OnErrorDeny, "lastevent"); d.Reason != e.want {
			t.Errorf("guest saw %q, want %q", d.Reason, e.want)
		}
	}
}

func TestClockGrant(t *testing.T) {
	for _, grant := range []bool{false, true} {
		m := load(t, "gohostile", ModuleOptions{PoolSize: 1, Grants: Grants{Clock: grant}})
		year, _ := strconv.Atoi(callTool(t, m, OnErrorDeny, "year").Reason)
		if real := time.Now().Year(); (year == real) != grant {
			t.Errorf("clock granted=%v: guest sees year %d (real %d)", grant, year, real)
		}
	}
}

func TestLoadChainFromSpecs(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	redactPath := write("redact.wasm", guestWasm(t, "redact"))
	routerPath := write("router.wasm", guestWasm(t, "router"))
	var specs []Spec
	if err := json.Unmarshal([]byte(`[
		{"name":"router","module":"`+routerPath+`","servers":["files","web"],"config":`+routerConfig+`,"timeout_ms":5000},
		{"name":"redact","module":"`+redactPath+`","tools":["*"],"on_error":"allow","memory_mb":32,"pool_size":1,"timeout_ms":5000}
	]`), &specs); err != nil {
		t.Fatal(err)
	}
	// An engine of its own: the shared one starts the guests' pinned
	// modules in the background, whose instances would be counted too.
	cacheDir, err := w.CompileCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	eng, err := NewEngine(context.Background(), EngineConfig{CacheDir: cacheDir, Logger: slog.New(testLog)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	c, err := eng.LoadChain(context.Background(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.ToolCall(context.Background(), CallInput{Client: Client{ID: "bob"}, Server: "web", Tool: "fetch", Arguments: []byte(`{"url":"https://x/?key=AKIAIOSFODNN7EXAMPLE"}`)})
	if err != nil || d.Action != Allow || string(d.Arguments) != `{"url":"https://x/?key=[REDACTED]"}` {
		t.Fatalf("decision %+v %s, %v", d, d.Arguments, err)
	}
	if d, _ := c.ToolCall(context.Background(), CallInput{Server: "files", Tool: "delete_all"}); d.Action != Deny || d.Module != "router" {
		t.Fatalf("decision %+v", d)
	}
	stats := c.Stats()
	if len(stats) != 2 || stats[0].Name != "router" || stats[1].Name != "redact" || stats[1].Instances != 1 {
		t.Fatalf("stats %+v", stats)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := eng.Instances(); got != 0 {
		t.Fatalf("%d instances after closing the chain, want 0", got)
	}

	bad := []struct {
		spec Spec
		want string
	}{
		{Spec{Module: redactPath}, "name is required"},
		{Spec{Name: "x"}, "module (path to a .wasm file) is required"},
		{Spec{Name: "x", Module: redactPath, OnError: "maybe"}, `on_error "maybe"`},
		{Spec{Name: "x", Module: redactPath, Grants: []string{"network"}}, `unknown grant "network"`},
		{Spec{Name: "x", Module: redactPath, MemoryMB: 100000}, "memory_mb 100000 out of range"},
		{Spec{Name: "x", Module: redactPath, TimeoutMS: -5}, "timeout_ms -5 out of range"},
		{Spec{Name: "x", Module: filepath.Join(dir, "missing.wasm")}, `policy "x": reading module`},
		{Spec{Name: "x", Module: redactPath, Config: json.RawMessage(`{"unknown":true}`)}, "configure rejected the config"},
	}
	for _, b := range bad {
		_, err := eng.LoadChain(context.Background(), []Spec{{Name: "ok", Module: routerPath, PoolSize: 1}, b.spec}, nil)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("spec %+v: err = %v, want %q", b.spec, err, b.want)
		}
		if got := eng.Instances(); got != 0 {
			t.Errorf("spec %+v: %d instances left open", b.spec, got)
		}
	}
}

func TestEngineCacheDir(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cache")
	e, err := NewEngine(ctx, EngineConfig{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir mode %v, %v; want 0700", fi.Mode(), err)
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	open := t.TempDir()
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEngine(ctx, EngineConfig{CacheDir: open}); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("world-readable cache dir accepted: %v", err)
	}
}

func TestCompileOnceAndRelease(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(ctx, EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	wasm := denyAllWasm()
	const n = 8
	mods := make([]*Module, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := e.Load(ctx, "same", wasm, ModuleOptions{MemoryMB: 4, PoolSize: 1})
			if err != nil {
				t.Error(err)
				return
			}
			mods[i] = m
		}()
	}
	wg.Wait()
	e.mu.Lock()
	entries := len(e.compiled)
	var refs int
	for _, ent := range e.compiled {
		refs = ent.refs
	}
	e.mu.Unlock()
	if entries != 1 || refs != n {
		t.Fatalf("%d compiled entries with %d refs; want 1 entry shared by %d modules", entries, refs, n)
	}
	// A different memory limit is a different runtime.
	other, err := e.Load(ctx, "bigger", wasm, ModuleOptions{MemoryMB: 8, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	for _, m := range mods {
		if m != nil {
			m.Close()
		}
	}
	e.mu.Lock()
	entries = len(e.compiled)
	e.mu.Unlock()
	if entries != 0 || e.Instances() != 0 {
		t.Fatalf("%d compiled entries and %d instances after closing every module", entries, e.Instances())
	}
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Load(ctx, "late", wasm, ModuleOptions{MemoryMB: 4}); !errors.Is(err, ErrClosed) {
		t.Fatalf("load on a closed engine: %v", err)
	}
}
