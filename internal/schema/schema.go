// Package schema validates MCP tool-call arguments against the tool's
// inputSchema before the gateway forwards the call upstream.
//
// Schemas are compiled with github.com/santhosh-tekuri/jsonschema/v6. The
// dialect named by a schema's "$schema" keyword is honoured (draft-07 and
// 2020-12 both occur in the wild); a schema without "$schema" is treated as
// 2020-12. References are resolved only inside the schema itself: any
// "$ref" that would need loading a document (http, https, file or any other
// URL) fails the compilation, so validation never touches the network or the
// file system. The official meta-schemas are embedded in the library and
// need no loading.
//
// A schema that does not compile yields an error wrapping [ErrBadSchema].
// The gateway is expected to let such a call through and log the problem:
// a broken upstream schema must not make the tool unusable, and the
// upstream server still validates its own input.
package schema

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

var (
	// ErrBadSchema reports an inputSchema that cannot be compiled: invalid
	// JSON, not a valid schema for its dialect, an unsupported "$schema", a
	// regular expression Go cannot compile, or a "$ref" outside the schema.
	ErrBadSchema = errors.New("invalid input schema")

	// errRemoteRef is returned by the loader for every document it is asked
	// to fetch.
	errRemoteRef = errors.New("refused: only references inside the schema are allowed")
)

// DefaultMaxEntries is the cache size used when NewValidator is given a
// non-positive size.
const DefaultMaxEntries = 512

// schemaURL is the base URL every compiled schema is registered under.
// Relative references that leave the document resolve against it and are
// refused by the loader.
const schemaURL = "mem://edge-mcp/input-schema.json"

// Validator validates tool arguments against JSON Schemas. It keeps a
// bounded least-recently-used cache of compiled schemas keyed by the SHA-256
// of the schema bytes, so a tool's schema is compiled once. Compilation
// failures are cached too. A Validator is safe for concurrent use.
type Validator struct {
	max int

	mu      sync.Mutex
	entries map[[sha256.Size]byte]*list.Element // of *entry
	lru     *list.List                          // front = most recently used
	hits    int
	misses  int
}

// entry is one cached compilation. once guards sch and err, so concurrent
// first uses of the same schema compile it a single time.
type entry struct {
	key  [sha256.Size]byte
	once sync.Once
	sch  *jsonschema.Schema
	err  error
}

// NewValidator returns a Validator that caches at most maxEntries compiled
// schemas; a non-positive maxEntries selects DefaultMaxEntries.
func NewValidator(maxEntries int) *Validator {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	return &Validator{
		max:     maxEntries,
		entries: make(map[[sha256.Size]byte]*list.Element),
		lru:     list.New(),
	}
}

// Stats reports how many Validate calls found their schema in the cache
// (hits) and how many had to compile it (misses).
func (v *Validator) Stats() (hits, misses int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hits, v.misses
}

// Validate checks args against schema. Empty or absent args, and a JSON
// null, count as the empty object {}. An empty schema accepts anything.
//
// It returns nil when args are valid, a *ValidationError when they are not
// (including when args are not JSON at all), and an error wrapping
// ErrBadSchema when the schema does not compile.
func (v *Validator) Validate(schema, args json.RawMessage) error {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil
	}
	sch, err := v.compiled(schema)
	if err != nil {
		return err
	}
	inst, err := decodeArgs(args)
	if err != nil {
		return &ValidationError{
			Message: "arguments are not valid JSON",
			All:     []Detail{{Message: "arguments are not valid JSON"}},
		}
	}
	if err := sch.Validate(inst); err != nil {
		var verr *jsonschema.ValidationError
		if !errors.As(err, &verr) {
			return fmt.Errorf("validating arguments: %w", err)
		}
		return convert(verr)
	}
	return nil
}

// compiled returns the compiled form of schema, from the cache when
// possible.
func (v *Validator) compiled(schema []byte) (*jsonschema.Schema, error) {
	key := sha256.Sum256(schema)
	v.mu.Lock()
	var e *entry
	if el, ok := v.entries[key]; ok {
		v.hits++
		v.lru.MoveToFront(el)
		e = el.Value.(*entry)
	} else {
		v.misses++
		e = &entry{key: key}
		v.entries[key] = v.lru.PushFront(e)
		for v.lru.Len() > v.max {
			old := v.lru.Remove(v.lru.Back()).(*entry)
			delete(v.entries, old.key)
		}
	}
	v.mu.Unlock()

	e.once.Do(func() { e.sch, e.err = compile(schema) })
	return e.sch, e.err
}

// compile compiles one schema document with a fresh compiler whose loader
// refuses everything.
func compile(schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("%w: parsing: %w", ErrBadSchema, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSchema, err)
	}
	return sch, nil
}

// refusingLoader is the compiler's URL loader: it never loads anything, so
// "$ref"s to other documents fail the compilation instead of reaching the
// network or the disk.
type refusingLoader struct{}

// Load implements jsonschema.URLLoader.
func (refusingLoader) Load(url string) (any, error) {
	return nil, errRemoteRef // the library's error names the URL
}

// decodeArgs parses the tool-call arguments, treating absent or null
// arguments as {}.
func decodeArgs(args []byte) (any, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		return map[string]any{}, nil
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(args))
}

// ValidationError reports arguments that do not satisfy the input schema.
type ValidationError struct {
	// Path is the JSON pointer of the first failing location in the
	// arguments, such as "/location/zip", or "" for the arguments object
	// itself. Failures are ordered by path, so "first" is deterministic.
	Path string
	// Message is a short human-readable description of the first failure,
	// such as `missing property "city"` or "got string, want integer".
	Message string
	// All lists every failure found, in the same order; All[0] is the one
	// described by Path and Message.
	All []Detail
}

// Detail is one failure within a ValidationError.
type Detail struct {
	Path    string // JSON pointer into the arguments
	Message string // short human-readable description
}

// Error formats the first failure as "arguments<Path>: <Message>", adding a
// count of further failures when there are any.
func (e *ValidationError) Error() string {
	s := "arguments" + e.Path + ": " + e.Message
	if n := len(e.All) - 1; n == 1 {
		s += " (and 1 more error)"
	} else if n > 1 {
		s += fmt.Sprintf(" (and %d more errors)", n)
	}
	return s
}

// convert flattens the library's error tree into a ValidationError.
func convert(verr *jsonschema.ValidationError) *ValidationError {
	var all []Detail
	collect(verr, &all)
	if len(all) == 0 { // defensive: the library always reports a cause
		all = []Detail{{Path: pointer(verr.InstanceLocation), Message: "arguments do not match the input schema"}}
	}
	slices.SortStableFunc(all, func(a, b Detail) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	all = slices.Compact(all)
	return &ValidationError{Path: all[0].Path, Message: all[0].Message, All: all}
}

// collect appends the leaf failures of e to all. Wrappers (the root,
// groups, $ref hops and allOf, whose causes are each real failures) are
// descended into; anyOf and oneOf are reported as one failure, since a
// single branch's complaint would mislead.
func collect(e *jsonschema.ValidationError, all *[]Detail) {
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				collect(c, all)
			}
			return
		}
	}
	*all = append(*all, Detail{Path: pointer(e.InstanceLocation), Message: message(e.ErrorKind)})
}

// message renders an error kind, using JSON-style double quotes for the
// common kinds and the library's wording for the rest.
func message(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Required:
		if len(k.Missing) == 1 {
			return fmt.Sprintf("missing property %q", k.Missing[0])
		}
		return "missing properties " + quoteAll(k.Missing)
	case *kind.AdditionalProperties:
		props := slices.Sorted(slices.Values(k.Properties))
		if len(props) == 1 {
			return fmt.Sprintf("additional property %q not allowed", props[0])
		}
		return "additional properties " + quoteAll(props) + " not allowed"
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = display(w)
		}
		if len(want) == 1 {
			return "value must be " + want[0]
		}
		return "value must be one of " + strings.Join(want, ", ")
	case *kind.Const:
		return "value must be " + display(k.Want)
	case *kind.Pattern:
		return fmt.Sprintf("%s does not match pattern %q", display(k.Got), k.Want)
	case *kind.AnyOf:
		return "value does not match any of the allowed schemas (anyOf)"
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			return "value does not match any of the allowed schemas (oneOf)"
		}
		return "value matches more than one of the allowed schemas (oneOf)"
	case *kind.FalseSchema:
		return "value not allowed"
	// Numbers are printed plainly; the library's printer would add
	// thousands separators.
	case *kind.Minimum:
		return bound("minimum", k.Got, k.Want)
	case *kind.Maximum:
		return bound("maximum", k.Got, k.Want)
	case *kind.ExclusiveMinimum:
		return bound("exclusiveMinimum", k.Got, k.Want)
	case *kind.ExclusiveMaximum:
		return bound("exclusiveMaximum", k.Got, k.Want)
	case *kind.MultipleOf:
		return bound("multipleOf", k.Got, k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("minLength: got %d, want %d", k.Got, k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("maxLength: got %d, want %d", k.Got, k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("minItems: got %d, want %d", k.Got, k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("maxItems: got %d, want %d", k.Got, k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("minProperties: got %d, want %d", k.Got, k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("maxProperties: got %d, want %d", k.Got, k.Want)
	}
	// The library renders a lone kind with its own (English) printer.
	return (&jsonschema.ValidationError{ErrorKind: k}).BasicOutput().Error.String()
}

// bound renders a numeric-limit failure such as "minimum: got 3, want 5".
func bound(keyword string, got, want *big.Rat) string {
	return keyword + ": got " + number(got) + ", want " + number(want)
}

// number prints a rational exactly when it is an integer and as a short
// decimal otherwise.
func number(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// quoteAll renders names as a comma-separated list of quoted strings.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
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
	if len(b) > maxDisplay {
		return string(b[:maxDisplay]) + "…"
	}
	return string(b)
}

// pointer encodes instance-location tokens as a JSON pointer (RFC 6901).
func pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		sb.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return sb.String()
}
