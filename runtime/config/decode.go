package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reads the JSON token stream: syntax errors with line and
// column, objects with duplicate keys rejected, arrays, strings. What the
// values mean is in keys.go and values.go.

// decoder walks the token stream of one config file. Each method returns
// the first problem as a *Error.
type decoder struct {
	file string
	data []byte
	dec  *json.Decoder
}

// configString is a string value before environment expansion.
type configString struct {
	s, path string
	set     bool
}

// configPair is one entry of a string-to-string object, in file order.
type configPair struct {
	key string
	val configString
}

func (d *decoder) fail(key, format string, args ...any) *Error {
	return &Error{File: d.file, Key: key, Reason: fmt.Sprintf(format, args...)}
}

func configJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// position returns the 1-based line and column (in characters) of offset.
func (d *decoder) position(off int64) (line, col int) {
	if off < 0 {
		off = 0
	}
	if off > int64(len(d.data)) {
		off = int64(len(d.data))
	}
	before := d.data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

// token reads the next token, turning syntax errors into a *Error that
// points at the line and column.
func (d *decoder) token(key string) (json.Token, *Error) {
	t, err := d.dec.Token()
	if err == nil {
		return t, nil
	}
	// The decoder's offsets are not always absolute; a whole-input scan finds
	// the same first error with an exact offset (the byte after the culprit).
	var se *json.SyntaxError
	if !errors.As(json.Unmarshal(d.data, new(json.RawMessage)), &se) {
		return nil, d.fail(key, "invalid JSON: %v", err)
	}
	off, msg := se.Offset-1, strings.TrimPrefix(se.Error(), "json: ")
	if se.Offset >= int64(len(d.data)) && strings.Contains(msg, "unexpected end") {
		off, msg = int64(len(d.data)), "unexpected end of input"
	}
	line, col := d.position(off)
	return nil, d.fail(key, "invalid JSON at line %d, column %d: %s", line, col, msg)
}

// configKind describes a token's JSON type for error messages.
func configKind(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		if v == '[' {
			return "an array"
		}
		return "the end of a value"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", t)
}

// configShow describes a token, with its value, for fields that hold no
// secrets.
func configShow(t json.Token) string {
	switch v := t.(type) {
	case string:
		return configQuote(v)
	case json.Number:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	}
	return configKind(t)
}

// configQuote quotes s for an error message, shortening long values.
func configQuote(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

// members reads one JSON object at key, calling fn for each member with the
// member's key and full path; fn must consume the member's value. Repeated
// keys are rejected with dupReason.
func (d *decoder) members(key, dupReason string, fn func(k, path string) *Error) *Error {
	t, cerr := d.token(key)
	if cerr != nil {
		return cerr
	}
	if t != json.Delim('{') {
		if key == "" {
			return d.fail(key, "the file must hold a JSON object, got %s", configKind(t))
		}
		return d.fail(key, "must be an object, got %s", configKind(t))
	}
	seen := make(map[string]struct{})
	for d.dec.More() {
		t, cerr := d.token(key)
		if cerr != nil {
			return cerr
		}
		k, ok := t.(string)
		if !ok {
			return d.fail(key, "invalid JSON: expected an object key, got %s", configKind(t))
		}
		path := configJoin(key, k)
		if _, dup := seen[k]; dup {
			return d.fail(path, "%s", dupReason)
		}
		seen[k] = struct{}{}
		if cerr := fn(k, path); cerr != nil {
			return cerr
		}
	}
	_, cerr = d.token(key) // the closing brace; More saw it or a syntax error.
	return cerr
}

// array reads one JSON array of what ("strings", "objects") at key, calling
// fn for each element with its path; fn must consume the element. null is
// an empty array: in the config, empty and absent mean the same.
func (d *decoder) array(key, what string, fn func(path string) *Error) *Error {
	t, cerr := d.token(key)
	if cerr != nil || t == nil {
		return cerr
	}
	if t != json.Delim('[') {
		return d.fail(key, "must be an array of %s, got %s", what, configKind(t))
	}
	for i := 0; d.dec.More(); i++ {
		if cerr := fn(key + "[" + strconv.Itoa(i) + "]"); cerr != nil {
			return cerr
		}
	}
	_, cerr = d.token(key)
	return cerr
}

// str reads a JSON string at key without expanding it.
func (d *decoder) str(key string) (configString, *Error) {
	t, cerr := d.token(key)
	if cerr != nil {
		return configString{}, cerr
	}
	s, ok := t.(string)
	if !ok {
		return configString{}, d.fail(key, "must be a string, got %s", configKind(t))
	}
	return configString{s: s, path: key, set: true}, nil
}

// end rejects anything but white space after the top-level object.
func (d *decoder) end() *Error {
	off := d.dec.InputOffset()
	if _, err := d.dec.Token(); errors.Is(err, io.EOF) {
		return nil
	}
	for off < int64(len(d.data)) && strings.IndexByte(" \t\r\n", d.data[off]) >= 0 {
		off++
	}
	line, col := d.position(off)
	return d.fail("", "unexpected data after the top-level object at line %d, column %d", line, col)
}
