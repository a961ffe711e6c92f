package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/runtime/catalog"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// BenchmarkVirtualServersMemory builds what 100 virtual servers hold over
// a catalogue of 1,000 tools (10 servers of 100): each server's view as
// the gateway serves it (items shared with the catalogue, a copy of the
// overridden ones, its encoded tools/list). Each virtual server selects
// `scope` of the catalogue by glob and overrides two tools. view-bytes is
// the live heap they add (after a GC). The goal (issue #30): at most
// 5 MiB for 100 virtual servers.
func BenchmarkVirtualServersMemory(b *testing.B) {
	cat := benchCatalogue(1, "")
	for _, sc := range []struct {
		name  string
		globs func(i int) []string
	}{
		{"scope=one-server", func(i int) []string { return []string{fmt.Sprintf("s%d.*", i%10)} }},
		{"scope=every-tool", func(int) []string { return []string{"*"} }},
	} {
		b.Run(sc.name, func(b *testing.B) {
			var cfgs []virtual.Config
			for i := range 100 {
				cfgs = append(cfgs, virtual.Config{Name: fmt.Sprintf("v%d", i), Path: fmt.Sprintf("/mcp/v%d", i), Tools: sc.globs(i),
					Overrides: []virtual.Override{
						{Tool: fmt.Sprintf("s%d.tool001", i%10), Name: "renamed", Arguments: []virtual.Argument{{Name: "repo", Fixed: json.RawMessage(`"acme/app"`)}}},
						{Tool: fmt.Sprintf("s%d.tool002", i%10), Description: "Shorter."},
					}})
			}
			set, err := virtual.NewSet(cfgs, nil)
			if err != nil {
				b.Fatal(err)
			}
			g := &Gateway{log: slog.New(slog.DiscardHandler), opts: Options{PageSize: 1000}}
			var bytes uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				views := make([]*catalogue, 0, 100)
				for _, vs := range set.Servers() {
					views = append(views, g.buildVirtual(vs, cat))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				bytes = after.HeapAlloc - before.HeapAlloc
				runtime.KeepAlive(views)
			}
			b.ReportMetric(float64(bytes), "view-bytes")
			b.ReportMetric(float64(bytes)/(1<<20), "view-MiB")
		})
	}
}

// benchCatalogue is a catalogue of 1,000 tools, 10 servers of 100 ("s3.tool042");
// the definition of s0.tool000 ends with extra.
func benchCatalogue(gen uint64, extra string) *catalogue {
	var names []string
	var offers []*upstreamLists
	for s := range 10 {
		up := &upstream{name: fmt.Sprintf("s%d", s), log: slog.New(slog.DiscardHandler)}
		off := &upstreamLists{}
		for i := range 100 {
			name := fmt.Sprintf("s%d.tool%03d", s, i)
			raw := json.RawMessage(fmt.Sprintf(`{"name":%q,"description":"Tool %d of server %d, which does something useful with its arguments.%s","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"q":{"type":"string"}},"required":["repo","q"]}}`, name, i, s, extra))
			extra = ""
			off[kindTools] = append(off[kindTools], item{Up: up, Name: name, Exposed: name, Raw: raw})
		}
		names, offers = append(names, up.name), append(offers, off)
	}
	return catalog.Build(gen, names, offers, [numKinds]map[string]string{}, 1000)
}

// TestVirtualLargeView: a virtual server selecting more than
// catalog.VirtualPagesMax of definitions keeps no encoded copy of them; its list
// is encoded per request, the same bytes, and a change is still seen.
func TestVirtualLargeView(t *testing.T) {
	t.Parallel()
	set, err := virtual.NewSet([]virtual.Config{{Name: "all", Path: "/mcp/all", Tools: []string{"*"},
		Overrides: []virtual.Override{{Tool: "s1.tool001", Name: "renamed"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{log: slog.New(slog.DiscardHandler), opts: Options{PageSize: 300}}
	vs := set.ByName("all")
	v1 := g.buildVirtual(vs, benchCatalogue(1, ""))
	if v1.Pages[kindTools] != nil {
		t.Fatal("a large view holds encoded pages")
	}
	want := catalog.EncodePages(kindTools, v1.Lists[kindTools], 300)
	for i, cursor := range []string{"", "bzozMDA", "bzo2MDA", "bzo5MDA"} {
		got, err := v1.Page(kindTools, cursor, 300)
		if err != nil || string(got) != string(want[i]) {
			t.Fatalf("page %d: %v\n%.200s\nwant %.200s", i, err, got, want[i])
		}
	}
	if !strings.Contains(string(want[0]), `"name":"renamed"`) || len(v1.Lists[kindTools]) != 1000 {
		t.Errorf("view: %d tools, %.300s", len(v1.Lists[kindTools]), want[0])
	}
	if !catalog.Same(v1, g.buildVirtual(vs, benchCatalogue(2, "")), kindTools) {
		t.Error("two builds of the same catalogue differ")
	}
	if catalog.Same(v1, g.buildVirtual(vs, benchCatalogue(3, " Changed.")), kindTools) {
		t.Error("a changed definition is not seen")
	}
}
