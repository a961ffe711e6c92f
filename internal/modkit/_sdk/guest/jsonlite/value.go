package jsonlite

import (
	"strconv"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// Kind is the type of a JSON value.
type Kind uint8

// The JSON value kinds. The zero Kind is Invalid, which a nil *Value reports.
const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	Array
	Object
)

// Value is a node of a parsed JSON document. Objects keep their members in
// document order and may hold duplicate keys exactly as the input did. All
// accessors are safe on a nil *Value, which behaves as a missing value.
type Value struct {
	kind    Kind
	b       bool
	s       string // string contents, or the number's literal text
	elems   []*Value
	members []Member
}

// Member is one key/value pair of an object.
type Member struct {
	Key   string
	Value *Value
}

// Parse parses b, which must hold exactly one JSON value.
func Parse(b []byte) (*Value, error) {
	p := parser{b: b}
	v, i, err := p.value(0, 0)
	if err != nil {
		return nil, err
	}
	if err := jsonscan.Finish(b, i); err != nil {
		return nil, err
	}
	return v, nil
}

type parser struct {
	b []byte
}

// value parses the value at b[i] (after white space), enclosed in depth
// containers, and returns it with the index just past it.
func (p *parser) value(i, depth int) (*Value, int, error) {
	b := p.b
	i = SkipSpace(b, i)
	if i < len(b) {
		switch b[i] {
		case '"':
			return p.str(i)
		case '{':
			return p.object(i, depth)
		case '[':
			return p.array(i, depth)
		}
	}
	j, err := jsonscan.SkipValue(b, i)
	if err != nil {
		return nil, j, err
	}
	return scalar(b[i:j]), j, nil
}

// scalar returns the value of a validated literal or number.
func scalar(lit []byte) *Value {
	switch lit[0] {
	case 't':
		return &Value{kind: Bool, b: true}
	case 'f':
		return &Value{kind: Bool}
	case 'n':
		return &Value{kind: Null}
	}
	return &Value{kind: Number, s: string(lit)}
}

func (p *parser) str(i int) (*Value, int, error) {
	e, esc, err := jsonscan.SkipString(p.b, i)
	if err != nil {
		return nil, e, err
	}
	return &Value{kind: String, s: jsonscan.UnquoteContent(p.b[i+1:e-1], esc)}, e, nil
}

func (p *parser) object(i, depth int) (*Value, int, error) {
	b := p.b
	if depth >= maxDepth {
		return nil, i, tooDeep(i)
	}
	v := &Value{kind: Object}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return v, i + 1, nil
	}
	for {
		next, ke, esc, err := jsonscan.SkipKey(b, i)
		if err != nil {
			return nil, next, err
		}
		key := jsonscan.UnquoteContent(b[i+1:ke-1], esc)
		m, j, err := p.value(next, depth+1)
		if err != nil {
			return nil, j, err
		}
		v.members = append(v.members, Member{Key: key, Value: m})
		var done bool
		if i, done, err = jsonscan.Next(b, j, true); err != nil || done {
			return v, i, err
		}
	}
}

func (p *parser) array(i, depth int) (*Value, int, error) {
	b := p.b
	if depth >= maxDepth {
		return nil, i, tooDeep(i)
	}
	v := &Value{kind: Array}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return v, i + 1, nil
	}
	for {
		e, j, err := p.value(i, depth+1)
		if err != nil {
			return nil, j, err
		}
		v.elems = append(v.elems, e)
		var done bool
		if i, done, err = jsonscan.Next(b, j, false); err != nil || done {
			return v, i, err
		}
	}
}

// NewString returns a string value.
func NewString(s string) *Value { return &Value{kind: String, s: s} }

// NewBool returns a boolean value.
func NewBool(b bool) *Value { return &Value{kind: Bool, b: b} }

// NewNull returns a null value.
func NewNull() *Value { return &Value{kind: Null} }

// NewInt returns a number value holding n.
func NewInt(n int64) *Value { return &Value{kind: Number, s: strconv.FormatInt(n, 10)} }

// NewObject returns an empty object.
func NewObject() *Value { return &Value{kind: Object} }

// NewArray returns an array holding elems.
func NewArray(elems ...*Value) *Value { return &Value{kind: Array, elems: elems} }

// Kind reports the value's kind; Invalid for a nil value.
func (v *Value) Kind() Kind {
	if v == nil {
		return Invalid
	}
	return v.kind
}

// Str returns the contents of a string value, or "" for any other kind.
func (v *Value) Str() string {
	if v == nil || v.kind != String {
		return ""
	}
	return v.s
}

// Truthy returns the value of a boolean, or false for any other kind.
func (v *Value) Truthy() bool { return v != nil && v.kind == Bool && v.b }

// Int returns a number value as an int64; ok is false for other kinds and
// for numbers that are not integers in range.
func (v *Value) Int() (n int64, ok bool) {
	if v == nil || v.kind != Number {
		return 0, false
	}
	n, err := strconv.ParseInt(v.s, 10, 64)
	return n, err == nil
}

// Float returns a number value as a float64.
func (v *Value) Float() (f float64, ok bool) {
	if v == nil || v.kind != Number {
		return 0, false
	}
	f, err := strconv.ParseFloat(v.s, 64)
	return f, err == nil
}

// Len returns the number of elements of an array or members of an object.
func (v *Value) Len() int {
	if v == nil {
		return 0
	}
	switch v.kind {
	case Array:
		return len(v.elems)
	case Object:
		return len(v.members)
	}
	return 0
}

// Elems returns the elements of an array (nil for other kinds). The slice
// is the value's own storage.
func (v *Value) Elems() []*Value {
	if v == nil || v.kind != Array {
		return nil
	}
	return v.elems
}

// SetElems replaces the elements of an array value.
func (v *Value) SetElems(elems []*Value) {
	if v != nil && v.kind == Array {
		v.elems = elems
	}
}

// Append adds elements to an array value.
func (v *Value) Append(elems ...*Value) {
	if v != nil && v.kind == Array {
		v.elems = append(v.elems, elems...)
	}
}

// Members returns the members of an object (nil for other kinds). The slice
// is the value's own storage.
func (v *Value) Members() []Member {
	if v == nil || v.kind != Object {
		return nil
	}
	return v.members
}

// Get returns the value of the first member named key, or nil.
func (v *Value) Get(key string) *Value {
	if v == nil || v.kind != Object {
		return nil
	}
	for _, m := range v.members {
		if m.Key == key {
			return m.Value
		}
	}
	return nil
}

// Has reports whether an object has a member named key.
func (v *Value) Has(key string) bool { return v.Get(key) != nil }

// Set replaces the value of the first member named key, or appends a new
// member when there is none.
func (v *Value) Set(key string, val *Value) {
	if v == nil || v.kind != Object {
		return
	}
	for i := range v.members {
		if v.members[i].Key == key {
			v.members[i].Value = val
			return
		}
	}
	v.members = append(v.members, Member{Key: key, Value: val})
}

// Delete removes every member named key.
func (v *Value) Delete(key string) {
	if v == nil || v.kind != Object {
		return
	}
	out := v.members[:0]
	for _, m := range v.members {
		if m.Key != key {
			out = append(out, m)
		}
	}
	v.members = out
}

// SetStr turns v into a string value holding s.
func (v *Value) SetStr(s string) {
	if v != nil {
		*v = Value{kind: String, s: s}
	}
}

// AppendJSON appends the compact JSON encoding of v to dst. A nil value
// encodes as null.
func (v *Value) AppendJSON(dst []byte) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	switch v.kind {
	case Null, Invalid:
		return append(dst, "null"...)
	case Bool:
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case Number:
		return append(dst, v.s...)
	case String:
		return AppendString(dst, v.s)
	case Array:
		dst = append(dst, '[')
		for i, e := range v.elems {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = e.AppendJSON(dst)
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		for i, m := range v.members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, m.Key)
			dst = append(dst, ':')
			dst = m.Value.AppendJSON(dst)
		}
		return append(dst, '}')
	}
}

// Strings returns the string elements of an array value, skipping
// elements of other kinds.
func (v *Value) Strings() []string {
	var out []string
	for _, e := range v.Elems() {
		if e.Kind() == String {
			out = append(out, e.s)
		}
	}
	return out
}
