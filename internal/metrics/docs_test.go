package metrics

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// TestDocsNameEveryMetric checks docs/observability.md against the
// metrics the gateway serves: every edge_mcp_ family is named there, and
// no page of the docs (README.md, docs/*.md) names one that does not exist.
func TestDocsNameEveryMetric(t *testing.T) {
	served := map[string]bool{}
	for _, f := range New().families {
		served[f.name] = true
	}
	var b bytes.Buffer
	writeClientMemory(&b, &budget.Stats{Stores: []budget.StoreStats{{Store: "resumption"}}})
	writeInterceptors(&b, &InterceptorStats{})
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+)`).FindAllStringSubmatch(b.String(), -1) {
		served[m[1]] = true
	}
	if len(served) < 15 {
		t.Fatalf("only %d metric families found: %v", len(served), served)
	}
	// Names under the namespace that are not metrics, and where they are.
	notMetrics := map[string]string{
		"edge_mcp_console": "the operator console's session cookie (runtime/console)",
	}
	for n, what := range notMetrics {
		if served[n] {
			t.Errorf("%s is listed as %s but is a served metric", n, what)
		}
	}
	name := regexp.MustCompile(Namespace + `_[a-z0-9_]*[a-z0-9]`)
	root := filepath.Join("..", "..")
	obs, err := os.ReadFile(filepath.Join(root, "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	for n := range served {
		if !slices.Contains(name.FindAllString(string(obs), -1), n) {
			t.Errorf("docs/observability.md does not name the metric %s", n)
		}
	}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, p := range append(pages, filepath.Join(root, "README.md")) {
		doc, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(doc), -1) {
			if _, other := notMetrics[n]; !served[n] && !other {
				t.Errorf("%s names the metric %s, which the gateway does not serve", p, n)
			}
		}
	}
}
