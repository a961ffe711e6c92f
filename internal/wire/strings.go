package wire

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// plain[c] is true for the ASCII bytes that AppendString copies unescaped.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// AppendString appends s to dst as a JSON string. Quotes, backslashes and
// control characters are escaped; invalid UTF-8 is replaced by U+FFFD, as
// encoding/json does. HTML characters are not escaped.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
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
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
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
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

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
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '"' {
		return "", false
	}
	end, flags, err := skipString(raw, i)
	if err != nil || skipWS(raw, end) != len(raw) {
		return "", false
	}
	return unquoteContent(raw[i+1:end-1], flags), true
}

// unquoteContent converts the validated content of a JSON string (without
// quotes) with the given skipString flags to a Go string.
func unquoteContent(s []byte, flags int) string {
	if flags == 0 && utf8.Valid(s) {
		return string(s)
	}
	return string(appendUnescaped(make([]byte, 0, len(s)), s))
}

// appendUnescaped appends the decoded form of the validated string content s
// to dst, with the same replacement rules as encoding/json.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		// Escapes are validated by skipString.
		switch e := s[i+1]; e {
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
			r := getU4(s[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r = utf8.RuneError
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if d := utf16.DecodeRune(getU4(s[i-4:]), getU4(s[i+2:])); d != utf8.RuneError {
						r = d
						i += 6
					}
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i += 2
	}
	return dst
}

// getU4 decodes the four validated hex digits at the start of s.
func getU4(s []byte) rune {
	return rune(hexVal(s[0])<<12 | hexVal(s[1])<<8 | hexVal(s[2])<<4 | hexVal(s[3]))
}

// keyEquals reports whether the raw key data[m.keyStart:m.keyEnd] (quotes
// included) decodes to key.
func keyEquals(data []byte, m member, key string) bool {
	raw := data[m.keyStart+1 : m.keyEnd-1]
	if m.keyFlags&strEscaped == 0 {
		if string(raw) == key {
			// Invalid UTF-8 in raw would decode to U+FFFD.
			return utf8.ValidString(key)
		}
		// Only a key containing U+FFFD can equal raw with invalid UTF-8
		// replaced.
		if len(key) < 3 || !strings.Contains(key, "\uFFFD") {
			return false
		}
	}
	var buf [64]byte
	return string(appendUnescaped(buf[:0], raw)) == key
}
