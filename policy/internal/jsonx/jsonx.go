// Package jsonx holds the few allocation-free JSON helpers the policy host
// needs to build hook inputs and pick guest outputs apart. The walkers
// (Members, Elements) assume their input already passed encoding/json.Valid;
// on anything else they stop with ErrMalformed and never panic.
package jsonx

import (
	"bytes"
	"errors"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// ErrMalformed is returned by the walkers when the input is not the JSON
// kind they expect.
var ErrMalformed = errors.New("malformed JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// Kind returns the first non-space byte of a JSON value ('{', '[', '"',
// 't', 'f', 'n', or a number's first byte), or 0 for empty input.
func Kind(v []byte) byte {
	i := skipSpace(v, 0)
	if i >= len(v) {
		return 0
	}
	return v[i]
}

// IsObject reports whether the (valid) JSON value v is an object.
func IsObject(v []byte) bool { return Kind(v) == '{' }

// skipValue returns the index just past the valid JSON value starting at or
// after i, or -1 when the input ends first.
func skipValue(b []byte, i int) int {
	i = skipSpace(b, i)
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index just past the string literal at b[i]
// (assumed valid), or -1.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		q := i + j
		// The quote closes the string unless an odd number of
		// backslashes escapes it.
		n := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// Members calls fn for each member of the valid JSON object obj with the raw
// key literal (quotes included) and the raw value.
func Members(obj []byte, fn func(key, val []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ErrMalformed
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return ErrMalformed
		}
		ke := skipString(obj, i)
		if ke < 0 {
			return ErrMalformed
		}
		key := obj[i:ke]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return ErrMalformed
		}
		vs := skipSpace(obj, i+1)
		ve := skipValue(obj, vs)
		if ve < 0 {
			return ErrMalformed
		}
		if err := fn(key, obj[vs:ve]); err != nil {
			return err
		}
		i = skipSpace(obj, ve)
		if i >= len(obj) {
			return ErrMalformed
		}
		if obj[i] == '}' {
			return nil
		}
		if obj[i] != ',' {
			return ErrMalformed
		}
		i++
	}
	return ErrMalformed
}

// Elements calls fn for each element of the valid JSON array arr.
func Elements(arr []byte, fn func(val []byte) error) error {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return ErrMalformed
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for i < len(arr) {
		vs := skipSpace(arr, i)
		ve := skipValue(arr, vs)
		if ve < 0 {
			return ErrMalformed
		}
		if err := fn(arr[vs:ve]); err != nil {
			return err
		}
		i = skipSpace(arr, ve)
		if i >= len(arr) {
			return ErrMalformed
		}
		if arr[i] == ']' {
			return nil
		}
		if arr[i] != ',' {
			return ErrMalformed
		}
		i++
	}
	return ErrMalformed
}

// KeyIs reports whether the raw key literal equals name. Keys with escapes
// are decoded first.
func KeyIs(rawKey []byte, name string) bool {
	if len(rawKey) == len(name)+2 && string(rawKey[1:len(rawKey)-1]) == name {
		return true
	}
	for _, c := range rawKey {
		if c == '\\' {
			s, err := Unquote(rawKey)
			return err == nil && s == name
		}
	}
	return false
}

// Unquote decodes a valid JSON string literal.
func Unquote(lit []byte) (string, error) {
	s, ok := wire.Unquote(lit)
	if !ok {
		return "", ErrMalformed
	}
	return s, nil
}

// AppendString appends s as a JSON string literal; invalid UTF-8 becomes
// U+FFFD. It is the gateway codec's (internal/wire).
func AppendString(dst []byte, s string) []byte { return wire.AppendString(dst, s) }
