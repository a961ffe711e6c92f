package catalog

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/listing"
)

// In these tests a server is its name, and a local tool a func().
type (
	item      = Item[string, func()]
	lists     = Lists[string, func()]
	catalogue = Catalogue[string, func()]
)

func logTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func offerOf(t *testing.T, server, prefix string, tools ...string) *lists {
	t.Helper()
	var raws []string
	for _, n := range tools {
		raws = append(raws, fmt.Sprintf(`{"name":%q,"description":"from %s","inputSchema":{"type":"object"}}`, n, server))
	}
	items, _, err := Parse[string, func()](server, prefix, logTo(io.Discard), Tools, json.RawMessage(`{"tools":[`+strings.Join(raws, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	var l lists
	l[Tools] = items
	return &l
}

func TestBuildConflicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		reserved map[string]string
		want     map[string]string // exposed name → owner
	}{
		{"first in config order wins", nil, map[string]string{"shared": "a", "only_b": "b", "p_shared": "p", "reserved_for_b": "a"}},
		{"reserved names go to their server", map[string]string{"shared": "b", "reserved_for_b": "b"},
			map[string]string{"shared": "b", "only_b": "b", "p_shared": "p", "reserved_for_b": "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			offers := []*lists{
				offerOf(t, "a", "", "shared", "reserved_for_b"),
				offerOf(t, "b", "", "shared", "only_b", "reserved_for_b"),
				offerOf(t, "p", "p", "shared"),
			}
			var reserved [NumKinds]map[string]string
			reserved[Tools] = tc.reserved
			c := Build(1, []string{"a", "b", "p"}, offers, reserved, 2)
			got := map[string]string{}
			for _, it := range c.Lists[Tools] {
				got[it.Exposed] = it.Up
				if n, _ := wire.String(it.Raw, "name"); n != it.Exposed {
					t.Errorf("definition of %q carries name %q", it.Exposed, n)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("owners = %v, want %v", got, tc.want)
			}
			for _, cf := range c.Conflicts {
				if cf.Name == "shared" && !cf.Reserved && (cf.Winner != "a" || cf.Loser != "b") {
					t.Errorf("conflict %+v, want a winning over b", cf)
				}
			}
		})
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	var names []string
	for i := range 25 {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	c := Build(1, []string{"a"}, []*lists{offerOf(t, "a", "", names...)}, [NumKinds]map[string]string{}, 10)
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		res, err := c.Page(Tools, cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Tools []struct {
				Name string `json:"name"`
			}
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			t.Fatalf("page %s: %v", res, err)
		}
		for _, tool := range page.Tools {
			seen = append(seen, tool.Name)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if !slices.Equal(seen, names) {
		t.Errorf("paged through %v, want %v", seen, names)
	}
	if _, err := c.Page(Tools, "bm90LWEtY3Vyc29y", 10); err == nil {
		t.Error("a foreign cursor was accepted")
	}
}

func TestServers(t *testing.T) {
	t.Parallel()
	c := Build(1, []string{"a", "b"}, []*lists{offerOf(t, "a", "", "x", "y"), offerOf(t, "b", "", "z")}, [NumKinds]map[string]string{}, 10)
	page, err := c.Page(Tools, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	upper := strings.ToUpper
	for _, tc := range []struct {
		name string
		page string
		want []string
	}{
		{"the catalogue's page", string(page), []string{"A", "A", "B"}},
		{"a name it does not hold", `{"tools":[{"name":"z"},{"name":"nobody"},{}]}`, []string{"B", "", ""}},
		{"empty", `{"tools":[]}`, []string{}},
		{"no list", `{}`, nil},
		{"not a list", `{"tools":{}}`, nil},
		{"not JSON", `{"tools":[`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Servers(Tools, json.RawMessage(tc.page), upper)
			if !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("Servers = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParse: keys, prefixes and templates.
func TestParse(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	res := json.RawMessage(`{"resourceTemplates":[{"uriTemplate":"file:///{path}"},{"name":"no key"},{"uriTemplate":"bad{"}],"nextCursor":"n"}`)
	items, next, err := Parse[string, func()]("a", "p", logTo(&logs), Templates, res)
	if err != nil || next != "n" || len(items) != 2 {
		t.Fatalf("Parse = %d items, %q, %v; want 2 items, cursor n", len(items), next, err)
	}
	if items[0].Exposed != "file:///{path}" || items[0].Template == nil || items[1].Template != nil {
		t.Errorf("templates %+v: want the URI template unprefixed, parsed when it parses", items)
	}
	for _, want := range []string{"skipping list item without a string key", "resource template does not parse"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q lacks %q", logs.String(), want)
		}
	}
	c := Build(1, []string{"a"}, []*lists{{Templates: items}}, [NumKinds]map[string]string{}, 10)
	if c.Resource("file:///hosts") != "a" || c.Resource("http://x") != "" {
		t.Error("Resource does not route by the template")
	}
}

// TestOffers: what went down is remembered as gone, unless the server
// was removed; pinning withholds; conflicts are logged once.
func TestOffers(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	o := NewOffers[string, func()](logTo(&logs), 10, [NumKinds]map[string]string{}, func(s string) string { return s })
	ups := []string{"a", "b"}
	o.Set("a", offerOf(t, "a", "", "x", "y"), true)
	o.Set("b", offerOf(t, "b", "", "x"), true)
	pin := func(u string, l *lists) *lists {
		if l == nil || u != "a" {
			return l
		}
		kept := *l
		kept[Tools] = slices.DeleteFunc(slices.Clone(l[Tools]), func(it item) bool { return it.Name == "y" })
		return &kept
	}
	c1 := o.Build(ups, pin)
	if c1.Withheld["y"] == nil || c1.Index[Tools]["y"] != nil || c1.Index[Tools]["x"].Up != "a" {
		t.Fatalf("withheld %v, index %v: want y withheld, x from a", c1.Withheld, c1.Index[Tools])
	}
	o.Build(ups, pin)
	if n := strings.Count(logs.String(), "name conflict"); n != 1 {
		t.Errorf("conflict logged %d times over two builds, want once", n)
	}
	o.Set("a", nil, true) // a went down
	c2 := o.Build(ups, nil)
	if c2.Gone[Tools]["y"] == nil || c2.Index[Tools]["x"].Up != "b" || c2.Gen != c1.Gen+2 {
		t.Fatalf("gone %v, x from %v: want a's tools gone and x from b", c2.Gone[Tools], c2.Index[Tools]["x"])
	}
	if got := Changed(c1, c2, nil); !slices.Equal(got, []string{Kinds[Tools].Changed}) {
		t.Errorf("Changed = %v, want the tools list", got)
	}
	o.Reconfigure([NumKinds]map[string]string{}, func(s string) bool { return s != "a" }) // a removed
	if c3 := o.Build([]string{"b"}, nil); c3.Gone[Tools]["y"] != nil {
		t.Error("a removed server's tools still gone, not unknown")
	}
	o.Set("b", nil, false) // removed and down: not remembered
	o.Update("b", []Kind{Prompts}, &lists{})
	if l := o.Offer("b"); l == nil || len(l[Tools]) != 0 {
		t.Errorf("Update of a server with no offer: %v", l)
	}
	if got := Announced([]Kind{Resources, Templates, Tools}); !slices.Equal(got, []string{Kinds[Resources].Changed, Kinds[Tools].Changed}) {
		t.Errorf("Announced = %v", got)
	}
}

// FuzzCursor: whatever a client sends as a cursor gets a page or an error,
// never a panic.
func FuzzCursor(f *testing.F) {
	f.Add(listing.EncodeCursor(0))
	f.Add(listing.EncodeCursor(10))
	f.Add("")
	f.Add("bzotMQ") // "o:-1"
	f.Add("bzo5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OQ")
	var l lists
	for i := range 5 {
		l[Tools] = append(l[Tools], item{Up: "a", Name: fmt.Sprint(i), Exposed: fmt.Sprint(i), Raw: json.RawMessage(`{}`)})
	}
	c := Build(1, []string{"a"}, []*lists{&l}, [NumKinds]map[string]string{}, 2)
	f.Fuzz(func(t *testing.T, cursor string) {
		res, err := c.Page(Tools, cursor, 2)
		if err == nil && !json.Valid(res) {
			t.Fatalf("page for %q is not JSON: %s", cursor, res)
		}
	})
}
