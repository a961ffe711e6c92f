package config

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateREADME = flag.Bool("update", false, "rewrite README.md's config tables from the key table")

// readmeHeader starts every config table in README.md. The line before a
// table names its scope: the first `path` in it (NAME standing for any
// server name), or none for the top level.
const readmeHeader = "| key | type | default | meaning |"

var readmeScope = regexp.MustCompile("`([^`]*)`")

// TestREADMETables checks that README.md's config tables are exactly what
// the key table says: every key, in table order, with its type, default
// and doc. go test ./runtime/config -run TestREADMETables -update rewrites
// them.
func TestREADMETables(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, scopes := renderREADME(t, string(data))
	if *updateREADME {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, s := range []string{"", "mcpServers.*", "admin", "auth", "access[]", "limits", "tool_rules[]", "pinning", "audit", "telemetry", "observability"} {
		if !scopes[s] {
			t.Errorf("README.md has no config table for %q", s)
		}
	}
	got := strings.Split(string(data), "\n")
	for i, line := range strings.Split(want, "\n") {
		if i >= len(got) || got[i] != line {
			t.Fatalf("README.md:%d differs from the key table (run go test ./runtime/config -run TestREADMETables -update)\n got: %s\nwant: %s", i+1, lineAt(got, i), line)
		}
	}
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of file)"
}

// renderREADME returns doc with the rows of each config table rendered
// from the key table, and the scopes of its tables.
func renderREADME(t *testing.T, doc string) (string, map[string]bool) {
	lines := strings.Split(doc, "\n")
	scopes := map[string]bool{}
	var headers []int // where each table's header is
	for i, line := range lines {
		if line == readmeHeader {
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
			t.Errorf("README.md:%d: no keys below %q", h+1, scope)
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
	m := readmeScope.FindStringSubmatch(lines[i])
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(m[1], "NAME", "*")
}

// renderRows renders the keys below scope that no other, narrower table
// holds.
func renderRows(scope string, scopes map[string]bool) []string {
	var rows []string
	for _, table := range [][]key{keys, serverKeys, sectionKeys} {
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
