// Package jsonx holds the few allocation-free JSON helpers the policy host
// needs to build hook inputs and pick guest outputs apart, as a thin layer
// over package guest/jsonscan, the scanner and string writer the gateway and
// the guest SDK share. The walkers (Members, Elements) validate as they go;
// on malformed input they stop with an error wrapping ErrMalformed and never
// panic.
package jsonx

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// ErrMalformed is returned by the walkers when the input is not the JSON
// kind they expect.
var ErrMalformed = errors.New("malformed JSON")

// malformed wraps a scanner error as ErrMalformed.
func malformed(err error) error { return fmt.Errorf("%w: %v", ErrMalformed, err) }

// Kind returns the first non-space byte of a JSON value ('{', '[', '"',
// 't', 'f', 'n', or a number's first byte), or 0 for empty input.
func Kind(v []byte) byte {
	i := jsonscan.SkipSpace(v, 0)
	if i >= len(v) {
		return 0
	}
	return v[i]
}

// IsObject reports whether the (valid) JSON value v is an object.
func IsObject(v []byte) bool { return Kind(v) == '{' }

// Members calls fn for each member of the JSON object obj with the raw key
// literal (quotes included) and the raw value, stopping at fn's first error.
func Members(obj []byte, fn func(key, val []byte) error) error {
	var ferr error
	_, err := jsonscan.Members(obj, 0, func(m jsonscan.Member) bool {
		ferr = fn(obj[m.KeyStart:m.KeyEnd], m.Value(obj))
		return ferr == nil
	})
	if err != nil {
		return malformed(err)
	}
	return ferr
}

// Elements calls fn for each element of the JSON array arr, stopping at
// fn's first error.
func Elements(arr []byte, fn func(val []byte) error) error {
	var ferr error
	_, err := jsonscan.Elements(arr, 0, func(e []byte) bool {
		ferr = fn(e)
		return ferr == nil
	})
	if err != nil {
		return malformed(err)
	}
	return ferr
}

// KeyIs reports whether the raw key literal (quotes included, as Members
// passes it) decodes to name.
func KeyIs(rawKey []byte, name string) bool {
	if len(rawKey) < 2 {
		return false
	}
	content := rawKey[1 : len(rawKey)-1]
	return jsonscan.KeyEquals(content, bytes.IndexByte(content, '\\') >= 0, name)
}

// Unquote decodes a JSON string literal; invalid UTF-8 and unpaired
// surrogates become U+FFFD.
func Unquote(lit []byte) (string, error) {
	s, err := jsonscan.Unquote(lit)
	if err != nil {
		return "", malformed(err)
	}
	return s, nil
}

// AppendString appends s as a JSON string literal; invalid UTF-8 becomes
// U+FFFD.
func AppendString(dst []byte, s string) []byte { return jsonscan.AppendString(dst, s) }

// Valid reports whether b is exactly one JSON value (RFC 8259 syntax;
// white space around it allowed), agreeing with encoding/json.Valid.
func Valid(b []byte) bool { return jsonscan.Valid(b) }
