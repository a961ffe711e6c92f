package wasmtest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// kitInputs are the trees (from the module root) every kit build may read:
// the kits and their build scripts, and the examples with the helpers they
// include across folders (../../internal/secretflow). Hashing all of them
// for every build is coarse but cheap (a few dozen small files), and no
// edit to a source a build reads can reuse a stale module.
var kitInputs = []string{"guest/kits", "wasm-examples"}

// kitEnvVars are the variables the build scripts or their compilers read.
var kitEnvVars = []string{"CC", "RUSTC", "ASC", "EXTISM_PDK", "CPATH", "C_INCLUDE_PATH", "CFLAGS", "RUSTFLAGS"}

var (
	toolchainMu  sync.Mutex
	toolchainIDs = map[string]string{}
)

// KitModule returns the module a kit build makes: build writes it to the
// path it is given. The module is cached in CacheDir()/kits under a hash
// of lang's toolchain (compiler version, libraries), the variables the
// scripts read, recipe (the build's command line, sources named from the
// module root), the content of every file under guest/kits and
// wasm-examples, and of the extra inputs (files or folders from the
// module root), so that test processes after the first skip clang, rustc
// and asc. A failed build caches nothing; a missing toolchain is not
// hashed but built, so its error (ErrNoToolchain) stays.
func KitModule(lang, recipe string, inputs []string, build func(out string) error) ([]byte, error) {
	key, err := kitKey(lang, recipe, inputs)
	if err != nil {
		return nil, err
	}
	dir, err := cacheSubdir("kits")
	if err != nil {
		return nil, err
	}
	final := filepath.Join(dir, lang+"-"+key+".wasm")
	if key != "" {
		if wasm, err := os.ReadFile(final); err == nil {
			return wasm, nil
		}
	}
	// Build to a private file and rename it into place, so parallel test
	// binaries never read a half-written module.
	tmp := filepath.Join(dir, lang+"."+strconv.Itoa(os.Getpid())+"."+strconv.FormatUint(tmpSeq(), 10)+".tmp.wasm")
	defer os.Remove(tmp)
	if err := build(tmp); err != nil {
		return nil, err
	}
	wasm, err := os.ReadFile(tmp)
	if err != nil {
		return nil, fmt.Errorf("reading %s build: %w", lang, err)
	}
	if key != "" {
		if err := os.Rename(tmp, final); err != nil {
			return nil, fmt.Errorf("caching %s build: %w", lang, err)
		}
	}
	return wasm, nil
}

var (
	seqMu sync.Mutex
	seq   uint64
)

func tmpSeq() uint64 {
	seqMu.Lock()
	defer seqMu.Unlock()
	seq++
	return seq
}

// kitKey hashes what a kit build's output depends on; "" when lang's
// toolchain is missing (the build then runs, and reports it).
func kitKey(lang, recipe string, inputs []string) (string, error) {
	tc, err := toolchainID(lang)
	if err != nil || tc == "" {
		return "", err
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "lang %q\nrecipe %q\ntoolchain %q\n", lang, recipe, tc)
	for _, v := range kitEnvVars {
		fmt.Fprintf(h, "env %s=%q\n", v, os.Getenv(v))
	}
	for _, in := range append(append([]string(nil), kitInputs...), inputs...) {
		// Named from the module root, not the checkout's place, so that
		// every clone and worktree shares the builds.
		fmt.Fprintf(h, "input %q\n", in)
		if !filepath.IsAbs(in) {
			in = filepath.Join(root, in)
		}
		if err := hashTree(h, in); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// hashTree writes the path (relative to root) and content of every
// regular file under root (or of root, a file) into h, skipping Go
// sources, which no kit build reads.
func hashTree(h interface{ Write([]byte) (int, error) }, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("hashing kit build inputs: %w", err)
		}
		if d.IsDir() || strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("hashing kit build inputs: %w", err)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return fmt.Errorf("hashing kit build inputs: %w", err)
		}
		fmt.Fprintf(h, "file %q %d\n", filepath.ToSlash(rel), len(b))
		_, _ = h.Write(b)
		return nil
	})
}

// toolchainID identifies the compiler a kit's build script runs (and
// for C the wasi libc and builtins it links), once per process; "" when
// there is none.
func toolchainID(lang string) (string, error) {
	toolchainMu.Lock()
	defer toolchainMu.Unlock()
	if id, ok := toolchainIDs[lang]; ok {
		return id, nil
	}
	id, err := probeToolchain(lang)
	if err != nil {
		return "", err
	}
	toolchainIDs[lang] = id
	return id, nil
}

func probeToolchain(lang string) (string, error) {
	env, err := KitEnv()
	if err != nil {
		return "", err
	}
	run := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return string(out)
	}
	switch lang {
	case "c":
		cc := os.Getenv("CC")
		if cc == "" || cc == "cc" || cc == "gcc" {
			cc = "clang"
		}
		v := run(cc, "--version")
		if v == "" {
			return "", nil
		}
		// The wasi libc and compiler-rt builtins come in packages of
		// their own: key on their size and time too.
		for _, flag := range []string{"-print-file-name=libc.a", "-print-libgcc-file-name"} {
			f := strings.TrimSpace(run(cc, "--target=wasm32-wasi", flag))
			v += "\n" + f + " " + statID(f)
		}
		return v, nil
	case "rust":
		// build.sh takes the first of these with the wasm32 target; key
		// on all of them.
		var v string
		for _, c := range []string{os.Getenv("RUSTC"), "rustc", "/usr/bin/rustc"} {
			if c == "" {
				continue
			}
			if out := run(c, "-vV"); out != "" {
				sysroot := strings.TrimSpace(run(c, "--print", "sysroot"))
				lib := filepath.Join(sysroot, "lib", "rustlib", "wasm32-unknown-unknown")
				v += c + "\n" + out + lib + " " + statID(lib) + "\n"
			}
		}
		return v, nil
	case "as", "extism":
		asc := os.Getenv("ASC")
		if asc == "" {
			root, err := ModuleRoot()
			if err != nil {
				return "", err
			}
			asc = filepath.Join(root, ".tools", "node_modules", ".bin", "asc")
		}
		path, err := exec.LookPath(asc)
		if err != nil {
			return "", nil
		}
		// asc --version starts Node and loads the compiler (a second of
		// CPU); the package's manifest names the same version.
		var v string
		if real, err := filepath.EvalSymlinks(path); err == nil {
			if b, err := os.ReadFile(filepath.Join(filepath.Dir(real), "..", "package.json")); err == nil {
				v = real + "\n" + string(b)
			}
		}
		if v == "" {
			if v = run(asc, "--version"); v == "" {
				return "", nil
			}
		}
		if lang == "extism" {
			pdk := os.Getenv("EXTISM_PDK")
			if pdk == "" {
				root, err := ModuleRoot()
				if err != nil {
					return "", err
				}
				pdk = filepath.Join(root, ".tools", "node_modules")
			}
			pdk = filepath.Join(pdk, "@extism", "as-pdk")
			if _, err := os.Stat(pdk); err != nil {
				return "", nil
			}
			h := sha256.New()
			if err := hashTree(h, pdk); err != nil {
				return "", err
			}
			v += fmt.Sprintf("\npdk %x", h.Sum(nil))
		}
		return v, nil
	}
	return "", errors.New("no kit for " + lang)
}

// statID is the size and modification time of path, "" when it is
// missing.
func statID(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
}
