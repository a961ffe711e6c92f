package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/listing"
)

func offerOf(t *testing.T, up *upstream, tools ...string) *upstreamLists {
	t.Helper()
	var raws []string
	for _, n := range tools {
		raws = append(raws, fmt.Sprintf(`{"name":%q,"description":"from %s","inputSchema":{"type":"object"}}`, n, up.name))
	}
	items, _, err := parseItems(up, kindTools, json.RawMessage(`{"tools":[`+strings.Join(raws, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	var l upstreamLists
	l[kindTools] = items
	return &l
}

func TestBuildCatalogueConflicts(t *testing.T) {
	t.Parallel()
	log := testLogger(t)
	a := &upstream{name: "a", log: log}
	b := &upstream{name: "b", log: log}
	p := &upstream{name: "p", prefix: "p", log: log}
	ups := []*upstream{a, b, p}

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
			offers := []*upstreamLists{
				offerOf(t, a, "shared", "reserved_for_b"),
				offerOf(t, b, "shared", "only_b", "reserved_for_b"),
				offerOf(t, p, "shared"),
			}
			var reserved [numKinds]map[string]string
			reserved[kindTools] = tc.reserved
			c := buildCatalogue(1, ups, offers, reserved, 2)
			got := map[string]string{}
			for _, it := range c.lists[kindTools] {
				got[it.exposed] = it.up.name
				if n, _ := wire.String(it.raw, "name"); n != it.exposed {
					t.Errorf("definition of %q carries name %q", it.exposed, n)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("owners = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCataloguePagination(t *testing.T) {
	t.Parallel()
	log := testLogger(t)
	up := &upstream{name: "a", log: log}
	var names []string
	for i := range 25 {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	c := buildCatalogue(1, []*upstream{up}, []*upstreamLists{offerOf(t, up, names...)}, [numKinds]map[string]string{}, 10)
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		res, err := c.page(kindTools, cursor, 10)
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
	if _, err := c.page(kindTools, "bm90LWEtY3Vyc29y", 10); err == nil {
		t.Error("a foreign cursor was accepted")
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
	up := &upstream{name: "a"}
	var l upstreamLists
	for i := range 5 {
		l[kindTools] = append(l[kindTools], item{up: up, name: fmt.Sprint(i), exposed: fmt.Sprint(i), raw: json.RawMessage(`{}`)})
	}
	c := buildCatalogue(1, []*upstream{up}, []*upstreamLists{&l}, [numKinds]map[string]string{}, 2)
	f.Fuzz(func(t *testing.T, cursor string) {
		res, err := c.page(kindTools, cursor, 2)
		if err == nil && !json.Valid(res) {
			t.Fatalf("page for %q is not JSON: %s", cursor, res)
		}
	})
}

// FuzzRewriteMeta: the params of any forwarded request either pass with
// the progress token mapped and the per-connection keys gone, or are
// rejected; never a panic, never invalid JSON out.
func FuzzRewriteMeta(f *testing.F) {
	f.Add(`{"name":"x","arguments":{}}`)
	f.Add(`{"name":"x","_meta":{"progressToken":"tok","io.modelcontextprotocol/clientInfo":{}}}`)
	f.Add(`{"_meta":{"progressToken":7}}`)
	f.Add(`{"_meta":null}`)
	f.Add(`{"_meta":[1]}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, params string) {
		if !json.Valid([]byte(params)) {
			return
		}
		s := &session{}
		c := &call{}
		out, err := s.rewriteMeta(json.RawMessage(params), c, 99)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("rewriteMeta(%s) = %s: invalid JSON", params, out)
		}
		meta, ok, _ := wire.Field(out, "_meta")
		if !ok {
			return
		}
		for _, k := range connectionMetaKeys {
			if _, ok, _ := wire.Field(meta, k); ok {
				t.Fatalf("per-connection key %s survived: %s", k, out)
			}
		}
		if c.progressToken != nil {
			if tok, _, _ := wire.Field(meta, "progressToken"); string(tok) != "99" {
				t.Fatalf("progress token not mapped: %s", out)
			}
		}
	})
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		params string
		want   any
		ok     bool
	}{
		{`{"requestId":7,"reason":"x"}`, int64(7), true},
		{`{"requestId":"abc"}`, "abc", true},
		{`{"requestId":"a\"b"}`, `a"b`, true},
		{`{"requestId":1.5}`, nil, false},
		{`{"requestId":null}`, nil, false},
		{`{"reason":"no id"}`, nil, false},
	} {
		id, ok := requestID(json.RawMessage(tc.params))
		if ok != tc.ok || (ok && id.Raw() != tc.want) {
			t.Errorf("requestID(%s) = %v, %v; want %v, %v", tc.params, id.Raw(), ok, tc.want, tc.ok)
		}
	}
}
