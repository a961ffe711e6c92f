// Package modkit writes the starter projects of 'edge-mcp module new': a
// policy module that builds where it is written, with the SDK inside the
// project (no download, no network, nothing to edit but the policy).
//
// The Go SDK is embedded from _sdk/guest, a copy of the repository's guest/
// made by go generate (internal/cmd/gensdk), and the kits for the other
// languages from _kits, a copy of guest/kits; tests check that the copies
// equal the originals.
package modkit

//go:generate go run ../cmd/gensdk -src ../../guest -dst _sdk/guest -kits ../../guest/kits -kits-dst _kits

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
)

//go:embed all:_sdk all:_kits all:template
var files embed.FS

// SDKDir is the folder of a generated Go project that holds the Go SDK,
// the target of the go.mod's replace directive.
const SDKDir = "edge-mcp-guest"

// KitDir is the folder of a generated Rust, C or AssemblyScript project
// that holds the language's kit (a copy of guest/kits/<lang>).
const KitDir = "edge"

// Langs are the languages New knows, in the order help lists them.
var Langs = []string{"go", "rust", "c", "as"}

// kitLangs describes the languages with a kit in guest/kits.
var kitLangs = map[string]struct{ LangName, Source, Toolchain string }{
	"rust": {"Rust", "lib.rs", "rustc for wasm32-unknown-unknown, no Cargo: apt-get install rustc libstd-rust-dev-wasm32"},
	"c":    {"C", "policy.c", "clang for wasm32-wasi: apt-get install clang lld wasi-libc libclang-rt-dev-wasm32"},
	"as":   {"AssemblyScript", "policy.ts", "asc: npm install assemblyscript, ASC=node_modules/.bin/asc"},
}

// Project is what New wrote.
type Project struct {
	Dir   string   // the project's folder
	Files []string // the files written, slash-separated, relative to Dir
	SDK   string   // the folder holding the SDK or kit, relative to Dir
	Wasm  string   // the module the build script writes, relative to Dir
	Build string   // the command that builds it, run in Dir
}

// New writes the starter project of a module named name in language lang
// into dir, which must not exist or be empty: nothing is ever overwritten.
// version is the edge-mcp version that wrote it, for the record.
func New(dir, name, lang, version string) (*Project, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	kit, isKit := kitLangs[lang]
	if lang != "go" && !isKit {
		return nil, fmt.Errorf("--lang %q: unknown language; want one of %s", lang, strings.Join(Langs, ", "))
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s already exists and is not empty: choose another name or folder", dir)
	}
	p := &Project{Dir: dir, Wasm: name + ".wasm", Build: "./build.sh", SDK: SDKDir}
	data := struct {
		Name, Version, SDKDir, Lang, LangName, Source, Toolchain string
	}{name, version, SDKDir, lang, kit.LangName, kit.Source, kit.Toolchain}
	templates := []string{"template/common", "template/" + lang}
	if isKit {
		p.SDK, data.SDKDir = KitDir, KitDir
		templates = append(templates, "template/kit")
	}
	for _, t := range templates {
		if err := p.writeTemplates(t, data); err != nil {
			return nil, err
		}
	}
	if isKit {
		return p, p.copyTree("_kits/"+lang, KitDir, nil)
	}
	if err := p.copyTree("_sdk/guest", SDKDir, SDKFiles); err != nil {
		return nil, err
	}
	if err := p.write(path.Join(SDKDir, "go.mod"), []byte(sdkGoMod)); err != nil {
		return nil, err
	}
	return p, nil
}

// writeTemplates writes the files under dir of the embedded templates,
// executing those named *.tmpl with data.
func (p *Project) writeTemplates(dir string, data any) error {
	return fs.WalkDir(files, dir, func(p2 string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := files.ReadFile(p2)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p2, dir+"/")
		if strings.HasSuffix(rel, ".tmpl") {
			rel = strings.TrimSuffix(rel, ".tmpl")
			t, err := template.New(rel).Delims("[[", "]]").Parse(string(raw))
			if err != nil {
				return fmt.Errorf("template %s: %w", rel, err)
			}
			var b bytes.Buffer
			if err := t.Execute(&b, data); err != nil {
				return fmt.Errorf("template %s: %w", rel, err)
			}
			raw = b.Bytes()
		}
		if rel == "gitignore" { // embed leaves out dot files unless all:
			rel = ".gitignore"
		}
		return p.write(rel, raw)
	})
}

// copyTree copies the embedded folder src to dst in the project: the
// files list picks (nil: every file).
func (p *Project) copyTree(src, dst string, list func(fs.FS) ([]string, error)) error {
	sub, err := fs.Sub(files, src)
	if err != nil {
		return err
	}
	if list == nil {
		list = KitFiles
	}
	names, err := list(sub)
	if err != nil {
		return err
	}
	for _, n := range names {
		raw, err := fs.ReadFile(sub, n)
		if err != nil {
			return err
		}
		if err := p.write(path.Join(dst, n), raw); err != nil {
			return err
		}
	}
	return nil
}

// sdkGoMod makes the SDK copy a module of its own, under the import path
// the SDK has in the edge-mcp repository.
const sdkGoMod = `// The edge-mcp policy SDK, copied here by 'edge-mcp module new'.
module github.com/edge-mcp/edge-mcp/guest

go 1.24
`

// write creates the file rel under the project (never replacing one).
func (p *Project) write(rel string, data []byte) error {
	name := filepath.Join(p.Dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if strings.HasSuffix(rel, ".sh") {
		mode = 0o755
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("writing the project: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	p.Files = append(p.Files, rel)
	return nil
}

// checkName accepts the names that are at once a module name of the store
// (policy/store.ValidName is stricter about nothing here), a Go module path
// and a file name: a letter or digit, then letters, digits, '.', '_', '-',
// at most 64 in all.
func checkName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("module name %q: want 1 to 64 characters", name)
	}
	for i, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return fmt.Errorf("module name %q: %q at byte %d; want a letter or digit, then letters, digits, '.', '_' or '-'", name, c, i)
		}
	}
	return nil
}

// SDKFiles lists the files of the Go SDK in fsys (a copy of guest/): its
// Go sources, without tests and test data, in lexical order.
func SDKFiles(fsys fs.FS) ([]string, error) {
	var out []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || p != "." && strings.HasPrefix(d.Name(), ".")):
			return fs.SkipDir
		case d.IsDir():
			return nil
		case strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go"):
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	if err == nil && len(out) == 0 {
		err = errors.New("no Go sources")
	}
	return out, err
}

// KitFiles lists the files of a kit in fsys (a copy of guest/kits/<lang>):
// every regular file, in lexical order.
func KitFiles(fsys fs.FS) ([]string, error) {
	var out []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != "." && strings.HasPrefix(d.Name(), "."):
			return fs.SkipDir
		case d.Type().IsRegular():
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	if err == nil && len(out) == 0 {
		err = errors.New("no kit files")
	}
	return out, err
}
