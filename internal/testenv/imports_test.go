package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// importRules is ARCHITECTURE.md's table: for each package prefix of this
// module, the prefixes of this module it may import. The first matching
// rule applies.
var importRules = []struct {
	pkg   string
	allow []string
}{
	{"cmd/", []string{"runtime/", "policy", "transports", "internal/", "guest/"}},
	{"runtime/gateway", []string{"runtime/config", "runtime/admin", "runtime/cluster", "runtime/oauth", "policy", "transports", "internal/", "guest/jsontext", "guest/glob", "guest/abi"}},
	{"runtime/admin", []string{"runtime/config", "runtime/oauth", "policy", "transports", "internal/"}},
	{"runtime/cluster", []string{"runtime/config", "internal/"}},
	{"runtime/config", []string{"policy", "internal/"}},
	{"runtime/oauth", []string{"runtime/config", "internal/"}},
	{"policy", []string{"policy", "internal/", "guest/jsontext", "guest/glob", "guest/abi"}},
	{"transports", []string{"internal/", "guest/jsontext"}},
	{"internal/", []string{"internal/", "guest/jsontext", "guest/glob", "policy/wasmtest"}},
	{"guest", []string{"guest"}},
	{"wasm-examples/", []string{"guest", "wasm-examples/"}},
}

// TestImportRules checks every package's imports (tests included) against
// the rules, so that the house keeps its one-way arrows.
func TestImportRules(t *testing.T) {
	const module = "github.com/edge-mcp/edge-mcp/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		allow := rulesFor(pkg)
		if allow == nil {
			t.Errorf("%s: no import rule (add it to ARCHITECTURE.md and importRules)", pkg)
			continue
		}
		for _, imp := range f[1:] {
			own, ok := strings.CutPrefix(imp, module)
			if !ok || own == pkg || strings.HasPrefix(own, pkg+"/") && pkg != "guest" {
				continue
			}
			if !hasPrefix(own, allow) {
				t.Errorf("%s imports %s, which ARCHITECTURE.md does not allow", pkg, own)
			}
		}
	}
}

func rulesFor(pkg string) []string {
	for _, r := range importRules {
		if pkg == r.pkg || strings.HasPrefix(pkg, r.pkg) {
			return r.allow
		}
	}
	return nil
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
