package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxDepth is the deepest nesting of objects and arrays accepted, the same
// limit as encoding/json (the top-level object counts as depth 1).
const maxDepth = 10000

// Sentinels wrapped by the errors Decode returns, so that a caller can answer
// with the right JSON-RPC code via errors.As.
var (
	errParse          = &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error"}
	errInvalidRequest = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}
)

// wireError is an error with a complete human-readable message that wraps a
// *jsonrpc.Error carrying the JSON-RPC code.
type wireError struct {
	msg  string
	code *jsonrpc.Error
}

func (e *wireError) Error() string { return e.msg }
func (e *wireError) Unwrap() error { return e.code }

// syntaxError reports malformed JSON at byte offset off.
func syntaxError(off int, format string, args ...any) error {
	return &wireError{
		msg:  fmt.Sprintf("wire: invalid JSON at offset %d: ", off) + fmt.Sprintf(format, args...),
		code: errParse,
	}
}

// invalidError reports valid JSON that is not a valid message.
func invalidError(format string, args ...any) error {
	return &wireError{msg: "wire: " + fmt.Sprintf(format, args...), code: errInvalidRequest}
}

// quoteChar renders the byte c for an error message.
func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := fmt.Sprintf("%q", string([]byte{c}))
	return "'" + s[1:len(s)-1] + "'"
}

func errAt(data []byte, i int, context string) error {
	if i >= len(data) {
		return syntaxError(i, "unexpected end of input %s", context)
	}
	return syntaxError(i, "invalid character %s %s", quoteChar(data[i]), context)
}

// skipWS returns the index of the first byte at or after i that is not JSON
// whitespace.
func skipWS(data []byte, i int) int {
	for i < len(data) && data[i] <= ' ' {
		switch data[i] {
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

// strEscaped is the skipString flag of a string that contains a backslash
// escape.
const strEscaped = 1

// skipString validates the JSON string starting at data[i] == '"' and returns
// the index just after its closing quote, and strEscaped when it contains an
// escape. Like encoding/json, it does not check UTF-8.
func skipString(data []byte, i int) (int, int, error) {
	flags := 0
	j := i + 1
	for {
		// Skip plain bytes, 8 at a time while possible. The lowest set bit
		// of t marks the first special byte: each term of t can only have
		// false positives above its lowest true positive.
		for j+8 <= len(data) {
			x := binary.LittleEndian.Uint64(data[j:])
			q := x ^ (lsb * '"')
			b := x ^ (lsb * '\\')
			t := ((q - lsb) &^ q) | ((b - lsb) &^ b) | ((x - lsb*0x20) &^ x)
			if t &= msb; t != 0 {
				j += bits.TrailingZeros64(t) >> 3
				goto special
			}
			j += 8
		}
		for j < len(data) && plainStr[data[j]] {
			j++
		}
	special:
		if j >= len(data) {
			return j, flags, syntaxError(j, "unexpected end of input in string literal")
		}
		switch c := data[j]; c {
		case '"':
			return j + 1, flags, nil
		case '\\':
			flags = strEscaped
			if j+1 >= len(data) {
				return j + 1, flags, syntaxError(j+1, "unexpected end of input in string escape code")
			}
			switch data[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				for k := j + 2; k < j+6; k++ {
					if k >= len(data) {
						return k, flags, syntaxError(k, "unexpected end of input in \\u escape")
					}
					if hexVal(data[k]) < 0 {
						return k, flags, syntaxError(k, "invalid character %s in \\u escape", quoteChar(data[k]))
					}
				}
				j += 6
			default:
				return j + 1, flags, syntaxError(j+1, "invalid character %s in string escape code", quoteChar(data[j+1]))
			}
		default:
			return j, flags, syntaxError(j, "invalid character %s in string literal", quoteChar(c))
		}
	}
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// skipNumber validates the JSON number starting at data[i] and returns the
// index just after it.
func skipNumber(data []byte, i int) (int, error) {
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	switch {
	case j >= len(data):
		return j, syntaxError(j, "unexpected end of input in numeric literal")
	case data[j] == '0':
		j++
	case '1' <= data[j] && data[j] <= '9':
		j++
		for j < len(data) && isDigit(data[j]) {
			j++
		}
	default:
		return j, errAt(data, j, "in numeric literal")
	}
	if j < len(data) && data[j] == '.' {
		j++
		if j >= len(data) || !isDigit(data[j]) {
			return j, errAt(data, j, "after decimal point in numeric literal")
		}
		for j < len(data) && isDigit(data[j]) {
			j++
		}
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		if j >= len(data) || !isDigit(data[j]) {
			return j, errAt(data, j, "in exponent of numeric literal")
		}
		for j < len(data) && isDigit(data[j]) {
			j++
		}
	}
	return j, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipLiteral validates the literal lit (true, false or null) at data[i].
func skipLiteral(data []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(data) || data[i+k] != lit[k] {
			return i + k, errAt(data, i+k, "in literal "+lit)
		}
	}
	return i + len(lit), nil
}

// skipKey validates an object key and the colon after it, starting at the key's
// opening quote. It returns the index of the value after the colon (with
// whitespace skipped), and the end of the key (after its closing quote).
func skipKey(data []byte, i int) (next, keyEnd, flags int, err error) {
	if i >= len(data) || data[i] != '"' {
		return i, i, 0, errAt(data, i, "looking for beginning of object key string")
	}
	keyEnd, flags, err = skipString(data, i)
	if err != nil {
		return keyEnd, keyEnd, flags, err
	}
	j := skipWS(data, keyEnd)
	if j >= len(data) || data[j] != ':' {
		return j, keyEnd, flags, errAt(data, j, "after object key")
	}
	return skipWS(data, j+1), keyEnd, flags, nil
}

// skipValue validates the JSON value that starts at data[i] (after any
// whitespace) and returns the index just after it. depth is the number of
// containers enclosing the value.
func skipValue(data []byte, i, depth int) (int, error) {
	var stackBuf [64]bool
	stack := stackBuf[:0] // true for an object, false for an array
	var err error
value:
	for {
		i = skipWS(data, i)
		if i >= len(data) {
			return i, syntaxError(i, "unexpected end of input looking for beginning of value")
		}
		switch c := data[i]; c {
		case '"':
			if i, _, err = skipString(data, i); err != nil {
				return i, err
			}
		case '{', '[':
			if depth+len(stack)+1 > maxDepth {
				return i, syntaxError(i, "exceeded maximum nesting depth of %d", maxDepth)
			}
			isObj := c == '{'
			i = skipWS(data, i+1)
			if i < len(data) && ((isObj && data[i] == '}') || (!isObj && data[i] == ']')) {
				i++
				break
			}
			stack = append(stack, isObj)
			if isObj {
				if i, _, _, err = skipKey(data, i); err != nil {
					return i, err
				}
			}
			continue value
		case 't':
			if i, err = skipLiteral(data, i, "true"); err != nil {
				return i, err
			}
		case 'f':
			if i, err = skipLiteral(data, i, "false"); err != nil {
				return i, err
			}
		case 'n':
			if i, err = skipLiteral(data, i, "null"); err != nil {
				return i, err
			}
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			if i, err = skipNumber(data, i); err != nil {
				return i, err
			}
		default:
			return i, errAt(data, i, "looking for beginning of value")
		}
		// A value is complete: close containers until one continues.
		for len(stack) > 0 {
			i = skipWS(data, i)
			isObj := stack[len(stack)-1]
			if i < len(data) {
				switch data[i] {
				case ',':
					i = skipWS(data, i+1)
					if isObj {
						if i, _, _, err = skipKey(data, i); err != nil {
							return i, err
						}
					}
					continue value
				case '}':
					if isObj {
						stack = stack[:len(stack)-1]
						i++
						continue
					}
				case ']':
					if !isObj {
						stack = stack[:len(stack)-1]
						i++
						continue
					}
				}
			}
			if isObj {
				return i, errAt(data, i, "after object key:value pair")
			}
			return i, errAt(data, i, "after array element")
		}
		return i, nil
	}
}

// member is one top-level member of an object: the key including its quotes,
// and the value.
type member struct {
	keyStart, keyEnd int
	keyFlags         int
	valStart, valEnd int
	valFlags         int // skipString flags when the value is a string
}

// objectIter walks the members of a JSON object, validating it.
type objectIter struct {
	data  []byte
	i     int
	first bool
	done  bool
	depth int
}

// newObjectIter starts iterating the object at data[i] (after whitespace);
// depth is the object's own nesting depth (1 for a top-level object). what
// names the value in the error returned when it is valid JSON but not an
// object.
func newObjectIter(data []byte, i, depth int, what string) (objectIter, error) {
	i = skipWS(data, i)
	if i < len(data) && data[i] == '{' {
		return objectIter{data: data, i: i + 1, first: true, depth: depth}, nil
	}
	end, err := skipValue(data, i, depth-1)
	if err != nil {
		return objectIter{}, err
	}
	if depth == 1 {
		it := objectIter{data: data, i: end}
		if err := it.finish(); err != nil {
			return objectIter{}, err
		}
	}
	return objectIter{}, invalidError("%s is %s, not a JSON object", what, kindOf(data[i]))
}

// kindOf names the kind of JSON value starting with c.
func kindOf(c byte) string {
	switch c {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// next returns the next member, or ok == false at the end of the object.
func (it *objectIter) next() (m member, ok bool, err error) {
	if it.done {
		return member{}, false, nil
	}
	data := it.data
	i := skipWS(data, it.i)
	if it.first {
		it.first = false
		if i < len(data) && data[i] == '}' {
			it.done, it.i = true, i+1
			return member{}, false, nil
		}
	} else {
		if i >= len(data) {
			return member{}, false, errAt(data, i, "after object key:value pair")
		}
		switch data[i] {
		case '}':
			it.done, it.i = true, i+1
			return member{}, false, nil
		case ',':
			i = skipWS(data, i+1)
		default:
			return member{}, false, errAt(data, i, "after object key:value pair")
		}
	}
	m.keyStart = i
	i, m.keyEnd, m.keyFlags, err = skipKey(data, i)
	if err != nil {
		return member{}, false, err
	}
	m.valStart = i
	if i < len(data) && data[i] == '"' {
		i, m.valFlags, err = skipString(data, i)
	} else {
		i, err = skipValue(data, i, it.depth)
	}
	if err != nil {
		return member{}, false, err
	}
	m.valEnd = i
	it.i = i
	return m, true, nil
}

// finish checks that only whitespace follows the object.
func (it *objectIter) finish() error {
	i := skipWS(it.data, it.i)
	if i != len(it.data) {
		return syntaxError(i, "invalid character %s after top-level value", quoteChar(it.data[i]))
	}
	return nil
}

// Valid reports whether data is exactly one valid JSON value, optionally
// surrounded by whitespace, with the same rules as encoding/json's Valid:
// nesting deeper than 10000 is rejected and invalid UTF-8 inside strings is
// accepted.
func Valid(data []byte) bool {
	i, err := skipValue(data, 0, 0)
	return err == nil && skipWS(data, i) == len(data)
}
