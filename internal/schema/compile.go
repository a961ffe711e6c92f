package schema

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaURL is the base URI every schema is resolved against. Relative
// references that leave the document resolve against it and are refused by
// the loader.
const schemaURL = "mem://edge-mcp/input-schema.json"

// The "$schema" values handed to the library, which recognises exactly
// these spellings.
const (
	draft07URI   = "http://json-schema.org/draft-07/schema#"
	draft2020URI = "https://json-schema.org/draft/2020-12/schema"
)

// compiled is one schema ready for validation: the library's resolved form,
// whose verdict a rejection needs, and what the package's walk needs.
type compiled struct {
	rs      *jsonschema.Resolved
	root    *jsonschema.Schema
	draft07 bool // else 2020-12

	// info holds what the walk needs beyond the schema itself, for the
	// schemas that have "$ref", "pattern" or "patternProperties".
	info map[*jsonschema.Schema]*schemaInfo
}

// schemaInfo is the resolved and compiled part of one schema.
type schemaInfo struct {
	ref          *jsonschema.Schema // target of "$ref"
	pattern      *regexp.Regexp
	patternProps []patternProp // sorted by pattern
}

// patternProp is one compiled "patternProperties" entry.
type patternProp struct {
	re     *regexp.Regexp
	schema *jsonschema.Schema
}

// compile parses, checks and resolves one schema document. Every failure
// wraps ErrBadSchema.
func compile(raw []byte) (c *compiled, err error) {
	defer func() {
		if r := recover(); r != nil { // a library bug must not take the gateway down
			c, err = nil, fmt.Errorf("%w: resolving: %v", ErrBadSchema, r)
		}
	}()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: parsing: %w", ErrBadSchema, err)
	}
	if err := lint(doc, ""); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	var root *jsonschema.Schema
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("%w: parsing: %w", ErrBadSchema, err)
	}
	c = &compiled{root: root}
	switch dialect(root.Schema) {
	case "draft-07":
		c.draft07, root.Schema = true, draft07URI
	case "2020-12":
		root.Schema = draft2020URI
	case "":
		// The library's default is 2020-12, as ours.
	default:
		return nil, fmt.Errorf("%w: $schema %q is not draft-07 or 2020-12 and its meta-schema is not loaded: %w",
			ErrBadSchema, root.Schema, errRemoteRef)
	}
	c.rs, err = root.Resolve(&jsonschema.ResolveOptions{BaseURI: schemaURL, Loader: refuse})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	if err := c.index(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	return c, nil
}

// refuse is the library's loader: it never loads anything, so "$ref"s to
// other documents fail resolution instead of reaching the network or the
// disk. The library's error names the URL.
func refuse(*url.URL) (*jsonschema.Schema, error) { return nil, errRemoteRef }

// dialect names the supported dialect a "$schema" value denotes, ignoring
// the scheme and an empty fragment; "" for no "$schema", "?" otherwise.
func dialect(uri string) string {
	if uri == "" {
		return ""
	}
	u := strings.TrimSuffix(uri, "#")
	u, ok := strings.CutPrefix(u, "https://")
	if !ok {
		u, ok = strings.CutPrefix(u, "http://")
	}
	switch {
	case ok && u == "json-schema.org/draft-07/schema":
		return "draft-07"
	case ok && u == "json-schema.org/draft/2020-12/schema":
		return "2020-12"
	}
	return "?"
}

// typeNames are the values "type" may take.
var typeNames = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// Keywords whose value is a schema, an array of schemas or an object of
// schemas. "items" may be a schema or an array; "dependencies" values may be
// schemas or arrays of names.
var (
	schemaKeywords      = []string{"additionalItems", "additionalProperties", "contains", "contentSchema", "else", "if", "not", "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties"}
	schemaArrayKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaMapKeywords   = []string{"$defs", "definitions", "dependentSchemas", "patternProperties", "properties"}
	countKeywords       = []string{"maxContains", "maxItems", "maxLength", "maxProperties", "minContains", "minItems", "minLength", "minProperties"}
)

// lint checks what the meta-schemas require and the library does not,
// where the difference would make the library reject valid arguments: a
// null where a schema belongs (read as false), unknown or no type names,
// negative counts, a non-positive "multipleOf" and empty "allOf", "anyOf"
// or "oneOf" arrays. Wrongly typed keywords are left to the library's
// parser. at is the JSON pointer of doc within the whole schema.
func lint(doc any, at string) error {
	where := cmp.Or(at, "root")
	obj, ok := doc.(map[string]any)
	if !ok {
		if _, ok := doc.(bool); ok {
			return nil
		}
		return fmt.Errorf("schema at %s is not an object or a boolean", where)
	}
	if err := lintType(obj["type"]); err != nil {
		return fmt.Errorf("schema at %s: %w", where, err)
	}
	for _, k := range countKeywords {
		if n, ok := obj[k].(float64); ok && n < 0 {
			return fmt.Errorf("schema at %s: negative %s", where, k)
		}
	}
	if n, ok := obj["multipleOf"].(float64); ok && n <= 0 {
		return fmt.Errorf("schema at %s: multipleOf must be positive", where)
	}
	return lintSubschemas(obj, at)
}

// lintType checks the value of "type": a known type name, or a non-empty
// list of distinct known names.
func lintType(v any) error {
	switch t := v.(type) {
	case string:
		if !slices.Contains(typeNames, t) {
			return fmt.Errorf("unknown type %q", t)
		}
	case []any:
		if len(t) == 0 {
			return errors.New("empty type list")
		}
		for i, n := range t {
			name, _ := n.(string)
			if !slices.Contains(typeNames, name) || slices.Contains(t[:i], n) {
				return fmt.Errorf("bad or repeated type %v", n)
			}
		}
	}
	return nil
}

// lintSubschemas lints every schema obj holds, the schema at pointer at,
// in a fixed order.
func lintSubschemas(obj map[string]any, at string) error {
	sub := func(v any, path ...string) error {
		p := at
		for _, s := range path {
			p += "/" + escape(s)
		}
		return lint(v, p)
	}
	for _, k := range schemaKeywords {
		if v, ok := obj[k]; ok {
			if err := sub(v, k); err != nil {
				return err
			}
		}
	}
	for _, k := range schemaArrayKeywords {
		list, ok := obj[k].([]any)
		if !ok {
			continue
		}
		if len(list) == 0 && k != "prefixItems" {
			return fmt.Errorf("schema at %s: empty %s", cmp.Or(at, "root"), k)
		}
		for i, v := range list {
			if err := sub(v, k, strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	for _, k := range schemaMapKeywords {
		m, _ := obj[k].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if err := sub(m[name], k, name); err != nil {
				return err
			}
		}
	}
	if err := lintItems(obj, at, sub); err != nil {
		return err
	}
	deps, _ := obj["dependencies"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(deps)) {
		if _, names := deps[name].([]any); !names {
			if err := sub(deps[name], "dependencies", name); err != nil {
				return err
			}
		}
	}
	return nil
}

// lintItems lints "items", a schema or (draft 7) an array of schemas, with
// sub.
func lintItems(obj map[string]any, at string, sub func(v any, path ...string) error) error {
	switch items := obj["items"].(type) {
	case nil:
		if _, ok := obj["items"]; ok {
			return fmt.Errorf("schema at %s/items is null", at)
		}
	case []any:
		for i, v := range items {
			if err := sub(v, "items", strconv.Itoa(i)); err != nil {
				return err
			}
		}
	default:
		return sub(items, "items")
	}
	return nil
}

// index resolves the schema's references again, the way the library does,
// so the explaining walk can follow them; compiles its regular expressions;
// and refuses reference cycles that do not descend into the arguments,
// on which the library would recurse until the process dies.
func (c *compiled) index() error {
	base, err := url.Parse(schemaURL)
	if err != nil {
		return err
	}
	x := &indexer{
		c:       c,
		uris:    map[string]*jsonschema.Schema{schemaURL: c.root},
		uriOf:   map[*jsonschema.Schema]*url.URL{c.root: base},
		baseOf:  map[*jsonschema.Schema]*jsonschema.Schema{},
		anchors: map[*jsonschema.Schema]map[string]*jsonschema.Schema{},
		dynamic: map[string][]*jsonschema.Schema{},
	}
	c.info = map[*jsonschema.Schema]*schemaInfo{}
	infoOf := func(s *jsonschema.Schema) *schemaInfo {
		if c.info[s] == nil {
			c.info[s] = &schemaInfo{}
		}
		return c.info[s]
	}
	if err := x.scan(c.root, c.root); err != nil {
		return err
	}
	var all []*jsonschema.Schema
	var collect func(s *jsonschema.Schema)
	collect = func(s *jsonschema.Schema) {
		all = append(all, s)
		children(s, collect)
	}
	collect(c.root)

	edges := map[*jsonschema.Schema][]*jsonschema.Schema{}
	for _, s := range all {
		if s.Ref != "" {
			t, err := x.resolve(s, s.Ref)
			if err != nil {
				return fmt.Errorf("resolving $ref %q: %w", s.Ref, err)
			}
			infoOf(s).ref = t
		}
		if s.DynamicRef != "" {
			t, err := x.resolve(s, s.DynamicRef)
			if err != nil {
				return fmt.Errorf("resolving $dynamicRef %q: %w", s.DynamicRef, err)
			}
			edges[s] = append(edges[s], t)
			if u, err := url.Parse(s.DynamicRef); err == nil {
				edges[s] = append(edges[s], x.dynamic[u.Fragment]...)
			}
		}
		if s.Pattern != "" {
			re, err := regexp.Compile(s.Pattern)
			if err != nil {
				return fmt.Errorf("pattern %q: %w", s.Pattern, err)
			}
			infoOf(s).pattern = re
		}
		for _, p := range slices.Sorted(maps.Keys(s.PatternProperties)) {
			re, err := regexp.Compile(p)
			if err != nil {
				return fmt.Errorf("patternProperties %q: %w", p, err)
			}
			infoOf(s).patternProps = append(infoOf(s).patternProps, patternProp{re, s.PatternProperties[p]})
		}
	}
	for _, s := range all {
		edges[s] = append(edges[s], c.inPlace(s)...)
	}
	return findCycle(all, edges)
}

// ref returns the target of the "$ref" of s, or nil.
func (c *compiled) ref(s *jsonschema.Schema) *jsonschema.Schema {
	if i := c.info[s]; i != nil {
		return i.ref
	}
	return nil
}

// inPlace lists the schemas the library applies to the same instance as s,
// apart from "$dynamicRef" targets.
func (c *compiled) inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	if t := c.ref(s); t != nil {
		out = append(out, t)
		if c.draft07 {
			return out // siblings of "$ref" are ignored
		}
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, t := range []*jsonschema.Schema{s.Not, s.If, s.Then, s.Else} {
		if t != nil {
			out = append(out, t)
		}
	}
	deps := s.DependentSchemas
	if c.draft07 {
		deps = s.DependencySchemas
	}
	for _, k := range slices.Sorted(maps.Keys(deps)) {
		out = append(out, deps[k])
	}
	return out
}

// findCycle reports a cycle in edges, a graph over all.
func findCycle(all []*jsonschema.Schema, edges map[*jsonschema.Schema][]*jsonschema.Schema) error {
	const (
		open = 1
		done = 2
	)
	state := map[*jsonschema.Schema]int{}
	var visit func(s *jsonschema.Schema) bool
	visit = func(s *jsonschema.Schema) bool {
		switch state[s] {
		case open:
			return true
		case done:
			return false
		}
		state[s] = open
		for _, t := range edges[s] {
			if visit(t) {
				return true
			}
		}
		state[s] = done
		return false
	}
	for _, s := range all {
		if visit(s) {
			return errors.New("references form a cycle that never descends into the arguments")
		}
	}
	return nil
}

// indexer mirrors the library's resolution of identifiers, anchors and
// references (jsonschema-go resolve.go).
type indexer struct {
	c       *compiled
	uris    map[string]*jsonschema.Schema                        // absolute URI to schema
	uriOf   map[*jsonschema.Schema]*url.URL                      // of base schemas
	baseOf  map[*jsonschema.Schema]*jsonschema.Schema            // innermost enclosing base schema
	anchors map[*jsonschema.Schema]map[string]*jsonschema.Schema // by base schema
	dynamic map[string][]*jsonschema.Schema                      // "$dynamicAnchor" holders by name
}

// scan records the identifiers and anchors of s and its subschemas; base
// is the innermost enclosing schema with a URI.
func (x *indexer) scan(s, base *jsonschema.Schema) error {
	if s.ID != "" && !(x.c.draft07 && s.Ref != "") {
		id, err := url.Parse(s.ID)
		if err != nil {
			return fmt.Errorf("$id %q: %w", s.ID, err)
		}
		if x.c.draft07 && id.Fragment != "" {
			x.anchor(base, strings.TrimPrefix(s.ID, "#"), s)
		} else {
			u := x.uriOf[base].ResolveReference(id)
			x.uris[u.String()] = s
			x.uriOf[s] = u
			base = s
		}
	}
	x.baseOf[s] = base
	if !x.c.draft07 {
		if s.Anchor != "" {
			x.anchor(base, s.Anchor, s)
		}
		if s.DynamicAnchor != "" {
			x.anchor(base, s.DynamicAnchor, s)
			x.dynamic[s.DynamicAnchor] = append(x.dynamic[s.DynamicAnchor], s)
		}
	}
	var err error
	children(s, func(c *jsonschema.Schema) {
		if err == nil {
			err = x.scan(c, base)
		}
	})
	return err
}

func (x *indexer) anchor(base *jsonschema.Schema, name string, s *jsonschema.Schema) {
	if x.anchors[base] == nil {
		x.anchors[base] = map[string]*jsonschema.Schema{}
	}
	x.anchors[base][name] = s
}

// resolve finds the schema ref refers to from s.
func (x *indexer) resolve(s *jsonschema.Schema, ref string) (*jsonschema.Schema, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return nil, err
	}
	abs := x.uriOf[x.baseOf[s]].ResolveReference(u)
	doc := *abs
	doc.Fragment = ""
	target := x.uris[doc.String()]
	if target == nil {
		return nil, fmt.Errorf("%s: %w", doc.String(), errRemoteRef)
	}
	if frag := abs.Fragment; frag != "" && !strings.HasPrefix(frag, "/") {
		t := x.anchors[target][frag]
		if t == nil {
			return nil, fmt.Errorf("no anchor %q", frag)
		}
		return t, nil
	}
	return pointerTarget(target, abs.Fragment)
}

// pointerTarget follows the JSON pointer ptr from s to a subschema.
func pointerTarget(s *jsonschema.Schema, ptr string) (*jsonschema.Schema, error) {
	if ptr == "" {
		return s, nil
	}
	if ptr[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q does not begin with '/'", ptr)
	}
	var cur any = s
	for _, seg := range strings.Split(ptr[1:], "/") {
		if strings.Contains(ptr, "~") {
			seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		}
		switch v := cur.(type) {
		case *jsonschema.Schema:
			if v == nil {
				return nil, fmt.Errorf("JSON pointer %q: no schema", ptr)
			}
			cur = field(v, seg)
		case []*jsonschema.Schema:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(v) || (len(seg) > 1 && seg[0] == '0') {
				return nil, fmt.Errorf("JSON pointer %q: bad index %q", ptr, seg)
			}
			cur = v[n]
		case map[string]*jsonschema.Schema:
			t, ok := v[seg]
			if !ok {
				return nil, fmt.Errorf("JSON pointer %q: no %q", ptr, seg)
			}
			cur = t
		default:
			return nil, fmt.Errorf("JSON pointer %q: no schema at %q", ptr, seg)
		}
	}
	if t, ok := cur.(*jsonschema.Schema); ok && t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("JSON pointer %q does not refer to a schema", ptr)
}

// field returns the schema-valued keyword name of s: a *Schema, a
// []*Schema, a map[string]*Schema, or nil.
func field(s *jsonschema.Schema, name string) any {
	switch name {
	case "$defs":
		return s.Defs
	case "definitions":
		return s.Definitions
	case "dependencies":
		return s.DependencySchemas
	case "dependentSchemas":
		return s.DependentSchemas
	case "properties":
		return s.Properties
	case "patternProperties":
		return s.PatternProperties
	case "items":
		if s.Items != nil {
			return s.Items
		}
		return s.ItemsArray
	case "prefixItems":
		return s.PrefixItems
	case "allOf":
		return s.AllOf
	case "anyOf":
		return s.AnyOf
	case "oneOf":
		return s.OneOf
	case "additionalItems":
		return s.AdditionalItems
	case "additionalProperties":
		return s.AdditionalProperties
	case "contains":
		return s.Contains
	case "contentSchema":
		return s.ContentSchema
	case "if":
		return s.If
	case "then":
		return s.Then
	case "else":
		return s.Else
	case "not":
		return s.Not
	case "propertyNames":
		return s.PropertyNames
	case "unevaluatedItems":
		return s.UnevaluatedItems
	case "unevaluatedProperties":
		return s.UnevaluatedProperties
	}
	return nil
}

// children calls f for every immediate subschema of s, in a fixed order.
func children(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	for _, m := range []map[string]*jsonschema.Schema{s.Defs, s.Definitions, s.DependencySchemas, s.DependentSchemas, s.Properties, s.PatternProperties} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			f(m[k])
		}
	}
	for _, l := range [][]*jsonschema.Schema{s.ItemsArray, s.PrefixItems, s.AllOf, s.AnyOf, s.OneOf} {
		for _, c := range l {
			f(c)
		}
	}
	for _, c := range []*jsonschema.Schema{s.Items, s.AdditionalItems, s.AdditionalProperties, s.Contains, s.ContentSchema,
		s.If, s.Then, s.Else, s.Not, s.PropertyNames, s.UnevaluatedItems, s.UnevaluatedProperties} {
		if c != nil {
			f(c)
		}
	}
}
