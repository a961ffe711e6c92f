package testenv

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The house's figures that must not grow unnoticed (ARCHITECTURE.md):
// the request path's package stays small enough to read, its two central
// types keep a method set one can hold in mind, and the README stays an
// introduction. TestHouseFigures checks them beside the import rules.
const (
	// gatewayMaxLines bounds runtime/gateway's non-test lines (as
	// `wc -l` counts them, the package's own folder only).
	gatewayMaxLines = 7000
	// gatewayMaxMethods bounds the methods of each of runtime/gateway's
	// types session and Gateway.
	gatewayMaxMethods = 40
	// readmeMaxLines bounds README.md's lines.
	readmeMaxLines = 300
)

// TestHouseFigures checks runtime/gateway's non-test lines, the methods
// of its session and Gateway, and README.md's lines against their limits;
// a failure names the figure, the limit and what to do instead of raising
// it.
func TestHouseFigures(t *testing.T) {
	root := filepath.Join("..", "..")
	gateway := filepath.Join(root, "runtime", "gateway")
	lines, methods := gatewayFigures(t, gateway)
	const moveOut = "move a cohesive concern out of runtime/gateway into a package under runtime/ behind a narrow interface the gateway owns " +
		"(as runtime/admin, runtime/catalog, runtime/consent do; ARCHITECTURE.md), with its tests; do not squeeze lines or raise the limit"
	figures := []struct {
		name         string
		value, limit int
		fix          string
	}{
		{"runtime/gateway non-test lines", lines, gatewayMaxLines, moveOut},
		{"methods of runtime/gateway's session", methods["session"], gatewayMaxMethods,
			"turn a group of methods into a concern of its own (a small type over *session, as routing, notFound, virtualSide are) or " + moveOut},
		{"methods of runtime/gateway's Gateway", methods["Gateway"], gatewayMaxMethods,
			"turn a group of methods into a concern of its own (a small type over *Gateway, as adminOps, bridgeOps are) or " + moveOut},
		{"README.md lines", countLines(t, filepath.Join(root, "README.md")), readmeMaxLines,
			"move reference material to docs/ and link it from the README's table of documents"},
	}
	for _, f := range figures {
		t.Run(f.name, func(t *testing.T) {
			if f.value == 0 {
				t.Fatalf("%s: counted 0; the counting is broken", f.name)
			}
			if f.value > f.limit {
				t.Errorf("%s: %d, over the limit of %d: %s", f.name, f.value, f.limit, f.fix)
			}
		})
	}
}

// gatewayFigures counts the lines of the package in dir (its non-test Go
// files) and the methods of each of its types, by receiver base type.
func gatewayFigures(t *testing.T, dir string) (lines int, methods map[string]int) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	methods = map[string]int{}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		lines += countLines(t, name)
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 {
				methods[receiverType(fn.Recv.List[0].Type)]++
			}
		}
	}
	return lines, methods
}

// receiverType is the name of a receiver's base type: T of T, *T, T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// countLines counts a file's lines as `wc -l` does (its newlines).
func countLines(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}
