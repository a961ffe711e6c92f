package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s to dst as a JSON string literal. '"', '\\' and
// control characters are escaped (\b, \f, \n, \r, \t in short form);
// invalid UTF-8 is replaced by \ufffd, so the output is valid UTF-8. HTML
// characters, U+2028 and U+2029 are not escaped.
func AppendString(dst []byte, s string) []byte { return appendQuoted(dst, s) }

// AppendBytes is AppendString for a byte slice.
func AppendBytes(dst, s []byte) []byte { return appendQuoted(dst, s) }

func appendQuoted[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainStr[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscape(dst, c)
			i++
			start = i
			continue
		}
		size := runeSize(s[i:min(i+utf8.UTFMax, len(s))])
		if size == 0 {
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

// runeSize returns the length of the valid UTF-8 sequence at the start of
// s (at most utf8.UTFMax bytes), or 0 when it is invalid.
func runeSize[T string | []byte](s T) int {
	r, size := utf8.DecodeRuneInString(string(s))
	if r == utf8.RuneError && size == 1 {
		return 0
	}
	return size
}

// appendEscape appends the escaped form of the ASCII byte c, a quote, a
// backslash or a control character.
func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// Unquote returns the Go string for lit, a JSON string literal (optionally
// surrounded by white space). Escapes are decoded; invalid UTF-8 and
// unpaired surrogates become U+FFFD, as in encoding/json.
func Unquote(lit []byte) (string, error) {
	i := SkipSpace(lit, 0)
	if i >= len(lit) || lit[i] != '"' {
		return "", errAt(lit, i, "looking for beginning of string")
	}
	end, escaped, err := SkipString(lit, i)
	if err != nil {
		return "", err
	}
	if err := Finish(lit, end); err != nil {
		return "", err
	}
	return UnquoteContent(lit[i+1:end-1], escaped), nil
}

// UnquoteContent converts the content of a string literal that SkipString
// accepted (without its quotes) to a Go string; escaped is what SkipString
// reported.
func UnquoteContent(content []byte, escaped bool) string {
	if !escaped && utf8.Valid(content) {
		return string(content)
	}
	return string(AppendUnquoted(make([]byte, 0, len(content)), content))
}

// AppendUnquoted appends the decoded form of content, the content of a
// string literal that SkipString accepted (without its quotes), to dst.
func AppendUnquoted(dst, content []byte) []byte {
	s := content
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		case c != '\\':
			dst = append(dst, c)
			i++
		case s[i+1] == 'u':
			var r rune
			r, i = decodeU(s, i)
			dst = utf8.AppendRune(dst, r)
		default:
			dst = append(dst, unescape[s[i+1]])
			i += 2
		}
	}
	return dst
}

// unescape maps the byte after a backslash to the byte it stands for.
var unescape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// decodeU decodes the validated \uXXXX escape at s[i], joined with a
// following low surrogate escape when it is a high surrogate, and returns
// the rune (U+FFFD for an unpaired surrogate) and the index after it.
func decodeU(s []byte, i int) (rune, int) {
	r := getU4(s[i+2:])
	i += 6
	if !utf16.IsSurrogate(r) {
		return r, i
	}
	if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
		if d := utf16.DecodeRune(r, getU4(s[i+2:])); d != utf8.RuneError {
			return d, i + 6
		}
	}
	return utf8.RuneError, i
}

// getU4 decodes the four validated hex digits at the start of s.
func getU4(s []byte) rune {
	return hexVal(s[0])<<12 | hexVal(s[1])<<8 | hexVal(s[2])<<4 | hexVal(s[3])
}

// KeyEquals reports whether a string literal's content (without quotes, as
// accepted by SkipString, which reported escaped) decodes to key.
func KeyEquals(content []byte, escaped bool, key string) bool {
	if !escaped {
		if string(content) == key {
			// Invalid UTF-8 in content would decode to U+FFFD.
			return utf8.ValidString(key)
		}
		// Only a key containing U+FFFD can equal content with invalid
		// UTF-8 replaced.
		if !containsRuneError(key) {
			return false
		}
	}
	var buf [64]byte
	return string(AppendUnquoted(buf[:0], content)) == key
}

func containsRuneError(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError {
			return true
		}
	}
	return false
}
