package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// buildKitInterceptors builds policy/testdata/kit-interceptors with the
// kit of lang (c, rust or as); without the toolchain the test skips, and fails
// under CI.
func buildKitInterceptors(t *testing.T, lang string) []byte {
	t.Helper()
	src := "policy/testdata/kit-interceptors/"
	// The recipe names the build for the cache key (w.KitModule), which
	// also hashes the sources in src and the kits.
	recipe := map[string]string{
		"c":    "guest/kits/c/build.sh OUT " + src + "icept.c",
		"rust": "cp guest/kits/rust/edge.rs " + src + "lib.rs DIR; guest/kits/rust/build.sh DIR/lib.rs OUT",
		"as":   "cp guest/kits/as/edge.ts " + src + "icept.ts DIR; guest/kits/as/build.sh DIR/icept.ts OUT",
	}[lang]
	wasm, err := w.KitModule(lang, recipe, []string{src}, func(out string) error {
		switch lang {
		case "c":
			return w.RunBuild(".", "sh", "guest/kits/c/build.sh", out, src+"icept.c")
		case "rust":
			// The kit is mounted as `mod edge;` beside lib.rs.
			dir := t.TempDir()
			for _, f := range []string{"guest/kits/rust/edge.rs", src + "lib.rs"} {
				if err := w.RunBuild(".", "cp", f, dir); err != nil {
					return err
				}
			}
			return w.RunBuild(".", "sh", "guest/kits/rust/build.sh", filepath.Join(dir, "lib.rs"), out)
		case "as":
			// The kit is imported as ./edge beside icept.ts.
			dir := t.TempDir()
			for _, f := range []string{"guest/kits/as/edge.ts", src + "icept.ts"} {
				if err := w.RunBuild(".", "cp", f, dir); err != nil {
					return err
				}
			}
			return w.RunBuild(".", "sh", "guest/kits/as/build.sh", filepath.Join(dir, "icept.ts"), out)
		}
		return fmt.Errorf("no kit for %q", lang)
	})
	w.SkipOrFail(t, err)
	return wasm
}

// TestKitInterceptors: the C, Rust and AssemblyScript kits' ABI 1.1 glue declares the
// descriptors as written and runs validators and mutators on the
// invocation the host sends.
func TestKitInterceptors(t *testing.T) {
	ctx := context.Background()
	for _, lang := range []string{"c", "rust", "as"} {
		t.Run(lang, func(t *testing.T) {
			m := loadBytes(t, "kit-"+lang, buildKitInterceptors(t, lang), ModuleOptions{})
			ics := interceptorsOf(t, m)
			if len(ics) != 2 {
				t.Fatalf("%d interceptors, want 2", len(ics))
			}
			v, mu := ics[0].Describe(), ics[1].Describe()
			if v.Name != "kit/no-delete" || v.Type != intercept.Validation || v.Description != `no "delete"` ||
				len(v.Hooks) != 1 || v.Hooks[0].Phase != "request" || len(v.Hooks[0].Events) != 1 {
				t.Fatalf("validator descriptor %+v", v)
			}
			if mu.Name != "kit/echo" || mu.Type != intercept.Mutation || mu.Mode != intercept.Audit || !mu.FailOpen ||
				mu.PriorityHint.Request != -7 || string(mu.ConfigSchema) != `{"type":"object"}` ||
				len(mu.Hooks) != 2 || len(mu.Hooks[0].Events) != 2 { // "both": one hook per phase
				t.Fatalf("mutator descriptor %+v", mu)
			}
			call := func(ic intercept.Interceptor, payload string) (*intercept.Result, error) {
				return ic.Invoke(ctx, &intercept.Invocation{Name: ic.Describe().Name, Event: "tools/call", Phase: intercept.Request,
					Payload: json.RawMessage(payload), Config: json.RawMessage(`{"k":1}`),
					Context: &intercept.Context{Principal: &intercept.Principal{Type: "user", ID: "alice"}, SessionID: "s1", Server: "db"}})
			}
			r, err := call(ics[0], `{"name":"delete_repo","arguments":{}}`)
			if err != nil || r.Valid || len(r.Messages) != 1 || r.Messages[0].Message != "deleting repositories is not allowed" {
				t.Fatalf("delete_repo: %+v, %v", r, err)
			}
			if r, err = call(ics[0], `{"name":"search","arguments":{}}`); err != nil || !r.Valid {
				t.Fatalf("search: %+v, %v", r, err)
			}
			if r, err = call(ics[0], `{"name":"boom","arguments":{}}`); err == nil {
				t.Fatalf("boom: %+v, want an error", r)
			}
			r, err = call(ics[1], `{"name":"x","arguments":{}}`)
			want := `{"name":"db","arguments":{"principal":"alice","session":"s1","config":{"k":1}}}`
			if err != nil || !r.Modified || string(r.Payload) != want {
				t.Fatalf("echo: %+v, %v; want payload %s", r, err, want)
			}
		})
	}
}
