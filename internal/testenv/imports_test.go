package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// importRules is ARCHITECTURE.md's table "Who may import whom": for each
// package of this module, the packages of this module it may import. A
// pattern "p/..." is p and everything under it, "p" is p alone; the first
// rule whose package pattern matches applies. A package may always import
// the packages under itself. TestImportRulesMatchArchitecture checks that
// the table says the same.
var importRules = []struct {
	pkg   string
	allow []string
}{
	{"cmd/...", []string{"runtime/...", "policy/...", "transports", "internal/...", "guest/..."}},
	{"runtime/gateway", []string{"runtime/config", "runtime/admin", "runtime/console", "runtime/bridge", "runtime/cluster", "runtime/fleet", "runtime/oauth", "runtime/openaiapi", "runtime/events", "runtime/demo", "runtime/policyset", "runtime/toolsearch", "runtime/admission", "runtime/dial", "runtime/listing", "runtime/observe", "runtime/tasks", "runtime/probe", "runtime/perclient", "runtime/whynot", "runtime/reconnect", "runtime/catalog", "runtime/relay", "runtime/pins", "runtime/statuspage", "runtime/view", "runtime/interceptchain", "runtime/interceptors", "runtime/virtual", "runtime/compress", "runtime/consent", "policy/...", "transports", "internal/...", "guest/jsonscan", "guest/glob", "guest/abi"}},
	{"runtime/admin", []string{"runtime/config", "runtime/oauth", "runtime/interceptchain", "policy/...", "transports", "internal/..."}},
	{"runtime/console", []string{"runtime/admin", "runtime/fleet", "policy/spec", "internal/ociwasm"}},
	{"runtime/bridge", []string{"runtime/config", "runtime/cluster", "transports", "internal/..."}},
	{"runtime/fleet", []string{"runtime/config", "runtime/admin", "runtime/cluster", "policy/...", "transports", "internal/..."}},
	{"runtime/policyset", []string{"runtime/config", "runtime/admin", "runtime/fleet", "policy/...", "internal/..."}},
	{"runtime/toolsearch", []string{"internal/..."}},
	{"runtime/admission", []string{"runtime/config", "runtime/virtual", "internal/..."}},
	{"runtime/dial", []string{"runtime/config", "runtime/oauth", "transports"}},
	{"runtime/listing", []string{"internal/..."}},
	{"runtime/probe", []string{"transports", "internal/..."}},
	{"runtime/perclient", nil},
	{"runtime/whynot", nil},
	{"runtime/reconnect", []string{"transports"}},
	{"runtime/catalog", []string{"runtime/listing", "runtime/virtual", "internal/..."}},
	{"runtime/relay", []string{"internal/..."}},
	{"runtime/pins", []string{"runtime/admin", "internal/..."}},
	{"runtime/statuspage", []string{"runtime/fleet", "runtime/interceptchain", "runtime/oauth", "runtime/reconnect", "internal/..."}},
	{"runtime/view", []string{"runtime/catalog", "runtime/policyset", "policy/...", "internal/..."}},
	{"runtime/observe", []string{"runtime/config", "internal/..."}},
	{"runtime/openaiapi", []string{"transports", "internal/..."}},
	{"runtime/events", nil},
	{"runtime/compress", nil},
	{"runtime/consent", nil},
	{"runtime/demo", []string{"runtime/config", "transports"}},
	{"runtime/cluster", []string{"runtime/config", "internal/..."}},
	{"runtime/config", []string{"policy/spec", "runtime/virtual", "internal/..."}},
	{"runtime/virtual", []string{"internal/..."}},
	{"runtime/oauth", []string{"runtime/config", "runtime/cluster", "transports", "internal/..."}},
	{"runtime/interceptors", []string{"policy/...", "internal/..."}},
	{"runtime/tasks", []string{"transports", "internal/..."}},
	{"runtime/interceptchain", []string{"runtime/config", "runtime/interceptors", "policy/...", "transports", "internal/..."}},
	{"policy/spec", nil},
	{"policy/...", []string{"policy/...", "internal/...", "guest/jsonscan", "guest/glob", "guest/abi"}},
	{"transports", []string{"internal/...", "guest/jsonscan"}},
	{"internal/cmd/...", []string{"runtime/...", "policy/...", "transports", "internal/...", "guest/..."}},
	{"internal/...", []string{"internal/...", "guest/jsonscan", "guest/glob"}},
	{"guest/...", []string{"guest/..."}},
	{"wasm-examples/...", []string{"guest/...", "wasm-examples/..."}},
}

const module = "github.com/edge-mcp/edge-mcp/"

// moduleImports lists, for every package of the module, the packages of
// the module it imports (tests included), as go list sees them for the
// host and for GOOS=wasip1, where the guest SDK and the example modules
// are built.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	imports := map[string][]string{}
	for _, env := range [][]string{nil, {"GOOS=wasip1", "GOARCH=wasm"}} {
		out := goList(t, env, "-e", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, module+"...")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			pkg := strings.TrimPrefix(f[0], module)
			imports[pkg] = append(imports[pkg], nil...)
			for _, imp := range f[1:] {
				if own, ok := strings.CutPrefix(imp, module); ok && !slices.Contains(imports[pkg], own) {
					imports[pkg] = append(imports[pkg], own)
				}
			}
		}
	}
	return imports
}

// goList runs go list with env added to the environment and returns its
// standard output. Its standard error stays apart: on a fresh module cache
// it carries "go: downloading" lines, which are not packages.
func goList(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s go list %s: %v\n%s", strings.Join(env, " "), strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TestImportRules checks every package's imports (tests included, for the
// host and for wasip1) against the rules, so that the house keeps its
// one-way arrows.
func TestImportRules(t *testing.T) {
	imports := moduleImports(t)
	// The guest SDK and the examples build only for wasip1: without that
	// listing their imports would go unchecked.
	if !slices.Contains(imports["wasm-examples/tool-router"], "guest") {
		t.Fatalf("wasm-examples/tool-router imports %q: the wasip1 packages are not listed", imports["wasm-examples/tool-router"])
	}
	for pkg, imps := range imports {
		allow, ok := rulesFor(pkg)
		if !ok {
			t.Errorf("%s: no import rule (add it to ARCHITECTURE.md and importRules)", pkg)
			continue
		}
		for _, own := range imps {
			if own == pkg || strings.HasPrefix(own, pkg+"/") {
				continue
			}
			if !slices.ContainsFunc(allow, func(p string) bool { return matches(p, own) }) {
				t.Errorf("%s imports %s, which ARCHITECTURE.md does not allow", pkg, own)
			}
		}
	}
}

// TestImportRulesMatchArchitecture checks that ARCHITECTURE.md's table and
// importRules say the same thing, row by row.
func TestImportRulesMatchArchitecture(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## Who may import whom")
	if !ok {
		t.Fatal(`ARCHITECTURE.md has no section "Who may import whom"`)
	}
	code := regexp.MustCompile("`([^`]+)`")
	var rows []string
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		var allow []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			allow = append(allow, m[1])
		}
		rows = append(rows, strings.Trim(strings.TrimSpace(cells[1]), "`")+": "+strings.Join(allow, ", "))
	}
	var want []string
	for _, r := range importRules {
		want = append(want, r.pkg+": "+strings.Join(r.allow, ", "))
	}
	if !slices.Equal(rows, want) {
		t.Errorf("ARCHITECTURE.md's table says\n\t%s\nimportRules say\n\t%s", strings.Join(rows, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// TestConfigLinksNoWasm checks that the config loader does not link the
// Wasm runtime: it knows policy attachments only as policy/spec values.
func TestConfigLinksNoWasm(t *testing.T) {
	for _, dep := range strings.Fields(goList(t, nil, "-deps", module+"runtime/config")) {
		if strings.Contains(dep, "wazero") || dep == module+"policy" {
			t.Errorf("runtime/config depends on %s", dep)
		}
	}
}

func rulesFor(pkg string) ([]string, bool) {
	for _, r := range importRules {
		if matches(r.pkg, pkg) {
			return r.allow, true
		}
	}
	return nil, false
}

// matches reports whether pkg is pattern ("p") or under it ("p/...").
func matches(pattern, pkg string) bool {
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == p || strings.HasPrefix(pkg, p+"/")
	}
	return pkg == pattern
}
