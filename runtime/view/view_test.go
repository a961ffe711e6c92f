package view

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/runtime/catalog"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
)

type (
	titem = catalog.Item[string, func()]
	tcat  = catalog.Catalogue[string, func()]
)

// access hides the tools and servers in hidden and defers the tools in
// deferred; the meta tool "search" stands for the deferred ones.
type access struct{ hidden, deferred map[string]bool }

func (a access) Allowed(k catalog.Kind, it *titem) bool {
	return !a.hidden[it.Up] && (k != catalog.Tools || !a.hidden[it.Exposed])
}
func (a access) Deferred(it *titem) bool { return a.deferred[it.Exposed] }
func (a access) Meta(deferred []*titem) []*titem {
	if len(deferred) == 0 {
		return nil
	}
	return []*titem{{Name: "search", Exposed: "search", Raw: json.RawMessage(`{"name":"search"}`)}}
}

func snapshot() *tcat {
	var tools, prompts catalog.Lists[string, func()]
	for _, n := range []string{"a1", "a2", "a3"} {
		tools[catalog.Tools] = append(tools[catalog.Tools], titem{Up: "a", Name: n, Exposed: n, Raw: json.RawMessage(`{"name":"` + n + `"}`)})
	}
	prompts[catalog.Prompts] = []titem{{Up: "b", Name: "p", Exposed: "p", Raw: json.RawMessage(`{"name":"p"}`)}}
	return catalog.Build(7, []string{"a", "b"}, []*catalog.Lists[string, func()]{&tools, &prompts}, [catalog.NumKinds]map[string]string{}, 10)
}

func names(items []*titem) string {
	var out []string
	for _, it := range items {
		out = append(out, it.Exposed)
	}
	return strings.Join(out, ",")
}

// TestBuild: access lists hide, deferred tools leave the list but stay
// callable, the meta tools join the list, the pages follow the view.
func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		name              string
		access            access
		tools, deferred   string
		callable, prompts []string
	}{
		{"everything", access{}, "a1,a2,a3", "", []string{"a1", "a2", "a3"}, []string{"p"}},
		{"hidden", access{hidden: map[string]bool{"a2": true, "b": true}}, "a1,a3", "", []string{"a1", "a3"}, nil},
		{"deferred", access{deferred: map[string]bool{"a1": true, "a3": true}}, "a2,search", "a1,a3", []string{"a1", "a2", "a3", "search"}, []string{"p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Builder[string, func()]{Ctx: context.Background(), Pol: &policyset.Set{}, Log: slog.New(slog.DiscardHandler),
				PageSize: 10, Server: func(s string) string { return s }, Access: tc.access}
			good := Good{{"a", "a1"}: {Exposed: "a1"}}
			v, gotGood, ok := b.Build(snapshot(), good)
			if !ok || len(gotGood) != 1 || v.Gen != 7 {
				t.Fatalf("Build: ok %v, good %v, gen %d; want ok, the good outcome unchanged (no tools_list policy), gen 7", ok, gotGood, v.Gen)
			}
			if got := names(v.Lists[catalog.Tools]); got != tc.tools {
				t.Errorf("tools list %q, want %q", got, tc.tools)
			}
			if got := names(v.Deferred); got != tc.deferred {
				t.Errorf("deferred %q, want %q", got, tc.deferred)
			}
			var callable []string
			for n := range v.Index[catalog.Tools] {
				callable = append(callable, n)
			}
			slices.Sort(callable)
			if !slices.Equal(callable, tc.callable) {
				t.Errorf("callable %v, want %v", callable, tc.callable)
			}
			var prompts []string
			for _, it := range v.Lists[catalog.Prompts] {
				prompts = append(prompts, it.Exposed)
			}
			if !slices.Equal(prompts, tc.prompts) {
				t.Errorf("prompts %v, want %v", prompts, tc.prompts)
			}
			page, err := v.Page(catalog.Tools, "", 10)
			if err != nil || strings.Count(string(page), `"name"`) != len(v.Lists[catalog.Tools]) {
				t.Errorf("tools page %s (%v) does not follow the view", page, err)
			}
		})
	}
}
