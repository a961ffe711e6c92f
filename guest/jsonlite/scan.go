// Package jsonlite is a small, reflection-free JSON reader and writer for
// policy modules.
//
// It exists because encoding/json is slow inside a WebAssembly guest (the
// reflection and allocation it does cost ten times what the same work costs
// natively). jsonlite offers three layers, cheapest first:
//
//   - scanning helpers over raw bytes (SkipValue, Members, Elements, Lookup,
//     Unquote) that never build a tree;
//   - RewriteStrings, a streaming pass that hands every string value to a
//     callback and copies everything else through untouched;
//   - Value, a tiny ordered document tree (Parse, Get, Set, AppendJSON) for
//     modules that restructure content.
//
// The package is plain Go with no build constraints, so it is tested and
// fuzzed natively; package guest re-uses it inside the guest.
package jsonlite

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrSyntax is wrapped by every error that reports malformed JSON.
var ErrSyntax = errors.New("jsonlite: invalid JSON")

// SyntaxError reports malformed JSON and where it was found.
type SyntaxError struct {
	Msg    string
	Offset int
}

func (e *SyntaxError) Error() string {
	return ErrSyntax.Error() + ": " + e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Unwrap makes errors.Is(err, ErrSyntax) hold.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

func syntaxErr(i int, what string) error {
	return &SyntaxError{Msg: what, Offset: i}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// SkipValue validates the JSON value that starts at b[i] (after optional
// white space) and returns the index just past it.
func SkipValue(b []byte, i int) (int, error) {
	return skipValue(b, i, 0)
}

const maxDepth = 512

func skipValue(b []byte, i int, depth int) (int, error) {
	i = SkipSpace(b, i)
	if i >= len(b) {
		return i, syntaxErr(i, "unexpected end of input")
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{':
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
			var err error
			if i, err = skipString(b, i); err != nil {
				return i, err
			}
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, syntaxErr(i, "expected ':'")
			}
			if i, err = skipValue(b, i+1, depth+1); err != nil {
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
	case c == '[':
		if depth >= maxDepth {
			return i, syntaxErr(i, "nesting too deep")
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(b, i, depth+1); err != nil {
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
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	default:
		return i, syntaxErr(i, "unexpected character")
	}
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, syntaxErr(i, "invalid literal")
	}
	return i + len(lit), nil
}

func skipNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, syntaxErr(start, "invalid number")
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, syntaxErr(start, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, syntaxErr(start, "invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, syntaxErr(start, "invalid number")
		}
	}
	return i, nil
}

// strStop marks the bytes that end a run of plain string content.
var strStop = func() (t [256]uint8) {
	for c := 0; c < 0x20; c++ {
		t[c] = 1
	}
	t['"'], t['\\'] = 1, 1
	return t
}()

// skipString validates the string literal at b[i] (which must be '"') and
// returns the index just past its closing quote. Plain content is skipped
// eight bytes per iteration: inside a WebAssembly guest with deadline
// enforcement every loop iteration has a fixed cost, so fewer, fatter
// iterations are much faster.
func skipString(b []byte, i int) (int, error) {
	start := i
	i++
	for i < len(b) {
		for i+8 <= len(b) {
			c := b[i : i+8 : i+8]
			if strStop[c[0]]|strStop[c[1]]|strStop[c[2]]|strStop[c[3]]|strStop[c[4]]|strStop[c[5]]|strStop[c[6]]|strStop[c[7]] != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, syntaxErr(start, "unterminated string")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, syntaxErr(i, "short \\u escape")
				}
				for _, h := range b[i+2 : i+6] {
					if unhex(h) < 0 {
						return i, syntaxErr(i, "invalid \\u escape")
					}
				}
				i += 6
			default:
				return i, syntaxErr(i, "invalid escape")
			}
		case c < 0x20:
			return i, syntaxErr(i, "control character in string")
		default:
			i++
		}
	}
	return i, syntaxErr(start, "unterminated string")
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// Valid reports whether b holds exactly one JSON value (white space around it
// is allowed).
func Valid(b []byte) bool {
	i, err := SkipValue(b, 0)
	return err == nil && SkipSpace(b, i) == len(b)
}

// Members calls fn for every member of the JSON object obj, in order, with
// the decoded key and the raw value bytes (a sub-slice of obj). It stops
// early when fn returns false. Key slices may alias obj or a scratch buffer
// and are valid only during the callback.
func Members(obj []byte, fn func(key, val []byte) bool) error {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return syntaxErr(i, "expected object")
	}
	i = SkipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return trailing(obj, i+1)
	}
	var scratch []byte
	for {
		i = SkipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return syntaxErr(i, "expected object key")
		}
		ks := i
		end, err := skipString(obj, i)
		if err != nil {
			return err
		}
		key := obj[ks+1 : end-1]
		if hasEscape(key) {
			scratch, err = AppendUnquoted(scratch[:0], obj[ks:end])
			if err != nil {
				return err
			}
			key = scratch
		}
		i = SkipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return syntaxErr(i, "expected ':'")
		}
		vs := SkipSpace(obj, i+1)
		ve, err := SkipValue(obj, vs)
		if err != nil {
			return err
		}
		if !fn(key, obj[vs:ve]) {
			return nil
		}
		i = SkipSpace(obj, ve)
		if i >= len(obj) {
			return syntaxErr(i, "unterminated object")
		}
		if obj[i] == '}' {
			return trailing(obj, i+1)
		}
		if obj[i] != ',' {
			return syntaxErr(i, "expected ',' or '}'")
		}
		i++
	}
}

// Elements calls fn for every element of the JSON array arr, in order, with
// the raw element bytes. It stops early when fn returns false.
func Elements(arr []byte, fn func(val []byte) bool) error {
	i := SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return syntaxErr(i, "expected array")
	}
	i = SkipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return trailing(arr, i+1)
	}
	for {
		vs := SkipSpace(arr, i)
		ve, err := SkipValue(arr, vs)
		if err != nil {
			return err
		}
		if !fn(arr[vs:ve]) {
			return nil
		}
		i = SkipSpace(arr, ve)
		if i >= len(arr) {
			return syntaxErr(i, "unterminated array")
		}
		if arr[i] == ']' {
			return trailing(arr, i+1)
		}
		if arr[i] != ',' {
			return syntaxErr(i, "expected ',' or ']'")
		}
		i++
	}
}

func trailing(b []byte, i int) error {
	if SkipSpace(b, i) != len(b) {
		return syntaxErr(i, "trailing data")
	}
	return nil
}

// Lookup returns the raw value of the member named key in the JSON object
// obj. It reports false when obj is not an object or has no such member.
func Lookup(obj []byte, key string) ([]byte, bool) {
	var found []byte
	ok := false
	_ = Members(obj, func(k, v []byte) bool {
		if string(k) == key {
			found, ok = v, true
			return false
		}
		return true
	})
	return found, ok
}

func hasEscape(s []byte) bool {
	for _, c := range s {
		if c == '\\' {
			return true
		}
	}
	return false
}

// Unquote decodes the JSON string literal s (including its quotes).
func Unquote(s []byte) (string, error) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' && !hasEscape(s[1:len(s)-1]) {
		inner := s[1 : len(s)-1]
		for _, c := range inner {
			if c < 0x20 || c == '"' {
				return "", syntaxErr(0, "invalid string")
			}
		}
		return string(inner), nil
	}
	b, err := AppendUnquoted(nil, s)
	return string(b), err
}

// AppendUnquoted appends the decoded contents of the JSON string literal s
// (including its quotes) to dst.
func AppendUnquoted(dst, s []byte) ([]byte, error) {
	if len(s) < 2 || s[0] != '"' {
		return dst, syntaxErr(0, "expected string")
	}
	end, err := skipString(s, 0)
	if err != nil {
		return dst, err
	}
	if end != len(s) {
		return dst, syntaxErr(end, "trailing data after string")
	}
	s = s[1 : len(s)-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := i + 1
			for j < len(s) && s[j] != '\\' {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		switch s[i+1] {
		case '"', '\\', '/':
			dst = append(dst, s[i+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2 = hex4(s[i+2 : i+6])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					i += 6
					r = dec
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		}
		i += 2
	}
	return dst, nil
}

func hex4(h []byte) rune {
	return unhex(h[0])<<12 | unhex(h[1])<<8 | unhex(h[2])<<4 | unhex(h[3])
}

const hexDigits = "0123456789abcdef"

// AppendString appends s to dst as a JSON string literal. Invalid UTF-8 is
// replaced by U+FFFD so the output is always valid JSON text.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendBytes is AppendString for a byte slice.
func AppendBytes(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
