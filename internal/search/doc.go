package search

import (
	"encoding/json"
	"strings"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// DocFromTool builds the document for an MCP tool definition (an element of a
// tools/list result). Name is the tool's "name"; when key is a different,
// non-empty string it is indexed as part of the name too (the key replaces
// the name when it merely adds a prefix, as in "github_create_issue" for
// "create_issue"), since clients search for the names they see. Description
// joins the tool's title (or annotations.title) and description. Params
// holds, in schema order, each inputSchema property's name followed by its
// description (or title), and likewise for the properties of an object
// property or of an array property's items, one level down.
//
// Any JSON is accepted: members of the wrong type are ignored, and input that
// is not an object yields a document with only Key and Name (= key).
func DocFromTool(key string, tool json.RawMessage) Doc {
	d := Doc{Key: key}
	m := members(tool)
	name := stringMember(m, "name")
	title := stringMember(m, "title")
	if title == "" {
		title = stringMember(members(member(m, "annotations")), "title")
	}
	switch {
	case key == "" || key == name:
		d.Name = name
	case name == "" || strings.HasSuffix(key, name):
		d.Name = key
	default:
		d.Name = key + " " + name
	}
	desc := stringMember(m, "description")
	switch {
	case title == "" || strings.Contains(desc, title):
		d.Description = desc
	case desc == "":
		d.Description = title
	default:
		d.Description = title + "\n" + desc
	}
	schema := members(member(m, "inputSchema"))
	for _, p := range members(member(schema, "properties")) {
		d.Params = appendParam(d.Params, p, true)
	}
	return d
}

// appendParam appends a property's name and description, and with nested
// those of its own properties (or its items' properties).
func appendParam(params []string, p jsonMember, nested bool) []string {
	params = append(params, p.Key)
	pm := members(p.Value)
	if desc := stringMember(pm, "description"); desc != "" {
		params = append(params, desc)
	} else if title := stringMember(pm, "title"); title != "" {
		params = append(params, title)
	}
	if !nested {
		return params
	}
	props := members(member(pm, "properties"))
	if props == nil {
		props = members(member(members(member(pm, "items")), "properties"))
	}
	for _, q := range props {
		params = appendParam(params, q, false)
	}
	return params
}

// jsonMember is one member of a JSON object, its value undecoded.
type jsonMember = jsonscan.KeyValue

// members returns the members of the JSON object raw in order, or nil when
// raw is not an object. Malformed input yields the members read before the
// fault.
func members(raw json.RawMessage) []jsonMember {
	m, _ := jsonscan.ObjectMembers(raw)
	return m
}

// member returns the value of the last member named key, as encoding/json
// would decode it, or nil.
func member(m []jsonMember, key string) json.RawMessage { return jsonscan.Lookup(m, key) }

// stringMember returns the member named key when it is a JSON string, or "".
func stringMember(m []jsonMember, key string) string {
	s, _ := jsonscan.StringValue(member(m, key))
	return s
}
