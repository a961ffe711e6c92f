package policy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

func allowAllWasm() []byte {
	return constOutput(w.PolicyModule(abi10, nil), "edge_hook_tool_call", `{"action":"allow"}`).Bytes()
}

// shadowChain builds a chain of enforcing modules followed by shadow ones.
func shadowChain(t *testing.T, onErr OnError, enforce []*Module, shadow ...*Module) *Chain {
	t.Helper()
	var atts []Attachment
	for _, m := range enforce {
		atts = append(atts, Attachment{Module: m, OnError: onErr})
	}
	for _, m := range shadow {
		atts = append(atts, Attachment{Module: m, OnError: onErr, Shadow: true})
	}
	c, err := NewChain(atts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestShadowToolCall(t *testing.T) {
	ctx := context.Background()
	in := CallInput{Client: Client{ID: "alice"}, Server: "s", Tool: "t", Arguments: []byte(`{"q":"x"}`)}
	tests := []struct {
		name      string
		enforce   func(t *testing.T) []*Module
		shadow    func(t *testing.T) *Module
		onErr     OnError
		want      Action
		diffs     uint64
		logged    string // message logged with the shadow module's name
		shadowLog string // the shadow decision as logged
	}{
		{"shadow deny, enforced allow",
			func(t *testing.T) []*Module {
				return []*Module{loadBytes(t, "enforce-allow", allowAllWasm(), ModuleOptions{MemoryMB: 4})}
			},
			func(t *testing.T) *Module {
				return loadBytes(t, "shadow-deny", denyAllWasm(), ModuleOptions{MemoryMB: 4})
			},
			OnErrorDeny, Allow, 1, "policy shadow decision differs",
			`shadow={"action":"deny","reason":"denied by a hand-assembled module"}`},
		{"shadow identical to enforced",
			func(t *testing.T) []*Module {
				return []*Module{loadBytes(t, "enforce-deny", denyAllWasm(), ModuleOptions{MemoryMB: 4})}
			},
			func(t *testing.T) *Module {
				return loadBytes(t, "shadow-deny-too", denyAllWasm(), ModuleOptions{MemoryMB: 4})
			},
			OnErrorDeny, Deny, 0, "policy shadow decision matches", ""},
		{"shadow rewrite is a difference",
			func(t *testing.T) []*Module { return nil },
			func(t *testing.T) *Module {
				return loadBytes(t, "shadow-echo", constOutput(w.PolicyModule(abi10, nil), "edge_hook_tool_call", `{"action":"rewrite","arguments":{"q":"y"}}`).Bytes(), ModuleOptions{MemoryMB: 4})
			},
			OnErrorDeny, Allow, 1, "policy shadow decision differs", `shadow={"action":"allow","arguments":{"q":"y"}}`},
		{"shadow rewrite to equal arguments is no difference",
			func(t *testing.T) []*Module { return nil },
			func(t *testing.T) *Module {
				return loadBytes(t, "shadow-same-args", constOutput(w.PolicyModule(abi10, nil), "edge_hook_tool_call", `{"action":"rewrite","arguments":{ "q" : "x" }}`).Bytes(), ModuleOptions{MemoryMB: 4})
			},
			OnErrorDeny, Allow, 0, "policy shadow decision matches", ""},
		{"failing shadow with on_error deny",
			func(t *testing.T) []*Module {
				return []*Module{loadBytes(t, "enforce-allow-2", allowAllWasm(), ModuleOptions{MemoryMB: 4})}
			},
			func(t *testing.T) *Module {
				return loadBytes(t, "shadow-trap", hostileWAT([]byte{w.OpUnreachable}), ModuleOptions{MemoryMB: 4, PoolSize: 1})
			},
			OnErrorDeny, Allow, 1, "policy shadow decision differs", `shadow={"action":"deny","reason":"policy \"shadow-trap\" failed (policy module trapped)"}`},
		{"failing shadow with on_error allow",
			func(t *testing.T) []*Module { return nil },
			func(t *testing.T) *Module {
				return loadBytes(t, "shadow-trap-open", hostileWAT([]byte{w.OpUnreachable}), ModuleOptions{MemoryMB: 4, PoolSize: 1})
			},
			OnErrorAllow, Allow, 0, "policy shadow decision matches", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enforce, shadow := tt.enforce(t), tt.shadow(t)
			c := shadowChain(t, tt.onErr, enforce, shadow)
			if !c.Hooks().Has(HookToolCall) {
				t.Fatal("chain does not report tool_call")
			}
			d, err := c.ToolCall(ctx, in)
			if err != nil || d.Action != tt.want {
				t.Fatalf("decision %+v, %v; want %v", d, err, tt.want)
			}
			if d.Action == Deny && d.Module == shadow.Name() {
				t.Fatal("the shadow module decided")
			}
			if err := c.Close(); err != nil { // waits for the shadow run
				t.Fatal(err)
			}
			s := c.Stats()[len(enforce)]
			if !s.Shadow || s.ShadowRuns != 1 || s.ShadowDiffs != tt.diffs || s.ShadowSkipped != 0 || s.Calls != 1 {
				t.Fatalf("shadow stats %+v", s)
			}
			for _, e := range c.Stats()[:len(enforce)] {
				if e.Shadow || e.ShadowRuns != 0 {
					t.Fatalf("enforcing stats %+v", e)
				}
			}
			logs := testLog.find(tt.logged, "module="+shadow.Name()+" ", "hook=tool_call", "subject=s/t", "enforced={")
			if len(logs) == 0 {
				t.Fatalf("no %q logged", tt.logged)
			}
			last := logs[len(logs)-1]
			if !strings.Contains(last, tt.shadowLog) {
				t.Fatalf("log %q lacks %s", last, tt.shadowLog)
			}
			if tt.diffs > 0 && !strings.HasPrefix(last, "INFO ") || tt.diffs == 0 && !strings.HasPrefix(last, "DEBUG ") {
				t.Fatalf("log level: %q", last)
			}
		})
	}
}

func TestShadowOnlyChain(t *testing.T) {
	ctx := context.Background()
	deny := loadBytes(t, "shadow-only", denyAllWasm(), ModuleOptions{MemoryMB: 4})
	c := shadowChain(t, OnErrorDeny, nil, deny)
	if c.Hooks() != 1<<HookToolCall {
		t.Fatalf("hooks %v: a shadow-only chain must still be called", c.Hooks())
	}
	for range 5 {
		if d, err := c.ToolCall(ctx, CallInput{Server: "s", Tool: "t"}); err != nil || d.Action != Allow {
			t.Fatalf("decision %+v, %v", d, err)
		}
	}
	c.Close()
	if s := deny.Stats(); s.ShadowRuns != 5 || s.ShadowDiffs != 5 {
		t.Fatalf("stats %+v", s)
	}
	// Once closed, the chain starts no more shadow runs.
	if d, _ := c.ToolCall(ctx, CallInput{Server: "s", Tool: "t"}); d.Action != Allow {
		t.Fatalf("decision %+v", d)
	}
	if s := deny.Stats(); s.ShadowRuns != 5 || s.ShadowSkipped != 0 || s.Calls != 5 {
		t.Fatalf("stats after close %+v", s)
	}
}

func TestShadowResults(t *testing.T) {
	ctx := context.Background()
	secret := textResult("token ghp_0123456789abcdefghijABCDEFGHIJ012345")
	redact := load(t, "redact", ModuleOptions{PoolSize: 1})
	trap := loadBytes(t, "shadow-result-trap", w.PolicyModule(abi10, map[string][]byte{
		"edge_hook_resource_result": {w.OpUnreachable},
		"edge_hook_prompt_result":   {w.OpUnreachable},
	}).Bytes(), ModuleOptions{MemoryMB: 4, PoolSize: 1})

	c := shadowChain(t, OnErrorDeny, nil, redact, trap)
	for _, h := range []Hook{HookToolResult, HookResourceResult, HookPromptResult} {
		if !c.Hooks().Has(h) {
			t.Fatalf("hooks %v lack %v", c.Hooks(), h)
		}
	}
	out, err := c.ToolResult(ctx, ResultInput{Server: "s", Tool: "t", Result: secret})
	if err != nil || string(out) != string(secret) {
		t.Fatalf("a shadow module changed the result: %s, %v", out, err)
	}
	res := json.RawMessage(`{"contents":[{"uri":"file:///a","text":"plain"}]}`)
	out, err = c.ResourceResult(ctx, ResourceInput{Server: "s", URI: "file:///a", Result: res})
	if err != nil || string(out) != string(res) {
		t.Fatalf("a failing shadow module with on_error deny withheld the resource: %s, %v", out, err)
	}
	c.Close()
	// redact-secrets: rewrote the secret (a difference), left the resource
	// alone (no difference). The trap: would have withheld the resource.
	if s := redact.Stats(); s.ShadowRuns != 2 || s.ShadowDiffs != 1 {
		t.Fatalf("redact stats %+v", s)
	}
	if s := trap.Stats(); s.ShadowRuns != 1 || s.ShadowDiffs != 1 || s.Failures != 1 {
		t.Fatalf("trap stats %+v", s)
	}
	if logs := testLog.find("policy shadow decision differs", "module=shadow-result-trap ", "hook=resource_result", `shadow={"withheld":"policy \"shadow-result-trap\" failed (policy module trapped)"}`); len(logs) == 0 {
		t.Fatalf("logs %q", logs)
	}

	// An enforced module that fails closed, shadowed by the same result:
	// enforced withheld, shadow withheld: no difference.
	trap2 := loadBytes(t, "shadow-result-trap-2", w.PolicyModule(abi10, map[string][]byte{
		"edge_hook_prompt_result": {w.OpUnreachable},
	}).Bytes(), ModuleOptions{MemoryMB: 4, PoolSize: 1})
	trap3 := loadBytes(t, "shadow-result-trap-3", w.PolicyModule(abi10, map[string][]byte{
		"edge_hook_prompt_result": {w.OpUnreachable},
	}).Bytes(), ModuleOptions{MemoryMB: 4, PoolSize: 1})
	c2 := shadowChain(t, OnErrorDeny, []*Module{trap2}, trap3)
	_, err = c2.PromptResult(ctx, PromptInput{Server: "s", Prompt: "p", Result: []byte(`{"messages":[]}`)})
	if !errors.As(err, new(*DeniedError)) {
		t.Fatalf("err = %v", err)
	}
	c2.Close()
	if s := trap3.Stats(); s.ShadowRuns != 1 || s.ShadowDiffs != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestShadowToolsList(t *testing.T) {
	ctx := context.Background()
	router := load(t, "router", ModuleOptions{Config: []byte(routerConfig), PoolSize: 1})
	c := shadowChain(t, OnErrorDeny, nil, router)
	in := catalogue()
	out, err := c.ToolsList(ctx, Client{ID: "alice"}, in)
	if err != nil || strings.Join(visible(out), " ") != strings.Join(visible(in), " ") {
		t.Fatalf("a shadow module changed the catalogue: %q, %v", visible(out), err)
	}
	// The same router enforced answers the same: no difference.
	enforced := load(t, "router", ModuleOptions{Config: []byte(routerConfig), PoolSize: 1})
	c2 := shadowChain(t, OnErrorDeny, []*Module{enforced}, router)
	if _, err := c2.ToolsList(ctx, Client{ID: "alice"}, catalogue()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c2.Close()
	if s := router.Stats(); s.ShadowRuns != 2 || s.ShadowDiffs != 1 {
		t.Fatalf("stats %+v", s)
	}
	logs := testLog.find("policy shadow decision differs", "module=router", "hook=tools_list",
		`{"server":"files","name":"read","exposed":"read_file"}`, `{"server":"files","name":"delete_all","exposed":"delete_all"}`)
	if len(logs) == 0 {
		t.Fatal("difference not logged with both catalogues")
	}
}

func TestShadowEvents(t *testing.T) {
	ctx := context.Background()
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1})
	c := shadowChain(t, OnErrorDeny, nil, m)
	if err := c.Event(ctx, Event{Kind: EventServerConnected, Server: "web"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if s := m.Stats(); s.ShadowRuns != 1 || s.ShadowDiffs != 0 {
		t.Fatalf("stats %+v", s)
	}
	if d := callTool(t, m, OnErrorDeny, "lastevent"); !strings.HasPrefix(d.Reason, "server_connected|web|") {
		t.Fatalf("the shadow module did not get the event: %q", d.Reason)
	}
}

// holdInstance keeps the only instance of m busy in a looping call until
// the returned function is called.
func holdInstance(t *testing.T, m *Module) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := m.call(ctx, HookToolCall, []byte(`{"server":"s","tool":"loop","arguments":{}}`))
		done <- err
	}()
	waitFor(t, "instance taken", 5*time.Second, func() bool { return len(m.free) == 0 })
	return func() {
		cancel()
		if err := <-done; !errors.Is(err, ErrCanceled) {
			t.Errorf("held call: %v", err)
		}
	}
}

func TestShadowBoundedAndCloseWaits(t *testing.T) {
	ctx := context.Background()
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1, Timeout: 10 * time.Second, MaxWait: 10 * time.Second, MaxShadowPending: 2})
	c := shadowChain(t, OnErrorDeny, nil, m)
	release := holdInstance(t, m)
	for range 5 {
		if d, err := c.ToolCall(ctx, CallInput{Server: "s", Tool: "ok"}); err != nil || d.Action != Allow {
			t.Fatalf("decision %+v, %v", d, err)
		}
	}
	// Two runs wait for the instance; the other three were skipped, and the
	// request path never waited.
	if s := m.Stats(); s.ShadowSkipped != 3 || s.ShadowRuns != 0 {
		t.Fatalf("stats %+v", s)
	}
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while shadow runs were pending")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	<-closed
	if s := m.Stats(); s.ShadowRuns != 2 || s.ShadowDiffs != 0 || s.ShadowSkipped != 3 {
		t.Fatalf("stats after Close %+v", s)
	}
}

func TestShadowRunsEndWithTheirModule(t *testing.T) {
	ctx := context.Background()
	m, err := testEngine.Load(ctx, "shadow-closing", guestWasm(t, "gohostile"), ModuleOptions{PoolSize: 1, Timeout: 10 * time.Second, MaxWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := shadowChain(t, OnErrorDeny, nil, m) // does not own m
	release := holdInstance(t, m)
	for range 3 {
		c.ToolCall(ctx, CallInput{Server: "s", Tool: "ok"})
	}
	m.shadows.mu.Lock()
	pending := m.shadows.pending
	m.shadows.mu.Unlock()
	if pending != 3 {
		t.Fatalf("%d shadow runs pending, want 3", pending)
	}
	release()
	m.Close()
	m.shadows.mu.Lock()
	pending = m.shadows.pending
	m.shadows.mu.Unlock()
	if pending != 0 {
		t.Fatalf("%d shadow runs outlived their module", pending)
	}
	// Runs cut short by Close compare nothing.
	if s := m.Stats(); s.ShadowDiffs != 0 || s.Instances != 0 {
		t.Fatalf("stats %+v", s)
	}
	// New shadow runs of a closed module are not started.
	c.ToolCall(ctx, CallInput{Server: "s", Tool: "ok"})
	if s := m.Stats(); s.ShadowSkipped != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestSpecMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "deny.wasm")
	if err := os.WriteFile(path, denyAllWasm(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (&Spec{Name: "x", Module: path, Mode: "audit"}).Validate(); err == nil || !strings.Contains(err.Error(), `mode "audit"`) {
		t.Fatalf("err = %v", err)
	}
	var specs []Spec
	if err := json.Unmarshal([]byte(`[
		{"name":"enforced","module":"`+path+`","memory_mb":4,"tools":["enforced_*"],"mode":"enforce"},
		{"name":"watching","module":"`+path+`","memory_mb":4,"mode":"shadow"}
	]`), &specs); err != nil {
		t.Fatal(err)
	}
	before := testEngine.Instances()
	c, err := testEngine.LoadChain(context.Background(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"enforced_x", "other"} {
		d, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: tool})
		if err != nil || (d.Action == Deny) != (tool == "enforced_x") || (d.Action == Deny && d.Module != "enforced") {
			t.Fatalf("%s: decision %+v, %v", tool, d, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st[0].Shadow || !st[1].Shadow || st[1].ShadowRuns != 2 || st[1].ShadowDiffs != 1 {
		t.Fatalf("stats %+v", st)
	}
	if got := testEngine.Instances(); got != before {
		t.Fatalf("%d instances left", got-before)
	}
}

// BenchmarkToolCallShadow measures the request path of a call with a
// shadow attachment next to an enforcing one: the shadow run happens on a
// goroutine, so only its setup is on the path.
func BenchmarkToolCallShadow(b *testing.B) {
	ctx := context.Background()
	enforce := loadBytes(b, "deny-all", denyAllWasm(), ModuleOptions{MemoryMB: 4, Timeout: 50 * time.Millisecond})
	shadow := loadBytes(b, "shadow-deny", denyAllWasm(), ModuleOptions{MemoryMB: 4, Timeout: 50 * time.Millisecond, MaxShadowPending: 1 << 20})
	c, err := NewChain(Attachment{Module: enforce}, Attachment{Module: shadow, Shadow: true})
	if err != nil {
		b.Fatal(err)
	}
	in := CallInput{Client: Client{ID: "alice"}, Server: "s", Tool: "t", Arguments: json.RawMessage(`{"query":"weather in Paris","limit":5}`)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.ToolCall(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.Close()
}
