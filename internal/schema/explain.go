package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// validate checks inst, a decoded JSON value, against the schema.
//
// The package's own walk runs first, because it is faster than the
// library's reflective one and reports locations. Arguments are rejected
// only when the library rejects them too, so the walk can explain a
// rejection but never cause one. If the walk finds nothing wrong while the
// library objects, the arguments are accepted: the walk then covers every
// keyword the schema uses, and the library's objection comes from its
// floating-point arithmetic ("multipleOf": 0.01 rejects 0.07) or from a
// keyword the schema's dialect does not have.
func (c *compiled) validate(inst any) (err error) {
	defer func() {
		if r := recover(); r != nil { // a bug must not take the gateway down
			err = fmt.Errorf("%w: validating: %v", ErrBadSchema, r)
		}
	}()
	w := walker{c: c}
	w.path = w.buf[:0]
	w.eval(inst, c.root, nil)
	if len(w.errs) == 0 && !w.unsure {
		return nil
	}
	lerr := c.rs.Validate(inst)
	if lerr == nil {
		return nil
	}
	all := w.errs
	if len(all) == 0 { // unsure: a keyword the walk does not evaluate failed
		all = []Detail{{Message: libraryMessage(lerr)}}
	}
	return newValidationError(all)
}

// maxLibraryMessage bounds the library's message when it is reported.
const maxLibraryMessage = 200

// libraryMessage extracts the innermost message of the library's error:
// the outer layers name schema locations ("validating /properties/x: ").
func libraryMessage(err error) string {
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			break
		}
		err = inner
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return truncate(msg, maxLibraryMessage)
}

// walker evaluates arguments against a compiled schema following the JSON
// Schema rules of the schema's dialect, as the library does, but collects
// every failure with its location instead of stopping at the first.
type walker struct {
	c      *compiled
	errs   []Detail
	unsure bool // a keyword the walk does not evaluate was met ("$dynamicRef")
	path   []token
	buf    [16]token
}

// token is one step of the current location: a property name, or an array
// index when index >= 0.
type token struct {
	name  string
	index int
}

func (w *walker) push(name string) { w.path = append(w.path, token{name: name, index: -1}) }
func (w *walker) pushIndex(i int)  { w.path = append(w.path, token{index: i}) }
func (w *walker) pop()             { w.path = w.path[:len(w.path)-1] }

// pointer renders the current location as a JSON pointer (RFC 6901).
func (w *walker) pointer() string {
	var sb strings.Builder
	for _, t := range w.path {
		sb.WriteByte('/')
		if t.index >= 0 {
			sb.WriteString(strconv.Itoa(t.index))
		} else {
			sb.WriteString(escape(t.name))
		}
	}
	return sb.String()
}

// fail records a failure at the current location.
func (w *walker) fail(format string, args ...any) {
	w.errs = append(w.errs, Detail{Path: w.pointer(), Message: fmt.Sprintf(format, args...)})
}

// check reports whether v is valid against s without recording failures.
func (w *walker) check(v any, s *jsonschema.Schema, ev *evaluated) bool {
	n := len(w.errs)
	ok := w.eval(v, s, ev)
	w.errs = w.errs[:n]
	return ok
}

// evaluated records which properties and items of an instance a schema
// evaluated, for "unevaluatedProperties" and "unevaluatedItems". A nil
// *evaluated records nothing: it is only kept where such a keyword can
// observe it.
type evaluated struct {
	props    map[string]bool
	allProps bool
	end      int // items below end were evaluated
	items    map[int]bool
	allItems bool
}

func (e *evaluated) merge(o *evaluated) {
	if e == nil || o == nil {
		return
	}
	for p := range o.props {
		e.noteProp(p)
	}
	for i := range o.items {
		e.noteItem(i)
	}
	e.allProps = e.allProps || o.allProps
	e.allItems = e.allItems || o.allItems
	e.end = max(e.end, o.end)
}

func (e *evaluated) noteProp(p string) {
	if e == nil {
		return
	}
	if e.props == nil {
		e.props = map[string]bool{}
	}
	e.props[p] = true
}

func (e *evaluated) noteItem(i int) {
	if e == nil {
		return
	}
	if e.items == nil {
		e.items = map[int]bool{}
	}
	e.items[i] = true
}

func (e *evaluated) noteEnd(end int) {
	if e != nil {
		e.end = max(e.end, end)
	}
}

func (e *evaluated) noteAllItems() {
	if e != nil {
		e.allItems = true
	}
}

// eval records the failures of v, at the current location, against s and
// reports whether there were none. When v is valid, what s evaluated is
// added to ev.
func (w *walker) eval(v any, s *jsonschema.Schema, ev *evaluated) bool {
	start := len(w.errs)
	var local *evaluated
	if ev != nil || !w.c.draft07 && (s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil) {
		local = &evaluated{}
	}
	info := w.c.info[s]
	if s.Ref != "" {
		if info == nil || info.ref == nil {
			w.unsure = true
		} else {
			w.eval(v, info.ref, local)
		}
		if w.c.draft07 { // siblings of "$ref" are ignored
			return w.done(start, ev, local)
		}
	}
	if s.DynamicRef != "" {
		w.unsure = true
	}

	w.typeAndValue(v, s)
	switch v := v.(type) {
	case float64:
		w.number(v, s)
	case string:
		w.string(v, s, info)
	}

	// In-place applicators, before arrays and objects: what they evaluate
	// counts for "unevaluatedItems" and "unevaluatedProperties".
	w.combinators(v, s, local)
	w.conditional(v, s, local)

	switch v := v.(type) {
	case []any:
		w.array(v, s, local)
	case map[string]any:
		w.object(v, s, info, local)
	}
	return w.done(start, ev, local)
}

// typeAndValue checks "type", "enum" and "const".
func (w *walker) typeAndValue(v any, s *jsonschema.Schema) {
	switch {
	case s.Type != "":
		if !hasType(v, s.Type) {
			w.fail("got %s, want %s", typeOf(v), s.Type)
		}
	case s.Types != nil:
		if !slices.ContainsFunc(s.Types, func(t string) bool { return hasType(v, t) }) {
			w.fail("got %s, want %s", typeOf(v), strings.Join(s.Types, " or "))
		}
	}
	if s.Enum != nil && !slices.ContainsFunc(s.Enum, func(e any) bool { return equal(e, v) }) {
		w.failEnum(s.Enum)
	}
	if s.Const != nil && !equal(*s.Const, v) {
		w.fail("value must be %s", display(*s.Const))
	}
}

// combinators checks "allOf", "anyOf", "oneOf" and "not". Every branch of
// "anyOf" and "oneOf" is checked, as each one that matches evaluates
// properties and items.
func (w *walker) combinators(v any, s *jsonschema.Schema, local *evaluated) {
	for _, t := range s.AllOf {
		w.eval(v, t, local)
	}
	if s.AnyOf != nil && w.matches(v, s.AnyOf, local) == 0 {
		w.fail("value does not match any of the allowed schemas (anyOf)")
	}
	if s.OneOf != nil {
		switch n := w.matches(v, s.OneOf, local); {
		case n == 0:
			w.fail("value does not match any of the allowed schemas (oneOf)")
		case n > 1:
			w.fail("value matches more than one of the allowed schemas (oneOf)")
		}
	}
	if s.Not != nil && w.check(v, s.Not, nil) {
		if isTrue(s.Not) {
			w.fail("value not allowed")
		} else {
			w.fail("value must not match the schema (not)")
		}
	}
}

// matches returns how many of schemas v matches.
func (w *walker) matches(v any, schemas []*jsonschema.Schema, local *evaluated) int {
	n := 0
	for _, t := range schemas {
		if w.check(v, t, local) {
			n++
		}
	}
	return n
}

// conditional checks "if", "then" and "else".
func (w *walker) conditional(v any, s *jsonschema.Schema, local *evaluated) {
	if s.If == nil {
		return
	}
	branch := s.Else
	if w.check(v, s.If, local) {
		branch = s.Then
	}
	if branch != nil {
		w.eval(v, branch, local)
	}
}

// done ends an evaluation that started with start failures recorded,
// passing what it evaluated to ev when it found none.
func (w *walker) done(start int, ev, local *evaluated) bool {
	if len(w.errs) > start {
		return false
	}
	ev.merge(local)
	return true
}

func (w *walker) failEnum(enum []any) {
	switch len(enum) {
	case 0:
		w.fail("no value allowed (empty enum)")
	case 1:
		w.fail("value must be %s", display(enum[0]))
	default:
		want := make([]string, len(enum))
		for i, e := range enum {
			want[i] = display(e)
		}
		w.fail("value must be one of %s", strings.Join(want, ", "))
	}
}

// number checks the numeric keywords.
func (w *walker) number(n float64, s *jsonschema.Schema) {
	if s.Minimum != nil && n < *s.Minimum {
		w.fail("minimum: got %s, want %s", number(n), number(*s.Minimum))
	}
	if s.Maximum != nil && n > *s.Maximum {
		w.fail("maximum: got %s, want %s", number(n), number(*s.Maximum))
	}
	if s.ExclusiveMinimum != nil && n <= *s.ExclusiveMinimum {
		w.fail("exclusiveMinimum: got %s, want %s", number(n), number(*s.ExclusiveMinimum))
	}
	if s.ExclusiveMaximum != nil && n >= *s.ExclusiveMaximum {
		w.fail("exclusiveMaximum: got %s, want %s", number(n), number(*s.ExclusiveMaximum))
	}
	if s.MultipleOf != nil && !multipleOf(n, *s.MultipleOf) {
		w.fail("multipleOf: got %s, want %s", number(n), number(*s.MultipleOf))
	}
}

// string checks the string keywords.
func (w *walker) string(str string, s *jsonschema.Schema, info *schemaInfo) {
	if s.MinLength != nil || s.MaxLength != nil {
		n := utf8.RuneCountInString(str)
		if s.MinLength != nil && n < *s.MinLength {
			w.fail("minLength: got %d, want %d", n, *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			w.fail("maxLength: got %d, want %d", n, *s.MaxLength)
		}
	}
	if info != nil && info.pattern != nil && !info.pattern.MatchString(str) {
		w.fail("%s does not match pattern %q", display(str), s.Pattern)
	}
}

// array checks the array keywords.
func (w *walker) array(v []any, s *jsonschema.Schema, local *evaluated) {
	items := func(from int, t *jsonschema.Schema) {
		for i := from; i < len(v); i++ {
			w.pushIndex(i)
			w.eval(v[i], t, nil)
			w.pop()
		}
		local.noteAllItems()
	}
	prefix := s.PrefixItems
	if w.c.draft07 {
		prefix = s.ItemsArray
	}
	for i, t := range prefix[:min(len(prefix), len(v))] {
		w.pushIndex(i)
		w.eval(v[i], t, nil)
		w.pop()
	}
	local.noteEnd(min(len(prefix), len(v)))
	switch {
	case w.c.draft07 && s.ItemsArray != nil:
		if s.AdditionalItems != nil {
			items(len(prefix), s.AdditionalItems)
		}
	case s.Items != nil:
		items(len(prefix), s.Items)
	}
	if s.Contains != nil {
		n := 0
		for i := range v {
			if w.check(v[i], s.Contains, nil) {
				n++
				local.noteItem(i)
			}
		}
		lo := 1 // draft-07 has no minContains or maxContains
		if !w.c.draft07 && s.MinContains != nil {
			lo = *s.MinContains
		}
		switch {
		case n < lo && lo == 1:
			w.fail("no item matches the contains schema")
		case n < lo:
			w.fail("minContains: got %d, want %d", n, lo)
		}
		if !w.c.draft07 && s.MaxContains != nil && n > *s.MaxContains {
			w.fail("maxContains: got %d, want %d", n, *s.MaxContains)
		}
	}
	if s.MinItems != nil && len(v) < *s.MinItems {
		w.fail("minItems: got %d, want %d", len(v), *s.MinItems)
	}
	if s.MaxItems != nil && len(v) > *s.MaxItems {
		w.fail("maxItems: got %d, want %d", len(v), *s.MaxItems)
	}
	if s.UniqueItems {
		if i, j, ok := duplicate(v); ok {
			w.fail("items at index %d and %d are equal", i, j)
		}
	}
	if !w.c.draft07 && s.UnevaluatedItems != nil && !local.allItems {
		for i := local.end; i < len(v); i++ {
			if !local.items[i] {
				w.pushIndex(i)
				w.eval(v[i], s.UnevaluatedItems, nil)
				w.pop()
			}
		}
		local.allItems = true
	}
}

// object checks the object keywords.
func (w *walker) object(v map[string]any, s *jsonschema.Schema, info *schemaInfo, local *evaluated) {
	w.properties(v, s, info, local)
	if s.PropertyNames != nil {
		for name := range v {
			if !w.check(name, s.PropertyNames, nil) {
				w.fail("invalid property name %q", name)
			}
		}
	}
	if s.MinProperties != nil && len(v) < *s.MinProperties {
		w.fail("minProperties: got %d, want %d", len(v), *s.MinProperties)
	}
	if s.MaxProperties != nil && len(v) > *s.MaxProperties {
		w.fail("maxProperties: got %d, want %d", len(v), *s.MaxProperties)
	}
	if m := missing(v, s.Required); len(m) > 0 {
		w.fail("missing %s", plural("property", "properties", m))
	}
	w.dependencies(v, s, local)
	if !w.c.draft07 && s.UnevaluatedProperties != nil && !local.allProps {
		w.unevaluatedProperties(v, s.UnevaluatedProperties, local)
	}
}

// properties checks each member of v against "properties",
// "patternProperties" and "additionalProperties", noting the members they
// evaluate in local.
func (w *walker) properties(v map[string]any, s *jsonschema.Schema, info *schemaInfo, local *evaluated) {
	var patterns []patternProp
	if info != nil {
		patterns = info.patternProps
	}
	noAdditional := s.AdditionalProperties != nil && isFalse(s.AdditionalProperties)
	var extra []string // refused by additionalProperties: false
	for name, val := range v {
		covered := false
		w.push(name)
		if t, ok := s.Properties[name]; ok {
			w.eval(val, t, nil)
			covered = true
		}
		for _, p := range patterns {
			if p.re.MatchString(name) {
				w.eval(val, p.schema, nil)
				covered = true
			}
		}
		if !covered && s.AdditionalProperties != nil {
			if noAdditional {
				extra = append(extra, name)
			} else {
				w.eval(val, s.AdditionalProperties, nil)
			}
			covered = true
		}
		w.pop()
		if covered {
			local.noteProp(name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		w.fail("%s not allowed", plural("additional property", "additional properties", extra))
	}
}

// dependencies checks "dependentRequired" and "dependentSchemas" (draft
// 7: "dependencies").
func (w *walker) dependencies(v map[string]any, s *jsonschema.Schema, local *evaluated) {
	depRequired, depSchemas := s.DependentRequired, s.DependentSchemas
	if w.c.draft07 {
		depRequired, depSchemas = s.DependencyStrings, s.DependencySchemas
	}
	for name, req := range depRequired {
		if _, ok := v[name]; ok {
			if m := missing(v, req); len(m) > 0 {
				w.fail("missing %s (required when %q is present)", plural("property", "properties", m), name)
			}
		}
	}
	for name, t := range depSchemas {
		if _, ok := v[name]; ok {
			w.eval(v, t, local)
		}
	}
}

// unevaluatedProperties checks the members of v that nothing else
// evaluated against the "unevaluatedProperties" schema u.
func (w *walker) unevaluatedProperties(v map[string]any, u *jsonschema.Schema, local *evaluated) {
	var extra []string
	for name, val := range v {
		if local.props[name] {
			continue
		}
		if isFalse(u) {
			extra = append(extra, name)
		} else {
			w.push(name)
			w.eval(val, u, nil)
			w.pop()
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		w.fail("%s not allowed", plural("unevaluated property", "unevaluated properties", extra))
	}
	local.allProps = true
}

// duplicate finds the first pair of equal items, by the lowest second
// index, in linear time: equal JSON values have equal canonical encodings
// (json.Marshal sorts object keys and writes 1.0 as 1).
func duplicate(v []any) (i, j int, ok bool) {
	if len(v) < 2 {
		return 0, 0, false
	}
	first := make(map[string]int, len(v))
	for j, item := range v {
		b, err := json.Marshal(item)
		if err != nil {
			return 0, 0, false
		}
		if i, ok := first[string(b)]; ok && equal(v[i], item) {
			return i, j, true
		}
		first[string(b)] = j
	}
	return 0, 0, false
}

// missing lists the names in props that obj lacks, in order.
func missing(obj map[string]any, props []string) []string {
	var out []string
	for _, p := range props {
		if _, ok := obj[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// typeOf names the JSON type of a decoded value; every number is "number".
func typeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// hasType reports whether v is of the JSON Schema type t; integers are
// numbers without a fractional part, such as 1 and 1.0.
func hasType(v any, t string) bool {
	if n, ok := v.(float64); ok {
		return t == "number" || t == "integer" && n == math.Trunc(n) && !math.IsInf(n, 0)
	}
	return typeOf(v) == t
}

// equal reports whether two JSON values are equal, numbers compared by
// value.
func equal(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !equal(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, equal)
	case float64, nil, bool, string:
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// multipleOf reports whether n is a multiple of m, computed exactly on the
// shortest decimals that denote the two floats: the JSON text both came
// from, for any number of up to 15 significant digits.
func multipleOf(n, m float64) bool {
	rn, ok1 := new(big.Rat).SetString(strconv.FormatFloat(n, 'g', -1, 64))
	rm, ok2 := new(big.Rat).SetString(strconv.FormatFloat(m, 'g', -1, 64))
	if !ok1 || !ok2 || rm.Sign() == 0 {
		return true // not finite or not a divisor: the schema check refuses m <= 0
	}
	return new(big.Rat).Quo(rn, rm).IsInt()
}

// isTrue reports whether s accepts everything without evaluating anything
// (true or {}). Through Elem: boxing *s would copy the whole struct to the
// heap on every call.
func isTrue(s *jsonschema.Schema) bool { return reflect.ValueOf(s).Elem().IsZero() }

// isFalse reports whether s is the library's reading of false, {"not": {}}.
func isFalse(s *jsonschema.Schema) bool { return s.Not != nil && isTrue(s.Not) }

// plural renders `one "a"` or `many "a", "b"`.
func plural(one, many string, names []string) string {
	if len(names) == 1 {
		return fmt.Sprintf("%s %q", one, names[0])
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return many + " " + strings.Join(q, ", ")
}

// number prints a float as JSON would write it, without an exponent for
// integers below 1e21.
func number(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// maxDisplay bounds how much of a value a message repeats.
const maxDisplay = 64

// display renders a JSON value compactly for a message, shortening long
// values.
func display(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "value"
	}
	return truncate(string(b), maxDisplay)
}

// truncate shortens s to at most n bytes and whole characters, marking the
// cut with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// escape encodes one JSON pointer token (RFC 6901).
func escape(token string) string {
	if !strings.ContainsAny(token, "~/") {
		return token
	}
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}
