package config

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateDoc = flag.Bool("update", false, "rewrite docs/configuration.md's key tables from the key table")

// docHeader starts every key table in docs/configuration.md. The line
// before a table names its scope: the first `path` in it (NAME standing for
// any server name), or none for the top level.
const docHeader = "| key | type | default | meaning |"

var docScope = regexp.MustCompile("`([^`]*)`")

// TestConfigDocTables checks that docs/configuration.md's key tables are
// exactly what the key table says: every key, in table order, with its
// type, default and doc; and that no other page of the docs (README.md,
// docs/*.md) holds a key table of its own, which nothing would keep
// current. go test ./runtime/config -run TestConfigDocTables -update
// rewrites the tables.
func TestConfigDocTables(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, scopes := renderDoc(t, string(data))
	if *updateDoc {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, s := range []string{"", "mcpServers.*", "mcpServers.*.oauth", "interceptorServers.*", "interceptors[]", "virtual_servers.*", "oauth", "admin", "auth", "access[]", "limits", "tool_rules[]", "pinning", "audit", "telemetry", "observability"} {
		if !scopes[s] {
			t.Errorf("docs/configuration.md has no key table for %q", s)
		}
	}
	got := strings.Split(string(data), "\n")
	for i, line := range strings.Split(want, "\n") {
		if i >= len(got) || got[i] != line {
			t.Fatalf("docs/configuration.md:%d differs from the key table (run go test ./runtime/config -run TestConfigDocTables -update)\n got: %s\nwant: %s", i+1, lineAt(got, i), line)
		}
	}
	others, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	for _, f := range append(others, filepath.Join("..", "..", "README.md")) {
		if filepath.Base(f) == "configuration.md" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if line == docHeader {
				t.Errorf("%s:%d: a key table outside docs/configuration.md; link to the reference instead", f, i+1)
			}
		}
	}
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}

// renderDoc returns doc with the rows of each key table rendered from the
// key table, and the scopes of its tables.
func renderDoc(t *testing.T, doc string) (string, map[string]bool) {
	lines := strings.Split(doc, "\n")
	scopes := map[string]bool{}
	var headers []int // where each table's header is
	for i, line := range lines {
		if line == docHeader {
			scopes[tableScope(lines, i)] = true
			headers = append(headers, i)
		}
	}
	var out []string
	prev := 0
	for _, h := range headers {
		out = append(out, lines[prev:h+2]...) // up to the header and its separator
		scope := tableScope(lines, h)
		rows := renderRows(scope, scopes)
		if len(rows) == 0 {
			t.Errorf("docs/configuration.md:%d: no keys below %q", h+1, scope)
		}
		out = append(out, rows...)
		prev = h + 2
		for prev < len(lines) && strings.HasPrefix(lines[prev], "|") {
			prev++
		}
	}
	return strings.Join(append(out, lines[prev:]...), "\n"), scopes
}

// tableScope reads the scope from the line before the table at header.
func tableScope(lines []string, header int) string {
	i := header - 1
	for i > 0 && strings.TrimSpace(lines[i]) == "" {
		i--
	}
	m := docScope.FindStringSubmatch(lines[i])
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(m[1], "NAME", "*")
}

// renderRows renders the keys below scope that no other, narrower table
// holds.
func renderRows(scope string, scopes map[string]bool) []string {
	var rows []string
	for _, table := range [][]key{keys, serverKeys, sectionKeys, interceptorServerKeys, interceptorKeys, virtualKeys} {
		for i := range table {
			k := &table[i]
			if owner(k.name, scopes) != scope {
				continue
			}
			def := k.defaultText()
			if def == "" {
				def = "—"
			}
			name := strings.TrimPrefix(strings.TrimPrefix(k.name, scope), ".")
			rows = append(rows, "| `"+name+"` | "+k.typeName()+" | "+def+" | "+k.doc+" |")
		}
	}
	return rows
}

// owner is the narrowest scope whose table holds the key name.
func owner(name string, scopes map[string]bool) string {
	best := ""
	for s := range scopes {
		if s != "" && strings.HasPrefix(name, s+".") && len(s) > len(best) {
			best = s
		}
	}
	return best
}
