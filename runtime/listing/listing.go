// Package listing encodes the list results the gateway serves
// (tools/list, prompts/list, resources/list, resources/templates/list):
// once per catalogue snapshot, in pages, behind the gateway's own opaque
// cursors, so that a list request costs a slice lookup; and it decodes an
// upstream's list result into its items and next cursor. Everything here
// is a pure function of its arguments, safe for concurrent use.
package listing

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// Pages encodes the list results of items, whose definitions raw returns,
// under the result member member ("tools", ...), pageSize items a page
// (0 or less: one page); there is always at least one page.
func Pages[T any](member string, items []T, raw func(T) json.RawMessage, pageSize int) []json.RawMessage {
	if pageSize <= 0 {
		pageSize = len(items)
	}
	var pages []json.RawMessage
	for start := 0; start == 0 || start < len(items); start += pageSize {
		end := min(start+pageSize, len(items))
		var b bytes.Buffer
		b.WriteString(`{"`)
		b.WriteString(member)
		b.WriteString(`":[`)
		for i, it := range items[start:end] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(raw(it))
		}
		b.WriteByte(']')
		if end < len(items) {
			b.WriteString(`,"nextCursor":`)
			b.Write(wire.AppendString(nil, EncodeCursor(end)))
		}
		b.WriteByte('}')
		pages = append(pages, b.Bytes())
		if pageSize == 0 {
			break
		}
	}
	return pages
}

// Page returns the list result for cursor ("" for the first page) from
// pages, encoded by Pages from items with pageSize.
func Page[T any](pages []json.RawMessage, member string, items []T, raw func(T) json.RawMessage, cursor string, pageSize int) (json.RawMessage, error) {
	if cursor == "" {
		return pages[0], nil
	}
	off, err := DecodeCursor(cursor)
	if err != nil {
		return nil, err
	}
	if pageSize <= 0 || off%pageSize != 0 {
		// Not a page boundary of this snapshot (the catalogue changed in
		// between): encode the requested slice on the fly.
		return Pages(member, items[min(off, len(items)):], raw, 0)[0], nil
	}
	i := off / pageSize
	if i >= len(pages) {
		return Pages(member, items[:0], raw, 0)[0], nil
	}
	return pages[i], nil
}

// Same reports whether two encodings of a list are the same.
func Same(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// EncodeCursor is the gateway's cursor of offset, opaque to clients:
// base64 of "o:<offset>".
func EncodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(offset)))
}

// DecodeCursor is the offset of a cursor EncodeCursor made.
func DecodeCursor(cursor string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || !bytes.HasPrefix(b, []byte("o:")) {
		return 0, fmt.Errorf("invalid cursor %q", cursor)
	}
	n, err := strconv.Atoi(string(b[2:]))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid cursor %q", cursor)
	}
	return n, nil
}

// Parse splits an upstream's list result of method into the definitions
// under member and the next cursor ("" at the end).
func Parse(result json.RawMessage, method, member string) (raws []json.RawMessage, next string, _ error) {
	var page map[string]json.RawMessage
	if err := json.Unmarshal(result, &page); err != nil {
		return nil, "", fmt.Errorf("decoding %s result: %w", method, err)
	}
	if v, ok := page[member]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &raws); err != nil {
			return nil, "", fmt.Errorf("decoding %s result member %q: %w", method, member, err)
		}
	}
	if v, ok := page["nextCursor"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &next); err != nil {
			return nil, "", fmt.Errorf("decoding %s nextCursor: %w", method, err)
		}
	}
	return raws, next, nil
}
