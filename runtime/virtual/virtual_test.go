package virtual

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// list is a catalogue list for tests: definitions whose key member names
// them.
type list []json.RawMessage

func (l list) Len() int                  { return len(l) }
func (l list) Raw(i int) json.RawMessage { return l[i] }
func (l list) Key(i int) string {
	var v struct{ Name, URI, URITemplate string }
	json.Unmarshal(l[i], &v)
	return v.Name + v.URI + v.URITemplate
}

const createIssue = `{"name":"github.create_issue","description":"Create an issue","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"title":{"type":"string"},"labels":{"type":"array","items":{"type":"string"}},"assignee":{"type":"string"}},"required":["repo","title","labels"],"x-keep":1},"annotations":{"readOnlyHint":false}}`

func catalogue() [NumKinds]List {
	return [NumKinds]List{
		Tools: list{
			json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`),
			json.RawMessage(createIssue),
			json.RawMessage(`{"name":"github.search",  "description":"kept as sent"}`),
			json.RawMessage(`{"name":"jira.search","inputSchema":{"type":"object"}}`),
			json.RawMessage(`{"name":"jira.delete","inputSchema":{"type":"object"}}`),
		},
		Prompts:   list{json.RawMessage(`{"name":"github.review"}`), json.RawMessage(`{"name":"other"}`)},
		Resources: list{json.RawMessage(`{"uri":"jira://PROJ-1"}`), json.RawMessage(`{"uri":"file:///etc"}`)},
		Templates: list{json.RawMessage(`{"uriTemplate":"jira://{key}"}`), json.RawMessage(`{"uriTemplate":"file:///{path}"}`)},
	}
}

func triage() Config {
	return Config{Name: "triage", Path: "/mcp/triage", Title: "Bug triage",
		Tools: []string{"github.*", "jira.search"}, Prompts: []string{"github.*"}, Resources: []string{"jira://*"},
		Overrides: []Override{{Tool: "github.create_issue", Name: "file_bug", Description: "File a bug in acme/app",
			Arguments: []Argument{
				{Name: "repo", Fixed: json.RawMessage(`"acme/app"`)},
				{Name: "labels", Default: json.RawMessage(`["bug"]`)},
				{Name: "assignee", Hidden: true},
			}}},
	}
}

func keys(v *View, k Kind, l List) []string {
	var out []string
	for _, e := range v.Entries(k) {
		out = append(out, cmpOr(e.Name, l.Key(e.Pos)))
	}
	return out
}

func TestBuild(t *testing.T) {
	cat := catalogue()
	tests := []struct {
		name     string
		edit     func(*Config)
		want     [NumKinds]string
		warnings string
	}{
		{"triage", func(*Config) {}, [NumKinds]string{"file_bug github.search jira.search", "github.review", "jira://PROJ-1", "jira://{key}"}, ""},
		{"everything", func(c *Config) {
			c.Tools, c.Prompts, c.Resources, c.Overrides = []string{"*"}, []string{"*"}, []string{"*"}, nil
		}, [NumKinds]string{"echo github.create_issue github.search jira.search jira.delete", "github.review other", "jira://PROJ-1 file:///etc", "jira://{key} file:///{path}"}, ""},
		{"nothing selected", func(c *Config) { c.Tools, c.Prompts, c.Resources, c.Overrides = nil, nil, nil, nil }, [NumKinds]string{}, ""},
		{"unknown tool warns and is kept", func(c *Config) {
			c.Tools = append(c.Tools, "slack.*")
			c.Overrides = append(c.Overrides, Override{Tool: "slack.post", Description: "later"})
		}, [NumKinds]string{"file_bug github.search jira.search", "github.review", "jira://PROJ-1", "jira://{key}"}, `overrides.slack.post: no server offers tool "slack.post" (yet)`},
		{"rename shadows a catalogue tool", func(c *Config) {
			c.Overrides = append(c.Overrides, Override{Tool: "github.search", Name: "jira.search"})
		}, [NumKinds]string{"file_bug jira.search", "github.review", "jira://PROJ-1", "jira://{key}"}, `overrides.github.search.name: "jira.search" shadows the tool of that name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := triage()
			tt.edit(&c)
			s, err := Compile(c)
			if err != nil {
				t.Fatal(err)
			}
			v := s.Build(cat)
			for k := range NumKinds {
				if got := strings.Join(keys(v, k, cat[k]), " "); got != tt.want[k] {
					t.Errorf("kind %d: %q, want %q", k, got, tt.want[k])
				}
			}
			if got := strings.Join(v.Warnings, "\n"); !strings.Contains(got, tt.warnings) || (tt.warnings == "") != (got == "") {
				t.Errorf("warnings %q, want %q", got, tt.warnings)
			}
		})
	}
}

// TestDefinition checks each override kind on the definition, byte for
// byte: what is not overridden keeps its bytes and order.
func TestDefinition(t *testing.T) {
	cat := catalogue()
	s, err := Compile(triage())
	if err != nil {
		t.Fatal(err)
	}
	v := s.Build(cat)
	want := `{"name":"file_bug","description":"File a bug in acme/app","inputSchema":{"type":"object","properties":{"title":{"type":"string"},"labels":{"type":"array","items":{"type":"string"},"default":["bug"]}},"required":["title"],"x-keep":1},"annotations":{"readOnlyHint":false}}`
	e := v.At(Tools, 0)
	if string(e.Raw) != want {
		t.Errorf("definition\n got %s\nwant %s", e.Raw, want)
	}
	if e.Name != "file_bug" || e.Pos != 1 || e.Tool == nil {
		t.Errorf("entry %+v", e)
	}
	if e := v.At(Tools, 1); e.Raw != nil || e.Tool != nil || e.Name != "" {
		t.Errorf("a tool without override must share the catalogue's definition: %+v", e)
	}
	if got, want := v.Hidden(cat[Tools], "jira.delete"), `virtual server "triage" does not select tool "jira.delete"`; got != want {
		t.Errorf("Hidden: %q", got)
	}
	if got := v.Hidden(cat[Tools], "github.create_issue"); !strings.Contains(got, `as "file_bug"`) {
		t.Errorf("Hidden of a renamed tool: %q", got)
	}
}

func TestArguments(t *testing.T) {
	s, err := Compile(triage())
	if err != nil {
		t.Fatal(err)
	}
	tool := s.overrides["github.create_issue"]
	tests := []struct {
		in, want, err string
	}{
		{`{"title":"x"}`, `{"title":"x","repo":"acme/app","labels":["bug"]}`, ""},
		{`{ "title" : "x", "labels":["p1"] }`, `{ "title" : "x", "labels":["p1"],"repo":"acme/app" }`, ""},
		{``, `{"repo":"acme/app","labels":["bug"]}`, ""},
		{`null`, `{"repo":"acme/app","labels":["bug"]}`, ""},
		{`{"title":"x","repo":"evil/app"}`, "", `argument "repo" is not an argument of this tool`},
		{`{"assignee":"mallory"}`, "", `argument "assignee" is not an argument of this tool`},
		{`{"\u0072epo":"evil/app"}`, "", `argument "repo" is not an argument of this tool`},
		{`["x"]`, "", "arguments must be a JSON object"},
		{`{"title":`, "", "arguments must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			out, _, err := tool.Arguments(json.RawMessage(tt.in))
			var ae *ArgumentError
			if tt.err != "" {
				if !errors.As(err, &ae) || err.Error() != tt.err {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Fatalf("got %s, %v; want %s", out, err, tt.want)
			}
		})
	}
	var none *Tool
	if out, changed, err := none.Arguments(json.RawMessage(`{"a":1}`)); string(out) != `{"a":1}` || changed || err != nil {
		t.Errorf("no override: %s %v %v", out, changed, err)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name, key, reason string
		edit              func(*Config)
	}{
		{"fine", "", "", func(*Config) {}},
		{"relative path", "path", "must be an absolute URL path", func(c *Config) { c.Path = "mcp/triage" }},
		{"trailing slash", "path", "no trailing slash", func(c *Config) { c.Path = "/mcp/triage/" }},
		{"empty pattern", "tools[1]", "matches nothing", func(c *Config) { c.Tools[1] = "" }},
		{"override not selected", "overrides.jira.delete", "which no pattern", func(c *Config) {
			c.Overrides = append(c.Overrides, Override{Tool: "jira.delete", Description: "x"})
		}},
		{"duplicate name", "overrides.github.search.name", `gives the name "file_bug", which overrides.github.create_issue already has`, func(c *Config) {
			c.Overrides = append(c.Overrides, Override{Tool: "github.search", Name: "file_bug"})
		}},
		{"rename onto an overridden tool", "overrides.github.search.name", "already has", func(c *Config) {
			c.Overrides = append(c.Overrides, Override{Tool: "github.search", Name: "github.x"}, Override{Tool: "github.x", Description: "d"})
			c.Overrides[1], c.Overrides[2] = c.Overrides[2], c.Overrides[1]
		}},
		{"fixed and hidden", "overrides.github.create_issue.arguments.repo", "fixed excludes", func(c *Config) { c.Overrides[0].Arguments[0].Hidden = true }},
		{"hidden with default", "overrides.github.create_issue.arguments.assignee", "cannot have a default", func(c *Config) {
			c.Overrides[0].Arguments[2].Default = json.RawMessage(`"x"`)
		}},
		{"says nothing", "overrides.github.create_issue.arguments.assignee", "says nothing", func(c *Config) { c.Overrides[0].Arguments[2].Hidden = false }},
		{"bad JSON", "overrides.github.create_issue.arguments.repo.fixed", "not valid JSON", func(c *Config) { c.Overrides[0].Arguments[0].Fixed = json.RawMessage(`{`) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := triage()
			c.Overrides[0].Arguments = append([]Argument(nil), c.Overrides[0].Arguments...)
			tt.edit(&c)
			e := Check(c)
			if tt.key == "" {
				if e != nil {
					t.Fatal(e)
				}
				return
			}
			if e == nil || e.Key != tt.key || !strings.Contains(e.Reason, tt.reason) {
				t.Fatalf("got %v, want %s: …%s…", e, tt.key, tt.reason)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true}, {"*", "a.b/c", true}, {"github.*", "github.create_issue", true}, {"github.*", "github", false},
		{"jira.search", "jira.search", true}, {"jira.search", "jira.searchx", false}, {"*_issue", "create_issue", true},
		{"a*b*c", "aXbYbZc", true}, {"a*b*c", "aXbYbZ", false}, {"jira://*", "jira://PROJ-1", true}, {"", "", true}, {"", "x", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s~%s", tt.pattern, tt.name), func(t *testing.T) {
			if got := match(tt.pattern, tt.name); got != tt.want {
				t.Errorf("match(%q, %q) = %v", tt.pattern, tt.name, got)
			}
		})
	}
}

// TestSelection: a view's own rewritten entries, then the catalogue's
// items its Selection serves, resolve exactly the names the view lists,
// to the same items: what a caller resolving names without a copy of the
// catalogue's index relies on.
func TestSelection(t *testing.T) {
	cat := catalogue()
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"triage", func(*Config) {}},
		{"everything", func(c *Config) { c.Tools, c.Prompts, c.Resources = []string{"*"}, []string{"*"}, []string{"*"} }},
		{"rename shadows a catalogue tool", func(c *Config) {
			c.Overrides = append(c.Overrides, Override{Tool: "github.search", Name: "jira.search"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := triage()
			tc.edit(&c)
			s, err := Compile(c)
			if err != nil {
				t.Fatal(err)
			}
			v := s.Build(cat)
			sel := v.Selection()
			for k := range NumKinds {
				want, got := map[string]int{}, map[string]int{}
				for _, e := range v.Entries(k) {
					name := cmpOr(e.Name, cat[k].Key(e.Pos))
					want[name] = e.Pos
					if e.Raw != nil {
						got[name] = e.Pos
					}
				}
				for i := range cat[k].Len() {
					if key := cat[k].Key(i); sel.Serves(k, key) {
						if _, own := got[key]; !own {
							got[key] = i
						}
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("kind %d: resolved %v, the view lists %v", k, got, want)
				}
			}
		})
	}
	s, _ := Compile(triage())
	if tool, ok := s.Renamed("file_bug"); !ok || tool != "github.create_issue" || !s.RenamedAway("github.create_issue") || s.RenamedAway("github.search") {
		t.Errorf("Renamed(file_bug) = %q %v; RenamedAway wrong", tool, ok)
	}
}
