package wasmtest

import (
	"os"
	"path/filepath"
	"testing"
)

// KitModule builds once for the same inputs and again when a source, the
// recipe or an environment variable the scripts read changes; a failed
// build caches nothing.
func TestKitModuleCache(t *testing.T) {
	t.Setenv("EDGE_MCP_TEST_CACHE", t.TempDir())
	t.Setenv("CFLAGS", "")
	if id, err := toolchainID("c"); err != nil || id == "" {
		SkipOrFail(t, ErrNoToolchain)
	}
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(src, "sub", "a.c")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	builds := 0
	get := func(recipe string, fail bool) ([]byte, error) {
		return KitModule("c", recipe, []string{src}, func(out string) error {
			if fail {
				return os.ErrInvalid
			}
			builds++
			b, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o600)
		})
	}
	for i, step := range []struct {
		recipe, content string
		cflags          string
		fail            bool
		want            string
		builds          int
	}{
		{recipe: "r", content: "one", want: "one", builds: 1},
		{recipe: "r", content: "one", want: "one", builds: 1},
		{recipe: "r", content: "two", want: "two", builds: 2},
		{recipe: "r2", content: "two", want: "two", builds: 3},
		{recipe: "r2", content: "two", cflags: "-O0", want: "two", builds: 4},
		{recipe: "r3", content: "two", fail: true, builds: 4},
		{recipe: "r3", content: "two", want: "two", builds: 5},
		{recipe: "r", content: "one", want: "one", builds: 5},
	} {
		write(step.content)
		t.Setenv("CFLAGS", step.cflags)
		got, err := get(step.recipe, step.fail)
		if step.fail != (err != nil) || string(got) != step.want || builds != step.builds {
			t.Fatalf("step %d: got %q, %v after %d builds; want %q after %d", i, got, err, builds, step.want, step.builds)
		}
	}
	// A new file beside the sources (a header) is an input too.
	if err := os.WriteFile(filepath.Join(src, "sub", "b.h"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := get("r", false); err != nil || string(got) != "one" || builds != 6 {
		t.Fatalf("after adding a header: got %q, %v after %d builds; want one after 6", got, err, builds)
	}
}
