package audit

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Redacted replaces secrets in the output of RedactSecrets.
const Redacted = "[REDACTED]"

// Leaf markers written by RedactArguments.
const (
	markerNumber = `"[number]"`
	markerBool   = `"[bool]"`
)

// RedactArguments returns a copy of the JSON value args in which every
// string, number and boolean is replaced by a marker string: "[string:N]"
// for a string of N characters, "[number]" and "[bool]". Object keys, array
// lengths and nulls are kept, so the result shows the shape of the value but
// none of its content. Invalid JSON yields the single marker
// "[invalid json:N bytes]". The result is always valid JSON.
func RedactArguments(args json.RawMessage) json.RawMessage {
	if !json.Valid(args) {
		return invalidMarker(args)
	}
	out, err := redact(args)
	if err != nil {
		// json.Valid accepted args, so the tokenizer cannot fail; stay safe
		// and reveal nothing if it does.
		return invalidMarker(args)
	}
	return out
}

func invalidMarker(args []byte) json.RawMessage {
	return json.RawMessage(strconv.Quote(fmt.Sprintf("[invalid json:%d bytes]", len(args))))
}

// frame is one open object or array while redacting.
type frame struct {
	object  bool
	members int  // members or elements written so far
	wantKey bool // in an object: the next token is a key
}

func redact(args []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var (
		out   bytes.Buffer
		stack []frame
	)
	out.Grow(len(args))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tokenizing arguments: %w", err)
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			out.WriteByte(byte(d))
			stack = stack[:len(stack)-1]
			continue
		}
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			if top.object && top.wantKey {
				if top.members > 0 {
					out.WriteByte(',')
				}
				writeString(&out, tok.(string))
				out.WriteByte(':')
				top.wantKey = false
				continue
			}
			if !top.object && top.members > 0 {
				out.WriteByte(',')
			}
			top.members++
			top.wantKey = top.object
		}
		switch v := tok.(type) {
		case json.Delim: // '{' or '['
			out.WriteByte(byte(v))
			stack = append(stack, frame{object: v == '{', wantKey: v == '{'})
		case string:
			writeString(&out, fmt.Sprintf("[string:%d]", utf8.RuneCountInString(v)))
		case json.Number:
			out.WriteString(markerNumber)
		case bool:
			out.WriteString(markerBool)
		case nil:
			out.WriteString("null")
		default:
			return nil, fmt.Errorf("unexpected JSON token %T", tok)
		}
	}
	return out.Bytes(), nil
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // marshalling a string cannot fail
	b.Write(q)
}

// RedactSecrets returns s with every occurrence of each non-empty secret
// replaced by Redacted. When secrets overlap, the longest match wins.
func RedactSecrets(s string, secrets ...string) string {
	sorted := make([]string, 0, len(secrets))
	for _, sec := range secrets {
		if sec != "" {
			sorted = append(sorted, sec)
		}
	}
	if len(sorted) == 0 {
		return s
	}
	// The Replacer tries candidates in argument order at each position, so
	// longer secrets go first.
	slices.SortStableFunc(sorted, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(sorted))
	for _, sec := range sorted {
		pairs = append(pairs, sec, Redacted)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}
