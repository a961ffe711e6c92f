package policy

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// Go guests used by the tests, by short name.
var guestDirs = map[string]string{
	"redact":     "wasm-examples/redact-secrets",
	"router":     "wasm-examples/tool-router",
	"normalizer": "wasm-examples/content-normalizer",
	"gohostile":  "policy/testdata/hostile/gohostile",
}

// testEngine is shared by the tests so that each Go guest compiles once per
// test binary (and, thanks to the persistent cache directory, once per
// machine). Each guest stays pinned by one loaded module so its compiled
// code is not released between tests.
var (
	testEngine *Engine
	testLog    = &logCapture{}
	guests     = map[string]*guestFixture{}
)

type guestFixture struct {
	once sync.Once
	wasm []byte
	pin  *Module
	err  error
}

func TestMain(m *testing.M) {
	flag.Parse()
	ctx := context.Background()
	cacheDir, err := wasmtest.CompileCacheDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testEngine, err = NewEngine(ctx, EngineConfig{CacheDir: cacheDir, Logger: slog.New(testLog)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name := range guestDirs {
		guests[name] = &guestFixture{}
	}
	// Build and compile every guest in the background while the first
	// tests run; a test needing one waits only for that one. Not when
	// fuzzing or benchmarking, where it would only add noise.
	if flagUnset("test.fuzz") && flagUnset("test.bench") {
		for name := range guestDirs {
			go guests[name].load(name)
		}
	}
	code := m.Run()
	for _, g := range guests {
		if g.pin != nil {
			_ = g.pin.Close()
		}
	}
	_ = testEngine.Close(ctx)
	os.Exit(code)
}

func flagUnset(name string) bool {
	f := flag.Lookup(name)
	return f == nil || f.Value.String() == ""
}

func (g *guestFixture) load(name string) {
	g.once.Do(func() {
		g.wasm, g.err = wasmtest.BuildPackage(guestDirs[name])
		if g.err != nil {
			return
		}
		g.pin, g.err = testEngine.Load(context.Background(), "pin-"+name, g.wasm, ModuleOptions{PoolSize: 1})
	})
}

// guestWasm returns the bytes of a Go guest, building it if needed.
func guestWasm(t testing.TB, name string) []byte {
	t.Helper()
	g := guests[name]
	if g == nil {
		t.Fatalf("unknown guest %q", name)
	}
	g.load(name)
	if g.err != nil {
		t.Fatalf("preparing guest %s: %v", name, g.err)
	}
	return g.wasm
}

// load loads a Go guest into the shared engine and closes it with the test.
func load(t testing.TB, guest string, opts ModuleOptions) *Module {
	t.Helper()
	return loadBytes(t, guest, guestWasm(t, guest), opts)
}

func loadBytes(t testing.TB, name string, wasm []byte, opts ModuleOptions) *Module {
	t.Helper()
	if opts.Timeout == 0 {
		// Generous unless a test is about deadlines: CI machines can be
		// slow, and a spurious timeout would fail an unrelated test.
		opts.Timeout = 5 * time.Second
	}
	m, err := testEngine.Load(context.Background(), name, wasm, opts)
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// chainOf attaches modules to every tool with the given on_error.
func chainOf(t testing.TB, onErr OnError, mods ...*Module) *Chain {
	t.Helper()
	atts := make([]Attachment, len(mods))
	for i, m := range mods {
		atts[i] = Attachment{Module: m, OnError: onErr}
	}
	c, err := NewChain(atts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func cfg(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// textResult builds a CallToolResult with text blocks.
func textResult(texts ...string) json.RawMessage {
	type block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	r := struct {
		Content []block `json:"content"`
	}{}
	for _, s := range texts {
		r.Content = append(r.Content, block{"text", s})
	}
	b, _ := json.Marshal(r)
	return b
}

// texts extracts the text blocks of a CallToolResult.
func texts(t testing.TB, raw json.RawMessage) []string {
	t.Helper()
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	var out []string
	for _, c := range r.Content {
		if c.Type == "text" {
			out = append(out, c.Text)
		}
	}
	return out
}

// logCapture is a slog.Handler that keeps records for assertions.
type logCapture struct {
	mu      sync.Mutex
	records []string
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	l.mu.Lock()
	if len(l.records) < 100_000 {
		l.records = append(l.records, b.String())
	}
	l.mu.Unlock()
	return nil
}

func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

// find returns the records containing all of the substrings.
func (l *logCapture) find(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, r := range l.records {
		for _, s := range subs {
			if !strings.Contains(r, s) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
