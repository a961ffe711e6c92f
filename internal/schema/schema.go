// Package schema validates MCP tool-call arguments against the tool's
// inputSchema before the gateway forwards the call upstream.
//
// Schemas are parsed and resolved with github.com/google/jsonschema-go. The
// dialect named by a schema's "$schema" keyword is honoured; draft-07 and
// 2020-12 (the two that occur in MCP tool schemas) are supported, and a
// schema without "$schema" is treated as 2020-12. References are resolved
// only inside the schema itself: any "$ref" that would need loading a
// document (http, https, file or any other URL) fails resolution, and so
// does a "$schema" naming any other dialect, so validation never touches
// the network or the file system.
//
// Arguments are checked by a walk over the parsed schema that reports every
// failure with the JSON pointer of the failing location and a short
// message (the library's own errors name schema locations, not argument
// locations). They are refused only when the library's validator refuses
// them too, so the walk explains rejections but never causes one; where
// the library alone objects, the arguments are accepted (it compares
// decimals such as "multipleOf": 0.01 in floating point and rejects valid
// numbers). A "$dynamicRef" is left to the library, whose message is then
// reported for the arguments as a whole.
//
// A schema that cannot be used yields an error wrapping [ErrBadSchema]: one
// that is not JSON, not a well-formed schema, in an unsupported dialect,
// with a regular expression Go cannot compile, with a "$ref" outside the
// schema or with references that would make validation loop forever. The
// gateway is expected to let such a call through and log the problem: a
// broken upstream schema must not make the tool unusable, and the upstream
// server still validates its own input.
package schema

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

var (
	// ErrBadSchema reports an inputSchema that cannot be used: invalid
	// JSON, not a well-formed schema, an unsupported "$schema", a regular
	// expression Go cannot compile, a "$ref" outside the schema or a cycle
	// of references.
	ErrBadSchema = errors.New("invalid input schema")

	// errRemoteRef is returned by the loader for every document it is asked
	// to fetch, and reported for a "$schema" naming an unsupported dialect.
	errRemoteRef = errors.New("refused: only references inside the schema are allowed")

	// errNumberRange reports arguments holding a number beyond float64.
	errNumberRange = errors.New("number out of range")
)

// DefaultMaxEntries is the cache size used when NewValidator is given a
// non-positive size.
const DefaultMaxEntries = 512

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
	sch  *compiled
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
// ErrBadSchema when the schema cannot be used. Arguments holding a number
// too large for a float64 (such as 1e400) are not checked and yield nil.
func (v *Validator) Validate(schema, args json.RawMessage) error {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil
	}
	sch, err := v.compiled(schema)
	if err != nil {
		return err
	}
	inst, err := decodeArgs(args)
	if errors.Is(err, errNumberRange) {
		return nil // cannot be represented faithfully; the upstream decides
	}
	if err != nil {
		return &ValidationError{
			Message: "arguments are not valid JSON",
			All:     []Detail{{Message: "arguments are not valid JSON"}},
		}
	}
	return sch.validate(inst)
}

// compiled returns the compiled form of schema, from the cache when
// possible.
func (v *Validator) compiled(schema []byte) (*compiled, error) {
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

// decodeArgs parses the tool-call arguments, treating absent or null
// arguments as {}. Numbers become float64, as the library expects; one that
// overflows float64 yields errNumberRange.
func decodeArgs(args []byte) (any, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		// For an any, a type error can only be a number ParseFloat refuses.
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return nil, fmt.Errorf("decoding arguments: %w", errNumberRange)
		}
		return nil, fmt.Errorf("decoding arguments: %w", err)
	}
	return v, nil
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

// newValidationError sorts the failures by path, then message, drops
// duplicates and wraps them in a ValidationError. all must not be empty.
func newValidationError(all []Detail) *ValidationError {
	slices.SortStableFunc(all, func(a, b Detail) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	all = slices.Compact(all)
	return &ValidationError{Path: all[0].Path, Message: all[0].Message, All: all}
}
