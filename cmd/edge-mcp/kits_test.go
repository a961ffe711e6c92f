package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// Every redact-secrets port (Rust, C, AssemblyScript kits), built with its
// real toolchain, passes the Go module's vectors under policy test
// --vectors; so does the Go build itself.
func TestRedactPortsPassVectors(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	vectors := filepath.Join("..", "..", "wasm-examples", "redact-secrets", "vectors.json")
	// extism: the AssemblyScript port as an Extism plugin, run by the
	// engine's Extism adapter.
	for _, lang := range append([]string{"go"}, wasmtest.PortLangs...) {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			var wasm []byte
			if lang == "go" {
				wasm = wasmtest.Example(t, "redact-secrets")
			} else {
				wasm = wasmtest.Port(t, lang)
			}
			module := filepath.Join(t.TempDir(), "redact-"+lang+".wasm")
			os.WriteFile(module, wasm, 0o600)
			out, err := runCLI(t, "policy", "test", module, "--vectors", vectors)
			if err != nil || !strings.Contains(out, " 35 passed, 0 failed") {
				t.Fatalf("policy test --vectors: %v\n%s", err, out)
			}
		})
	}
}

// policy test --vectors reports each failing vector and fails.
func TestPolicyTestVectorsReportsFailures(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a Wasm module")
	}
	dir := t.TempDir()
	module := filepath.Join(dir, "redact.wasm")
	os.WriteFile(module, redactModule(t), 0o600) // the reporting is under test, not the Go build
	vectors := filepath.Join(dir, "vectors.json")
	os.WriteFile(vectors, []byte(`[
	 {"name":"masks a key","hook":"tool_call","input":{"server":"s","tool":"t","arguments":{"k":"sk-proj-AbCdEf0123456789AbCdEf0123456789xyz"}},"expect":{"arguments":{"k":"[REDACTED]"}}},
	 {"name":"wrongly expects a deny","hook":"tool_call","input":{"server":"s","tool":"t","arguments":{}},"expect":{"action":"deny"}}]`), 0o600)
	out, err := runCLI(t, "policy", "test", module, "--vectors", vectors)
	if err == nil || !strings.Contains(out, "ok   masks a key") || !strings.Contains(out, "FAIL wrongly expects a deny") ||
		!strings.Contains(out, "1 passed, 1 failed") {
		t.Fatalf("policy test --vectors with a failing vector: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "policy", "test", module, "--vectors", vectors, "--input", vectors); err == nil {
		t.Fatal("--vectors with --input accepted")
	}
	// The instance's start has a deadline of its own, 10 s by default so
	// that a busy machine does not fail a test run (the gateway's is 1 s),
	// and the flag sets it.
	if out, _ := runCLI(t, "policy", "test", "--help"); !strings.Contains(out, "-init-timeout") || !strings.Contains(out, "(default 10s)") {
		t.Fatalf("policy test --help does not offer --init-timeout, 10 s by default:\n%s", out)
	}
	if out, err := runCLI(t, "policy", "test", module, "--vectors", vectors, "--init-timeout", "-1s"); err == nil ||
		!strings.Contains(err.Error()+out, "init timeout -1s") {
		t.Fatalf("policy test --init-timeout -1s: %v\n%s", err, out)
	}
}

// module new --lang rust|c|as writes a project that builds with its real
// toolchain where it is written and passes its own vectors.
func TestModuleNewKits(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds Wasm modules")
	}
	for _, lang := range wasmtest.KitLangs {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "guard")
			out, err := runCLI(t, "module", "new", "guard", "--lang", lang, "--dir", dir)
			if err != nil || !strings.Contains(out, "the policy SDK is in "+dir+"/edge") {
				t.Fatalf("module new --lang %s: %v\n%s", lang, err, out)
			}
			wasmtest.SkipOrFail(t, wasmtest.RunBuild(dir, "./build.sh"))
			out, err = runCLI(t, "policy", "test", filepath.Join(dir, "guard.wasm"), "--vectors", filepath.Join(dir, "vectors.json"))
			if err != nil || !strings.Contains(out, "2 passed, 0 failed") {
				t.Fatalf("policy test --vectors: %v\n%s", err, out)
			}
			// The config is read: a reason of its own, other globs.
			cfg := filepath.Join(dir, "cfg.json")
			os.WriteFile(cfg, []byte(`{"deny":["drop_*"],"reason":"no drops"}`), 0o600)
			in := filepath.Join(dir, "in.json")
			os.WriteFile(in, []byte(`{"server":"db","tool":"drop_table","arguments":{}}`), 0o600)
			out, err = runCLI(t, "policy", "test", filepath.Join(dir, "guard.wasm"), "--hook", "tool_call", "--input", in, "--config", cfg)
			if err != nil || !strings.Contains(out, `"no drops: drop_table"`) {
				t.Fatalf("policy test with a config: %v\n%s", err, out)
			}
			os.WriteFile(cfg, []byte(`{"nope":1}`), 0o600)
			if out, err := runCLI(t, "policy", "test", filepath.Join(dir, "guard.wasm"), "--hook", "tool_call", "--input", in, "--config", cfg); err == nil ||
				!strings.Contains(out+err.Error(), "unknown key") {
				t.Fatalf("policy test with a bad config: %v\n%s", err, out)
			}
		})
	}
}
