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
// The scanning and string writing are those of package jsonscan, which the
// gateway uses too, so guest and host agree on what is valid JSON (the
// rules of encoding/json, nesting up to 10000 deep) and on how strings are
// decoded (invalid UTF-8 and unpaired surrogates become U+FFFD) and written.
//
// The package is plain Go with no build constraints, so it is tested and
// fuzzed natively; package guest re-uses it inside the guest.
package jsonlite

import (
	"unicode/utf8"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// ErrSyntax is wrapped by every error that reports malformed JSON.
var ErrSyntax = jsonscan.ErrSyntax

// SyntaxError reports malformed JSON and where it was found.
type SyntaxError = jsonscan.SyntaxError

// maxDepth is the deepest nesting of objects and arrays accepted.
const maxDepth = jsonscan.MaxDepth

func syntaxErr(i int, what string) error {
	return &SyntaxError{Msg: what, Offset: i}
}

// tooDeep is the error for nesting beyond maxDepth at b[i].
func tooDeep(i int) error { return syntaxErr(i, "exceeded maximum nesting depth of 10000") }

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int { return jsonscan.SkipSpace(b, i) }

// SkipValue validates the JSON value that starts at b[i] (after optional
// white space) and returns the index just past it.
func SkipValue(b []byte, i int) (int, error) { return jsonscan.SkipValue(b, i) }

// Valid reports whether b holds exactly one JSON value (white space around it
// is allowed).
func Valid(b []byte) bool { return jsonscan.Valid(b) }

// Members calls fn for every member of the JSON object obj, in order, with
// the decoded key and the raw value bytes (a sub-slice of obj). It stops
// early when fn returns false. Key slices may alias obj or a scratch buffer
// and are valid only during the callback.
func Members(obj []byte, fn func(key, val []byte) bool) error {
	var scratch []byte
	stopped := false
	end, err := jsonscan.Members(obj, 0, func(m jsonscan.Member) bool {
		key := m.Key(obj)
		if m.KeyEscaped || !utf8.Valid(key) {
			scratch = jsonscan.AppendUnquoted(scratch[:0], key)
			key = scratch
		}
		stopped = !fn(key, m.Value(obj))
		return !stopped
	})
	if err != nil || stopped {
		return err
	}
	return jsonscan.Finish(obj, end)
}

// Elements calls fn for every element of the JSON array arr, in order, with
// the raw element bytes. It stops early when fn returns false.
func Elements(arr []byte, fn func(val []byte) bool) error {
	stopped := false
	end, err := jsonscan.Elements(arr, 0, func(e []byte) bool {
		stopped = !fn(e)
		return !stopped
	})
	if err != nil || stopped {
		return err
	}
	return jsonscan.Finish(arr, end)
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

// Unquote decodes the JSON string literal s (including its quotes).
func Unquote(s []byte) (string, error) { return jsonscan.Unquote(s) }

// AppendUnquoted appends the decoded contents of the JSON string literal s
// (including its quotes) to dst.
func AppendUnquoted(dst, s []byte) ([]byte, error) {
	if len(s) == 0 || s[0] != '"' {
		return dst, syntaxErr(0, "expected string")
	}
	end, _, err := jsonscan.SkipString(s, 0)
	if err != nil {
		return dst, err
	}
	if end != len(s) {
		return dst, syntaxErr(end, "trailing data after string")
	}
	return jsonscan.AppendUnquoted(dst, s[1:end-1]), nil
}

// AppendString appends s to dst as a JSON string literal. Invalid UTF-8 is
// replaced by U+FFFD so the output is always valid JSON text.
func AppendString(dst []byte, s string) []byte { return jsonscan.AppendString(dst, s) }

// AppendBytes is AppendString for a byte slice.
func AppendBytes(dst, s []byte) []byte { return jsonscan.AppendBytes(dst, s) }
