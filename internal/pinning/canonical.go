package pinning

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
)

// pinnedFields are the members of a tool definition that the fingerprint
// covers: everything a model reads or that shapes a call. Other members
// (_meta, icons, and whatever future revisions add) may change freely.
var pinnedFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// Fingerprint returns the hex SHA-256 of the canonical form of a tool
// definition's name, title, description, inputSchema, outputSchema and
// annotations. The canonical form sorts object keys recursively, drops
// insignificant whitespace and keeps numbers exactly as written, so key
// order, formatting and the ignored members do not affect the result.
//
// A definition that is not a JSON object is fingerprinted whole; one that is
// not valid JSON is fingerprinted as a JSON string of its raw bytes, so even
// garbage yields a stable fingerprint that changes when the bytes do.
func Fingerprint(tool json.RawMessage) string {
	return fingerprintCanonical(canonical(tool))
}

// fingerprintCanonical hashes an already canonical compact definition.
func fingerprintCanonical(canon []byte) string {
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// canonical returns the compact canonical form of the fingerprinted part of
// a tool definition. The result is always valid JSON, and canonical of the
// result is the result itself.
func canonical(tool []byte) []byte {
	v, err := decode(tool)
	if err != nil {
		// Not JSON: keep the bytes, as a string, so the stored definition
		// stays valid JSON and the diff still shows what changed.
		// Invalid UTF-8 is replaced first, so that the result is a
		// fixed point of canonical.
		v = strings.ToValidUTF8(string(tool), "\uFFFD")
	}
	if obj, ok := v.(map[string]any); ok {
		kept := make(map[string]any, len(pinnedFields))
		for _, f := range pinnedFields {
			if x, ok := obj[f]; ok {
				kept[f] = x
			}
		}
		v = kept
	}
	var buf bytes.Buffer
	writeValue(&buf, v, "", false)
	return buf.Bytes()
}

// pretty returns the indented canonical form of an already canonical
// definition, one member or element per line, for diffs.
func pretty(canon []byte) string {
	v, err := decode(canon)
	if err != nil { // cannot happen for canonical input; show it raw
		return string(canon)
	}
	var buf bytes.Buffer
	writeValue(&buf, v, "\n", true)
	return buf.String()
}

// decode parses exactly one JSON value, keeping numbers verbatim.
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

// writeValue writes v with sorted object keys. When pretty is set, nl is the
// newline plus the current indentation.
func writeValue(buf *bytes.Buffer, v any, nl string, pretty bool) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			buf.WriteString("{}")
			return
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		inner := nl + "  "
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if pretty {
				buf.WriteString(inner)
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if pretty {
				buf.WriteByte(' ')
			}
			writeValue(buf, v[k], inner, pretty)
		}
		if pretty {
			buf.WriteString(nl)
		}
		buf.WriteByte('}')
	case []any:
		if len(v) == 0 {
			buf.WriteString("[]")
			return
		}
		inner := nl + "  "
		buf.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if pretty {
				buf.WriteString(inner)
			}
			writeValue(buf, x, inner, pretty)
		}
		if pretty {
			buf.WriteString(nl)
		}
		buf.WriteByte(']')
	case string:
		writeString(buf, v)
	case json.Number:
		buf.WriteString(string(v))
	case bool:
		if v {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case nil:
		buf.WriteString("null")
	}
}

// writeString writes s as a JSON string without HTML escaping, so "<", ">"
// and "&" stay readable in diffs.
func writeString(buf *bytes.Buffer, s string) {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.WriteString(strings.TrimSuffix(sb.String(), "\n"))
}
