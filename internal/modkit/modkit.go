// Package modkit writes the starter projects of 'edge-mcp module new': a
// policy module that builds where it is written, with the SDK inside the
// project (no download, no network, nothing to edit but the policy).
//
// The Go SDK is embedded from _sdk/guest, a copy of the repository's guest/
// made by go generate (internal/cmd/gensdk); a test checks that the copy
// equals guest/.
package modkit

//go:generate go run ../cmd/gensdk -src ../../guest -dst _sdk/guest

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

//go:embed all:_sdk all:template
var files embed.FS

// SDKDir is the folder of a generated project that holds the Go SDK, the
// target of the go.mod's replace directive.
const SDKDir = "edge-mcp-guest"

// Langs are the languages New knows, in the order help lists them; only
// "go" has a kit so far.
var Langs = []string{"go", "rust", "c", "as"}

// ErrNotYet is the error of a language whose kit is still to come.
var ErrNotYet = errors.New("not yet available")

// Project is what New wrote.
type Project struct {
	Dir   string   // the project's folder
	Files []string // the files written, slash-separated, relative to Dir
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
	switch lang {
	case "go":
	case "rust", "c", "as":
		return nil, fmt.Errorf("--lang %s: %w (issue #29): use --lang go, or implement the exports of policy/ABI.md by hand", lang, ErrNotYet)
	default:
		return nil, fmt.Errorf("--lang %q: unknown language; want one of %s", lang, strings.Join(Langs, ", "))
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s already exists and is not empty: choose another name or folder", dir)
	}
	p := &Project{Dir: dir, Wasm: name + ".wasm", Build: "./build.sh"}
	data := struct{ Name, Version, SDKDir string }{name, version, SDKDir}
	err := fs.WalkDir(files, "template/go", func(p2 string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := files.ReadFile(p2)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p2, "template/go/")
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
	if err != nil {
		return nil, err
	}
	sdk, err := fs.Sub(files, "_sdk/guest")
	if err != nil {
		return nil, err
	}
	names, err := SDKFiles(sdk)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		raw, err := fs.ReadFile(sdk, n)
		if err != nil {
			return nil, err
		}
		if err := p.write(path.Join(SDKDir, n), raw); err != nil {
			return nil, err
		}
	}
	if err := p.write(path.Join(SDKDir, "go.mod"), []byte(sdkGoMod)); err != nil {
		return nil, err
	}
	return p, nil
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
