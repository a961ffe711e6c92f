package wire

import (
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// AppendString appends s to dst as a JSON string. Quotes, backslashes and
// control characters are escaped; invalid UTF-8 is replaced by U+FFFD, as
// encoding/json does. HTML characters are not escaped.
func AppendString(dst []byte, s string) []byte { return jsonscan.AppendString(dst, s) }

// AppendID appends the JSON form of id to dst: a string, an integer, or null
// for an invalid (zero) id.
func AppendID(dst []byte, id jsonrpc.ID) []byte {
	switch v := id.Raw().(type) {
	case string:
		return AppendString(dst, v)
	case int64:
		return strconv.AppendInt(dst, v, 10)
	}
	return append(dst, "null"...)
}

// Unquote returns the Go string for raw, a JSON string value (optionally
// surrounded by whitespace), and whether raw was one. Escapes are decoded;
// invalid UTF-8 and unpaired surrogates become U+FFFD, as in encoding/json.
func Unquote(raw []byte) (string, bool) {
	s, err := jsonscan.Unquote(raw)
	return s, err == nil
}

// keyEquals reports whether the key of m decodes to key.
func keyEquals(data []byte, m member, key string) bool { return m.KeyIs(data, key) }
