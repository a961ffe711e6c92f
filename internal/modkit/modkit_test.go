package modkit

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The embedded SDK is the repository's guest/, file for file: run
// go generate ./internal/modkit after changing guest/.
func TestEmbeddedSDKIsGuest(t *testing.T) {
	guest := os.DirFS("../../guest")
	want, err := SDKFiles(guest)
	if err != nil {
		t.Fatal(err)
	}
	sdk, _ := fs.Sub(files, "_sdk/guest")
	got, err := SDKFiles(sdk)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("embedded SDK files %v\nguest/ files %v\nrun go generate ./internal/modkit", got, want)
	}
	for _, name := range want {
		a, _ := fs.ReadFile(guest, name)
		b, _ := fs.ReadFile(sdk, name)
		if !bytes.Equal(a, b) {
			t.Errorf("_sdk/guest/%s differs from guest/%s: run go generate ./internal/modkit", name, name)
		}
	}
}

// The embedded kits are guest/kits, file for file: run go generate
// ./internal/modkit after changing a kit.
func TestEmbeddedKitsAreGuestKits(t *testing.T) {
	kits := os.DirFS("../../guest/kits")
	want, err := KitFiles(kits)
	if err != nil {
		t.Fatal(err)
	}
	embedded, _ := fs.Sub(files, "_kits")
	got, err := KitFiles(embedded)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("embedded kit files %v\nguest/kits files %v\nrun go generate ./internal/modkit", got, want)
	}
	for _, name := range want {
		a, _ := fs.ReadFile(kits, name)
		b, _ := fs.ReadFile(embedded, name)
		if !bytes.Equal(a, b) {
			t.Errorf("_kits/%s differs from guest/kits/%s: run go generate ./internal/modkit", name, name)
		}
	}
}

// A Rust, C or AssemblyScript project holds its policy, the kit, the
// build script, the vectors and a README naming the toolchain
// (cmd/edge-mcp's TestModuleNewKits builds each and runs its vectors).
func TestNewKitProjects(t *testing.T) {
	for _, tc := range []struct{ lang, source, kitFile, toolchain string }{
		{"rust", "lib.rs", "edge.rs", "rustc"},
		{"c", "policy.c", "edge.c", "clang"},
		{"as", "policy.ts", "edge.ts", "asc"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "p")
			p, err := New(dir, "guard", tc.lang, "test")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{tc.source, "build.sh", "vectors.json", "testdata/tool_call.json", ".gitignore", "README.md",
				KitDir + "/" + tc.kitFile, KitDir + "/build.sh", KitDir + "/README.md"} {
				if !slices.Contains(p.Files, f) {
					t.Errorf("project lacks %s (has %v)", f, p.Files)
				}
			}
			if slices.Contains(p.Files, "go.mod") || p.SDK != KitDir {
				t.Errorf("a %s project with Go files or SDK folder %q: %v", tc.lang, p.SDK, p.Files)
			}
			readme, _ := os.ReadFile(filepath.Join(dir, "README.md"))
			src, _ := os.ReadFile(filepath.Join(dir, tc.source))
			if !strings.Contains(string(readme), tc.toolchain) || !strings.Contains(string(src), "blocked by policy guard") {
				t.Errorf("README.md without %q or %s without the module's name:\n%s", tc.toolchain, tc.source, readme)
			}
			if fi, err := os.Stat(filepath.Join(dir, "build.sh")); err != nil || fi.Mode()&0o100 == 0 {
				t.Errorf("build.sh is not executable: %v", err)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644)
	tests := []struct {
		name, dir, module, lang, want string
	}{
		{"unknown language", "", "p", "cobol", "unknown language"},
		{"bad name in rust", "", "a b", "rust", "want a letter or digit"},
		{"bad name", "", "../x", "go", "want a letter or digit"},
		{"leading dash", "", "-x", "go", "want a letter or digit"},
		{"folder in use", full, "p", "go", "not empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = filepath.Join(t.TempDir(), "p")
			}
			_, err := New(dir, tc.module, tc.lang, "test")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%q, %q) = %v, want an error saying %q", tc.module, tc.lang, err, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(full, "keep.txt")); string(b) != "mine" {
		t.Errorf("the folder in use lost its file")
	}
}

// The project builds where it is written, with no network and no module
// cache: GOPROXY=off, GOFLAGS=-mod=mod.
func TestNewBuildsOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Wasm module")
	}
	dir := filepath.Join(t.TempDir(), "hello")
	p, err := New(dir, "hello", "go", "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "main.go", "main_test.go", "build.sh", "vectors.json", "testdata/tool_call.json", ".gitignore", "README.md", SDKDir + "/go.mod", SDKDir + "/abi.go"} {
		if !slices.Contains(p.Files, f) {
			t.Errorf("project lacks %s (has %v)", f, p.Files)
		}
	}
	cmd := exec.Command(p.Build)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOMODCACHE="+t.TempDir(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", p.Build, err, out)
	}
	// go test runs the policy natively, offline too (guest/guesttest is in
	// the SDK copy).
	test := exec.Command("go", "test", "./...")
	test.Dir, test.Env = dir, cmd.Env
	if out, err := test.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("go test in the project: %v\n%s", err, out)
	}
	wasm, err := os.ReadFile(filepath.Join(dir, p.Wasm))
	if err != nil || !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		t.Fatalf("%s: %v (%d bytes)", p.Wasm, err, len(wasm))
	}
}
