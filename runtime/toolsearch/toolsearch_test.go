package toolsearch

import (
	"encoding/json"
	"strings"
	"testing"
)

// tools is a Tools of literal definitions.
type tools []struct{ name, def string }

func (t tools) Len() int                           { return len(t) }
func (t tools) At(i int) (string, json.RawMessage) { return t[i].name, json.RawMessage(t[i].def) }

var weather = tools{
	{"weather_forecast", `{"name":"forecast","description":"Weather forecast for a city","inputSchema":{"type":"object", "properties":{"city":{"type":"string"}}}}`},
	{"jira_create_issue", `{"name":"create_issue","description":"Create a Jira issue","inputSchema":{"type":"object"}}`},
	{"files_read", `{"name":"read","title":"Read a file"}`},
}

// TestSearchArguments: tool_search's arguments are checked, and a good
// query answers the best matches with name, description and compacted
// schema.
func TestSearchArguments(t *testing.T) {
	set := NewSet(weather)
	for _, c := range []struct{ name, args, problem, result string }{
		{"no arguments", ``, `needs a "query"`, ""},
		{"blank query", `{"query":"  "}`, `needs a "query"`, ""},
		{"not an object", `[1]`, `takes {"query": string`, ""},
		{"fractional limit", `{"query":"x","limit":1.5}`, `"limit" must be a positive integer`, ""},
		{"zero limit", `{"query":"x","limit":0}`, `"limit" must be a positive integer`, ""},
		{"match", `{"query":"weather forecast","limit":1}`, "",
			`"structuredContent":{"tools":[{"name":"weather_forecast","description":"Weather forecast for a city","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}}]}`},
		{"no match", `{"query":"zzzz"}`, "", `"structuredContent":{"tools":[]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, problem := set.Search(json.RawMessage(c.args))
			if c.problem != "" {
				if !strings.Contains(problem, c.problem) || res != nil {
					t.Fatalf("problem %q (result %s), want %q", problem, res, c.problem)
				}
				return
			}
			if problem != "" || !json.Valid(res) || !strings.Contains(string(res), c.result) {
				t.Fatalf("result %s (problem %q), want it to hold %s", res, problem, c.result)
			}
		})
	}
}

// TestSharedIndex: the same tools share one index, changed ones do not.
func TestSharedIndex(t *testing.T) {
	same := append(tools(nil), weather...)
	if Shared(weather) != Shared(same) {
		t.Error("the same tools built two indexes")
	}
	same[2].def = `{"name":"read","title":"Read a file, changed"}`
	if Shared(weather) == Shared(same) {
		t.Error("a changed definition reused the index")
	}
}

// TestDefs: the meta tools' definitions are valid JSON naming the count.
func TestDefs(t *testing.T) {
	s, i := Defs(42)
	if !json.Valid(s) || !json.Valid(i) || !strings.Contains(string(s), "42 more tools") {
		t.Fatalf("defs %s %s", s, i)
	}
}
