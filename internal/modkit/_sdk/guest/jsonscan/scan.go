// Package jsonscan is the one JSON scanner, member walker and string
// writer of edge-mcp, shared by the gateway (internal/wire, internal/openai,
// internal/search, policy) and the guest SDK (guest, guest/jsonlite). It
// was guest/jsontext, renamed so as not to be confused with the standard
// library's encoding/json/jsontext.
//
// It works on raw bytes and never builds a tree: it skips and validates
// values, walks the members of objects and the elements of arrays, decodes
// string literals and writes Go strings as JSON string literals. It has no
// build constraints, uses no reflection and imports only small parts of the
// standard library, because it is compiled into every WebAssembly policy
// module.
//
// The rules are those of RFC 8259 as encoding/json applies them:
//
//   - Validation agrees with encoding/json.Valid, including the nesting
//     limit of [MaxDepth] and the acceptance of invalid UTF-8 inside strings.
//   - Decoding a string agrees with encoding/json.Unmarshal: invalid UTF-8
//     and unpaired surrogate escapes become U+FFFD.
//   - Writing a string ([AppendString]) escapes '"', '\\' and control
//     characters (\b, \f, \n, \r and \t in their short forms, the others as
//     \u00XX) and replaces invalid UTF-8 with \ufffd, so the output is always
//     valid UTF-8. Unlike encoding/json it does not escape '<', '>', '&',
//     U+2028 or U+2029, which JSON does not require.
package jsonscan

import (
	"errors"
	"math/bits"
	"strconv"
)

// MaxDepth is the deepest nesting of objects and arrays accepted, the same
// limit as encoding/json (a top-level object or array counts as depth 1).
const MaxDepth = 10000

// ErrSyntax is wrapped by every error that reports malformed JSON.
var ErrSyntax = errors.New("jsonscan: invalid JSON")

// SyntaxError reports malformed JSON: what is wrong, in the words
// encoding/json uses, and the byte offset where it was found.
type SyntaxError struct {
	Msg    string
	Offset int
}

func (e *SyntaxError) Error() string {
	return ErrSyntax.Error() + " at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Unwrap makes errors.Is(err, ErrSyntax) hold.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

func syntaxErr(off int, msg string) error { return &SyntaxError{Msg: msg, Offset: off} }

// quoteChar renders the byte c for an error message, as encoding/json does.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string([]byte{c}))
	return "'" + s[1:len(s)-1] + "'"
}

// errAt reports the byte at b[i] (or the end of the input) as unexpected in
// the given context, e.g. "after array element".
func errAt(b []byte, i int, context string) error {
	if i >= len(b) {
		return syntaxErr(i, "unexpected end of input "+context)
	}
	return syntaxErr(i, "invalid character "+quoteChar(b[i])+" "+context)
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plainStr[c] is true for the bytes that may appear unescaped in a JSON
// string and need no attention: all but '"', '\\' and control characters.
var plainStr = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// load64 reads eight bytes little-endian (the compiler merges the loads).
func load64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// SkipString validates the string literal starting at b[i], which must be
// '"', and returns the index just after its closing quote and whether it
// contains a backslash escape. Like encoding/json it does not check UTF-8.
//
// Plain bytes are skipped eight per iteration: the lowest set bit of t
// marks the first quote, backslash or control character, as each term of t
// can only have false positives above its lowest true positive. (Inside a
// metered WebAssembly guest every loop iteration has a fixed cost, so fewer,
// fatter iterations are much faster there too.)
func SkipString(b []byte, i int) (end int, escaped bool, err error) {
	j := i + 1
	for {
		for j+8 <= len(b) {
			x := load64(b[j:])
			q := x ^ (lsb * '"')
			s := x ^ (lsb * '\\')
			t := ((q - lsb) &^ q) | ((s - lsb) &^ s) | ((x - lsb*0x20) &^ x)
			if t &= msb; t != 0 {
				j += bits.TrailingZeros64(t) >> 3
				goto special
			}
			j += 8
		}
		for j < len(b) && plainStr[b[j]] {
			j++
		}
	special:
		if j >= len(b) {
			return j, escaped, syntaxErr(j, "unexpected end of input in string literal")
		}
		switch c := b[j]; c {
		case '"':
			return j + 1, escaped, nil
		case '\\':
			escaped = true
			if j+1 < len(b) && unescape[b[j+1]] != 0 {
				j += 2 // a two-byte escape such as \n
			} else if j, err = skipEscape(b, j); err != nil {
				return j, escaped, err
			}
		default:
			return j, escaped, syntaxErr(j, "invalid character "+quoteChar(c)+" in string literal")
		}
	}
}

// skipEscape validates the escape sequence at b[j] == '\\' and returns the
// index just after it.
func skipEscape(b []byte, j int) (int, error) {
	if j+1 >= len(b) {
		return j + 1, syntaxErr(j+1, "unexpected end of input in string escape code")
	}
	switch b[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return j + 2, nil
	case 'u':
		for k := j + 2; k < j+6; k++ {
			if k >= len(b) {
				return k, syntaxErr(k, "unexpected end of input in \\u escape")
			}
			if hexVal(b[k]) < 0 {
				return k, syntaxErr(k, "invalid character "+quoteChar(b[k])+" in \\u escape")
			}
		}
		return j + 6, nil
	}
	return j + 1, syntaxErr(j+1, "invalid character "+quoteChar(b[j+1])+" in string escape code")
}

func hexVal(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipDigits returns the index of the first non-digit at or after j.
func skipDigits(b []byte, j int) int {
	for j < len(b) && isDigit(b[j]) {
		j++
	}
	return j
}

// SkipNumber validates the number starting at b[i] (RFC 8259: an optional
// minus, an integer part without leading zeros, an optional fraction and
// an optional exponent) and returns the index just after it.
func SkipNumber(b []byte, i int) (int, error) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j >= len(b):
		return j, syntaxErr(j, "unexpected end of input in numeric literal")
	case b[j] == '0':
		j++
	case '1' <= b[j] && b[j] <= '9':
		j = skipDigits(b, j+1)
	default:
		return j, errAt(b, j, "in numeric literal")
	}
	if j < len(b) && b[j] == '.' {
		j++
		if j >= len(b) || !isDigit(b[j]) {
			return j, errAt(b, j, "after decimal point in numeric literal")
		}
		j = skipDigits(b, j)
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || !isDigit(b[j]) {
			return j, errAt(b, j, "in exponent of numeric literal")
		}
		j = skipDigits(b, j)
	}
	return j, nil
}

// skipLiteral validates true, false or null at b[i], whose first byte has
// been checked.
func skipLiteral(b []byte, i int) (int, error) {
	lit := "null"
	switch b[i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	}
	for k := 1; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			return i + k, errAt(b, i+k, "in literal "+lit)
		}
	}
	return i + len(lit), nil
}

// SkipValue validates the JSON value that starts at b[i] (after optional
// white space) and returns the index just after it.
func SkipValue(b []byte, i int) (int, error) { return SkipNested(b, i, 0) }

// SkipNested is SkipValue for a value enclosed in depth objects or arrays,
// which count towards MaxDepth.
func SkipNested(b []byte, i, depth int) (int, error) {
	var stackBuf [64]bool
	stack := stackBuf[:0] // the open containers: true for an object
	var err error
	for {
		// One value, or the opening of a container.
		i = SkipSpace(b, i)
		switch {
		case i < len(b) && b[i] == '"':
			i, _, err = SkipString(b, i)
		case i < len(b) && (b[i] == '{' || b[i] == '['):
			open := len(stack)
			if i, stack, err = openContainer(b, i, depth, stack); err == nil && len(stack) > open {
				continue // i is at the container's first value
			}
		default:
			i, err = skipScalar(b, i)
		}
		if err != nil {
			return i, err
		}
		// The value is complete: close containers until one continues.
		for len(stack) > 0 {
			i = SkipSpace(b, i)
			isObj := stack[len(stack)-1]
			if i < len(b) && b[i] == ',' {
				if i = SkipSpace(b, i+1); isObj {
					i, _, _, err = SkipKey(b, i)
				}
				break
			}
			closer := byte(']')
			if isObj {
				closer = '}'
			}
			if i >= len(b) || b[i] != closer {
				_, _, err = Next(b, i, isObj) // the error for b[i]
				return i, err
			}
			stack = stack[:len(stack)-1]
			i++
		}
		if err != nil || len(stack) == 0 {
			return i, err
		}
	}
}

// openContainer opens the object or array at b[i]. An empty one is skipped
// whole; otherwise it is pushed on stack and the index of its first value
// (after the key, in an object) is returned.
func openContainer(b []byte, i, depth int, stack []bool) (int, []bool, error) {
	if depth+len(stack)+1 > MaxDepth {
		return i, stack, syntaxErr(i, "exceeded maximum nesting depth of "+strconv.Itoa(MaxDepth))
	}
	c := b[i]
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == c+2 { // '}' and ']' follow '{' and '[' by 2
		return i + 1, stack, nil
	}
	stack = append(stack, c == '{')
	if c != '{' {
		return i, stack, nil
	}
	i, _, _, err := SkipKey(b, i)
	return i, stack, err
}

// skipScalar skips the literal or number at b[i].
func skipScalar(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, syntaxErr(i, "unexpected end of input looking for beginning of value")
	}
	switch b[i] {
	case 't', 'f', 'n':
		return skipLiteral(b, i)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return SkipNumber(b, i)
	}
	return i, errAt(b, i, "looking for beginning of value")
}

// SkipKey validates an object key and the colon after it, starting at the
// key's opening quote. It returns the index of the value after the colon
// (white space skipped), the end of the key (after its closing quote), and
// whether the key contains escapes.
func SkipKey(b []byte, i int) (next, keyEnd int, escaped bool, err error) {
	if i >= len(b) || b[i] != '"' {
		return i, i, false, errAt(b, i, "looking for beginning of object key string")
	}
	keyEnd, escaped, err = SkipString(b, i)
	if err != nil {
		return keyEnd, keyEnd, escaped, err
	}
	j := SkipSpace(b, keyEnd)
	if j >= len(b) || b[j] != ':' {
		return j, keyEnd, escaped, errAt(b, j, "after object key")
	}
	return SkipSpace(b, j+1), keyEnd, escaped, nil
}

// Next follows a member value (inObject) or an array element ending at
// b[i]: it skips white space and then either the comma before the next
// one, returning the index after it (white space skipped), or the closing
// brace or bracket, returning done and the index after it.
func Next(b []byte, i int, inObject bool) (next int, done bool, err error) {
	i = SkipSpace(b, i)
	if i < len(b) {
		switch b[i] {
		case ',':
			return SkipSpace(b, i+1), false, nil
		case '}':
			if inObject {
				return i + 1, true, nil
			}
		case ']':
			if !inObject {
				return i + 1, true, nil
			}
		}
	}
	if inObject {
		return i, false, errAt(b, i, "after object key:value pair")
	}
	return i, false, errAt(b, i, "after array element")
}

// Finish checks that only white space follows a top-level value ending at
// b[i].
func Finish(b []byte, i int) error {
	if i = SkipSpace(b, i); i != len(b) {
		return syntaxErr(i, "invalid character "+quoteChar(b[i])+" after top-level value")
	}
	return nil
}

// Valid reports whether b is exactly one JSON value, optionally surrounded
// by white space, with the rules of encoding/json.Valid: nesting deeper than
// MaxDepth is rejected and invalid UTF-8 inside strings is accepted.
func Valid(b []byte) bool {
	i, err := SkipValue(b, 0)
	return err == nil && SkipSpace(b, i) == len(b)
}
