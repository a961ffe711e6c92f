package wire

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

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

// parseError turns an error of the scanner (package jsonscan), which reports
// malformed JSON, into a parse error.
func parseError(err error) error {
	if se, ok := err.(*jsonscan.SyntaxError); ok {
		return &wireError{msg: fmt.Sprintf("wire: invalid JSON at offset %d: %s", se.Offset, se.Msg), code: errParse}
	}
	return &wireError{msg: "wire: invalid JSON: " + err.Error(), code: errParse}
}

// invalidError reports valid JSON that is not a valid message.
func invalidError(format string, args ...any) error {
	return &wireError{msg: "wire: " + fmt.Sprintf(format, args...), code: errInvalidRequest}
}

// member is one top-level member of an object.
type member = jsonscan.Member

// objectIter walks the members of a JSON object, validating it; its errors
// are parse errors.
type objectIter struct{ jsonscan.ObjectIter }

// newObjectIter starts iterating the object at data[i] (after whitespace);
// depth is the object's own nesting depth (1 for a top-level object). what
// names the value in the error returned when it is valid JSON but not an
// object.
func newObjectIter(data []byte, i, depth int, what string) (objectIter, error) {
	i = jsonscan.SkipSpace(data, i)
	if i < len(data) && data[i] == '{' {
		return objectIter{jsonscan.NewObjectIter(data, i, depth)}, nil
	}
	end, err := jsonscan.SkipNested(data, i, depth-1)
	if err != nil {
		return objectIter{}, parseError(err)
	}
	if depth == 1 {
		if err := jsonscan.Finish(data, end); err != nil {
			return objectIter{}, parseError(err)
		}
	}
	return objectIter{}, invalidError("%s is %s, not a JSON object", what, kindOf(data[i]))
}

// next returns the next member, or ok == false at the end of the object.
func (it *objectIter) next() (m member, ok bool, err error) {
	m, ok, err = it.Next()
	if err != nil {
		return m, false, parseError(err)
	}
	return m, ok, nil
}

// finish checks that only whitespace follows the (top-level) object.
func (it *objectIter) finish(data []byte) error {
	if err := jsonscan.Finish(data, it.Pos()); err != nil {
		return parseError(err)
	}
	return nil
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

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// Valid reports whether data is exactly one valid JSON value, optionally
// surrounded by whitespace, with the same rules as encoding/json's Valid:
// nesting deeper than 10000 is rejected and invalid UTF-8 inside strings is
// accepted.
func Valid(data []byte) bool { return jsonscan.Valid(data) }
