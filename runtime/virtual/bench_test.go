package virtual

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkViews builds 100 virtual servers over a catalogue of 1,000
// tools (10 servers of 100) and reports the bytes the views hold
// (view-bytes: live heap after a GC, less the catalogue's). Each virtual
// server selects one server's tools and one other's by glob (200 tools)
// and overrides two of them. The goal: at most 5 MiB.
func BenchmarkViews(b *testing.B) {
	var tools list
	for s := range 10 {
		for i := range 100 {
			tools = append(tools, json.RawMessage(fmt.Sprintf(`{"name":"s%d.tool%03d","description":"Tool %d of server %d, which does something useful with its arguments.","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"q":{"type":"string"}},"required":["repo","q"]}}`, s, i, i, s)))
		}
	}
	cat := [NumKinds]List{Tools: tools}
	servers := make([]*Server, 100)
	for i := range servers {
		c := Config{Name: fmt.Sprintf("v%d", i), Path: fmt.Sprintf("/mcp/v%d", i),
			Tools: []string{fmt.Sprintf("s%d.*", i%10), fmt.Sprintf("s%d.*", (i+1)%10)},
			Overrides: []Override{
				{Tool: fmt.Sprintf("s%d.tool001", i%10), Name: "renamed", Arguments: []Argument{{Name: "repo", Fixed: json.RawMessage(`"acme/app"`)}}},
				{Tool: fmt.Sprintf("s%d.tool002", i%10), Description: "Shorter."},
			}}
		s, err := Compile(c)
		if err != nil {
			b.Fatal(err)
		}
		servers[i] = s
	}
	var bytes uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		views := make([]*View, len(servers))
		for i, s := range servers {
			views[i] = s.Build(cat)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		bytes = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(views)
	}
	b.ReportMetric(float64(bytes), "view-bytes")
}

// BenchmarkArguments rewrites a call's arguments with a fixed argument, a
// default and a hidden one (the triage override).
func BenchmarkArguments(b *testing.B) {
	s, err := Compile(triage())
	if err != nil {
		b.Fatal(err)
	}
	tool := s.overrides["github.create_issue"]
	args := json.RawMessage(`{"title":"The login page is blank","body":"Steps: open /login in Firefox 130.","labels":["p1"]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := tool.Arguments(args); err != nil {
			b.Fatal(err)
		}
	}
}
