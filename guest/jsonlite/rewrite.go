package jsonlite

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
	if SkipSpace(src, i) != len(src) {
		return dst, false, syntaxErr(i, "trailing data")
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

func (r *rewriter) value(i int, key []byte, depth int) (int, error) {
	b := r.src
	i = SkipSpace(b, i)
	if i >= len(b) {
		return i, syntaxErr(i, "unexpected end of input")
	}
	switch b[i] {
	case '"':
		return r.str(i, key)
	case '{':
		if depth >= maxDepth {
			return i, syntaxErr(i, "nesting too deep")
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != '"' {
				return i, syntaxErr(i, "expected object key")
			}
			ks := i
			ke, err := skipString(b, i)
			if err != nil {
				return ke, err
			}
			k := b[ks+1 : ke-1]
			if hasEscape(k) {
				if r.keybuf, err = AppendUnquoted(r.keybuf[:0], b[ks:ke]); err != nil {
					return ke, err
				}
				k = r.keybuf
			}
			i = SkipSpace(b, ke)
			if i >= len(b) || b[i] != ':' {
				return i, syntaxErr(i, "expected ':'")
			}
			if i, err = r.value(i+1, k, depth+1); err != nil {
				return i, err
			}
			i = SkipSpace(b, i)
			if i >= len(b) {
				return i, syntaxErr(i, "unterminated object")
			}
			if b[i] == '}' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return i, syntaxErr(i, "expected ',' or '}'")
			}
			i++
		}
	case '[':
		if depth >= maxDepth {
			return i, syntaxErr(i, "nesting too deep")
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
			i = SkipSpace(b, i)
			if i >= len(b) {
				return i, syntaxErr(i, "unterminated array")
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return i, syntaxErr(i, "expected ',' or ']'")
			}
			i++
		}
	default:
		return skipValue(b, i, depth)
	}
}

func (r *rewriter) str(i int, key []byte) (int, error) {
	e, err := skipString(r.src, i)
	if err != nil {
		return e, err
	}
	s := r.src[i+1 : e-1]
	if hasEscape(s) {
		if r.scratch, err = AppendUnquoted(r.scratch[:0], r.src[i:e]); err != nil {
			return e, err
		}
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
