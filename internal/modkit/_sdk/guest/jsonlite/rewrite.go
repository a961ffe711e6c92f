package jsonlite

import (
	"unicode/utf8"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// StringFunc is called by RewriteStrings for every string value. key is the
// name of the nearest enclosing object member ("" at the top level); s is the
// decoded string. Both slices are valid only during the call. To change the
// string, return the replacement and true.
type StringFunc func(key, s []byte) (replacement []byte, changed bool)

// RewriteStrings walks the JSON value src and hands every string value (not
// object keys) to fn. Everything else is copied byte for byte, so a document
// in which fn changes nothing costs one scan and no allocation.
//
// When at least one string changed, the rewritten document is appended to
// dst and returned with changed set. Otherwise dst is returned as it was and
// the caller keeps using src.
func RewriteStrings(dst, src []byte, fn StringFunc) (out []byte, changed bool, err error) {
	r := rewriter{src: src, dst: dst, fn: fn}
	i, err := r.value(0, nil, 0)
	if err != nil {
		return dst, false, err
	}
	if err := jsonscan.Finish(src, i); err != nil {
		return dst, false, err
	}
	if !r.changed {
		return dst, false, nil
	}
	r.dst = append(r.dst, src[r.last:]...)
	return r.dst, true, nil
}

type rewriter struct {
	src, dst []byte
	last     int
	changed  bool
	fn       StringFunc
	scratch  []byte
	keybuf   []byte
}

// value rewrites the value at src[i] (after white space), enclosed in depth
// containers; key is the name of the nearest enclosing member.
func (r *rewriter) value(i int, key []byte, depth int) (int, error) {
	b := r.src
	i = SkipSpace(b, i)
	if i < len(b) {
		switch b[i] {
		case '"':
			return r.str(i, key)
		case '{':
			return r.object(i, depth)
		case '[':
			return r.array(i, key, depth)
		}
	}
	return jsonscan.SkipNested(b, i, depth)
}

func (r *rewriter) object(i, depth int) (int, error) {
	b := r.src
	if depth >= maxDepth {
		return i, tooDeep(i)
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		next, ke, esc, err := jsonscan.SkipKey(b, i)
		if err != nil {
			return next, err
		}
		k := b[i+1 : ke-1]
		if esc || !utf8.Valid(k) {
			r.keybuf = jsonscan.AppendUnquoted(r.keybuf[:0], k)
			k = r.keybuf
		}
		if i, err = r.value(next, k, depth+1); err != nil {
			return i, err
		}
		var done bool
		if i, done, err = jsonscan.Next(b, i, true); err != nil || done {
			return i, err
		}
	}
}

func (r *rewriter) array(i int, key []byte, depth int) (int, error) {
	b := r.src
	if depth >= maxDepth {
		return i, tooDeep(i)
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = r.value(i, key, depth+1); err != nil {
			return i, err
		}
		var done bool
		if i, done, err = jsonscan.Next(b, i, false); err != nil || done {
			return i, err
		}
	}
}

func (r *rewriter) str(i int, key []byte) (int, error) {
	e, esc, err := jsonscan.SkipString(r.src, i)
	if err != nil {
		return e, err
	}
	s := r.src[i+1 : e-1]
	if esc || !utf8.Valid(s) {
		r.scratch = jsonscan.AppendUnquoted(r.scratch[:0], s)
		s = r.scratch
	}
	repl, ok := r.fn(key, s)
	if !ok {
		return e, nil
	}
	r.dst = append(r.dst, r.src[r.last:i]...)
	r.dst = AppendBytes(r.dst, repl)
	r.last = e
	r.changed = true
	return e, nil
}
