// Package wire encodes and decodes JSON-RPC 2.0 messages for edge-mcp without
// building trees: a message is decoded only as far as routing needs (id,
// method, and the raw params, result or error), and raw JSON values are carried
// through unchanged.
//
// The message types are the go-sdk's jsonrpc types, so connections built here
// and the go-sdk's own transports are interchangeable.
package wire

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// maxExactInt is the largest magnitude of an integer id: go-sdk ids pass
// through float64, which is exact up to 2^53.
const maxExactInt = 1 << 53

// Decode parses one JSON-RPC 2.0 message (a request, notification or
// response). The returned message's Params, Result and Error.Data alias data:
// the caller must not modify data afterwards.
//
// Decode rejects input that is not a single valid JSON object (nesting at
// most 10000 deep, nothing but whitespace after it), lacks "jsonrpc":"2.0",
// has an id that is not a string or integer, or is neither a request (has
// "method") nor a response (has "id", normally with "result" or "error").
//
// Request and response are told apart as the go-sdk's jsonrpc.DecodeMessage
// does: a message with a "method" member (even "method":null, which decodes as
// "") is a request, a notification when it has no id; otherwise it is a
// response and must have an id, and a response with neither "result" nor
// "error" is accepted. A null id counts as absent. Member names are matched
// case-sensitively after unescaping. Duplicate members follow encoding/json:
// the last one wins (a repeated "error" object updates the earlier one, and
// null leaves "jsonrpc", "code" and "message" unchanged), and every occurrence
// must have a valid type. Integer ids must lie within ±2^53 (the go-sdk stores
// them through float64); fractional ids are rejected rather than truncated.
// Strings are unescaped with invalid UTF-8 and unpaired surrogates replaced by
// U+FFFD.
//
// Errors wrap a *jsonrpc.Error (use errors.As) whose Code is
// jsonrpc.CodeParseError for malformed JSON and jsonrpc.CodeInvalidRequest for
// valid JSON that is not a valid message.
func Decode(data []byte) (jsonrpc.Message, error) {
	it, err := newObjectIter(data, 0, 1, "message")
	if err != nil {
		return nil, err
	}
	var d decoder
	for {
		m, ok, err := it.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		d.member(data, m)
	}
	if err := it.finish(data); err != nil {
		return nil, err
	}
	if d.invalid != nil {
		return nil, d.invalid
	}
	if err := d.checkVersion(data); err != nil {
		return nil, err
	}
	if d.haveMethod {
		return d.request(data)
	}
	return d.response(data)
}

// decoder collects the top-level members of a message that Decode uses.
type decoder struct {
	version        member // last non-null "jsonrpc"
	haveVersion    bool
	idKind         idKind
	idSpan         member // for a string id
	idInt          int64
	method         member // last "method"
	haveMethod     bool
	params, result member
	haveParams     bool
	haveResult     bool
	werr           errorState
	haveError      bool
	// invalid is the first error about a valid JSON value of the wrong
	// type; it is returned only when the whole input is valid JSON, so
	// that malformed input always gets a parse error.
	invalid error
}

// member records the top-level member m.
func (d *decoder) member(data []byte, m member) {
	switch messageKey(data, m) {
	case keyJSONRPC:
		d.versionMember(data[m.ValStart], m)
	case keyID:
		d.idMember(data, m)
	case keyMethod:
		d.method, d.haveMethod = m, true
	case keyParams:
		d.params, d.haveParams = m, true
	case keyResult:
		d.result, d.haveResult = m, true
	case keyError:
		d.errorMember(data, m)
	}
}

// fail records err unless an earlier member was already invalid.
func (d *decoder) fail(err error) { d.invalid = cmp.Or(d.invalid, err) }

func (d *decoder) versionMember(v byte, m member) {
	switch v {
	case '"':
		d.version, d.haveVersion = m, true
	case 'n': // null leaves a string field unchanged in encoding/json
	default:
		d.fail(invalidError("invalid jsonrpc version: must be the string \"2.0\", got %s", kindOf(v)))
	}
}

func (d *decoder) idMember(data []byte, m member) {
	switch v := data[m.ValStart]; {
	case v == '"':
		d.idKind, d.idSpan = idString, m
	case v == 'n':
		d.idKind = idNone
	case v == '-' || isDigit(v):
		n, err := parseID(data[m.ValStart:m.ValEnd])
		d.fail(err)
		d.idKind, d.idInt = idInteger, n
	default:
		d.fail(invalidError("invalid id: must be a string, an integer or null, got %s", kindOf(v)))
	}
}

func (d *decoder) errorMember(data []byte, m member) {
	switch v := data[m.ValStart]; v {
	case 'n':
		d.haveError = false
	case '{':
		// Like encoding/json decoding into a non-nil pointer, a repeated
		// "error" object updates the previous one.
		if !d.haveError {
			d.werr = errorState{}
		}
		d.fail(d.werr.decode(data, m))
		d.haveError = true
	default:
		d.fail(invalidError("invalid error: must be an object, got %s", kindOf(v)))
	}
}

// checkVersion checks for "jsonrpc":"2.0".
func (d *decoder) checkVersion(data []byte) error {
	if !d.haveVersion {
		return invalidError("missing jsonrpc version")
	}
	if raw := data[d.version.ValStart:d.version.ValEnd]; string(raw) != `"2.0"` {
		if s, _ := Unquote(raw); s != "2.0" {
			return invalidError("invalid jsonrpc version %q: must be \"2.0\"", s)
		}
	}
	return nil
}

func (d *decoder) request(data []byte) (jsonrpc.Message, error) {
	box := &requestBox{}
	req := &box.req
	box.st.setID(&req.ID, d.idKind, d.idInt, strContent(data, d.idSpan), d.idSpan.ValEscaped)
	switch data[d.method.ValStart] {
	case '"':
		req.Method = methodName(data, d.method, &box.st)
	case 'n': // null decodes to "" in the go-sdk
	default:
		return nil, invalidError("invalid method: must be a string, got %s", kindOf(data[d.method.ValStart]))
	}
	if d.haveParams {
		req.Params = sub(data, d.params)
	}
	return req, nil
}

func (d *decoder) response(data []byte) (jsonrpc.Message, error) {
	if d.idKind == idNone {
		return nil, invalidError("invalid message: no method (not a request) and no id (not a response)")
	}
	box := &responseBox{}
	resp := &box.resp
	box.st.setID(&resp.ID, d.idKind, d.idInt, strContent(data, d.idSpan), d.idSpan.ValEscaped)
	if d.haveResult {
		resp.Result = sub(data, d.result)
	}
	if d.haveError {
		e := &jsonrpc.Error{Code: d.werr.code}
		if d.werr.haveMessage {
			e.Message = jsonscan.UnquoteContent(strContent(data, d.werr.message), d.werr.message.ValEscaped)
		}
		if d.werr.haveData {
			e.Data = sub(data, d.werr.data)
		}
		resp.Error = e
	}
	return resp, nil
}

// requestBox and responseBox hold a decoded message together with the
// storage for its id and strings, so that decoding allocates once.
type requestBox struct {
	req jsonrpc.Request
	st  idStore
}

type responseBox struct {
	resp jsonrpc.Response
	st   idStore
}

// strContent returns the content (without quotes) of m's string value, or
// nil when m is not a string.
func strContent(data []byte, m member) []byte {
	if m.ValEnd-m.ValStart < 2 || data[m.ValStart] != '"' {
		return nil
	}
	return data[m.ValStart+1 : m.ValEnd-1]
}

type idKind uint8

const (
	idNone idKind = iota
	idString
	idInteger
)

// sub returns the value of m as a capacity-limited sub-slice of data.
func sub(data []byte, m member) json.RawMessage {
	return data[m.ValStart:m.ValEnd:m.ValEnd]
}

// errorState accumulates the members of the "error" object(s).
type errorState struct {
	code        int64
	message     member
	haveMessage bool
	data        member
	haveData    bool
}

func (e *errorState) decode(data []byte, obj member) error {
	it, err := newObjectIter(data, obj.ValStart, 2, "error")
	if err != nil {
		return err
	}
	for {
		m, ok, err := it.next()
		if err != nil || !ok {
			return err
		}
		v := data[m.ValStart]
		switch {
		case keyEquals(data, m, "code"):
			switch {
			case v == '-' || isDigit(v):
				n, ok := parseInt64(data[m.ValStart:m.ValEnd])
				if !ok {
					return invalidError("invalid error code %s: must be an integer", clip(data[m.ValStart:m.ValEnd]))
				}
				e.code = n
			case v == 'n':
			default:
				return invalidError("invalid error code: must be an integer, got %s", kindOf(v))
			}
		case keyEquals(data, m, "message"):
			switch v {
			case '"':
				e.message, e.haveMessage = m, true
			case 'n':
			default:
				return invalidError("invalid error message: must be a string, got %s", kindOf(v))
			}
		case keyEquals(data, m, "data"):
			e.data, e.haveData = m, true
		}
	}
}

// clip shortens raw for an error message.
func clip(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

// parseInt64 parses a validated JSON number that must be an integer within
// the int64 range.
func parseInt64(raw []byte) (int64, bool) {
	neg := raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	var u uint64
	for _, c := range raw {
		if !isDigit(c) {
			return 0, false
		}
		if u > (1<<63)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
		if u > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(u), true // -(1<<63) wraps to itself, which is correct
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

// parseID parses a validated JSON number used as an id.
func parseID(raw []byte) (int64, error) {
	n, ok := parseInt64(raw)
	if !ok {
		for _, c := range raw {
			if c == '.' || c == 'e' || c == 'E' {
				return 0, invalidError("invalid id: %s is not an integer", clip(raw))
			}
		}
	}
	if !ok || n > maxExactInt || n < -maxExactInt {
		return 0, invalidError("invalid id: integer %s is out of range (at most 2^53 in magnitude)", clip(raw))
	}
	return n, nil
}

type messageKeyKind uint8

const (
	keyOther messageKeyKind = iota
	keyJSONRPC
	keyID
	keyMethod
	keyParams
	keyResult
	keyError
)

// messageKey classifies a top-level member name of a message.
func messageKey(data []byte, m member) messageKeyKind {
	raw := data[m.KeyStart+1 : m.KeyEnd-1]
	if m.KeyEscaped {
		// An escaped spelling of a 7-byte name is at most 42 bytes long.
		if len(raw) > 42 {
			return keyOther
		}
		var buf [42]byte
		raw = jsonscan.AppendUnquoted(buf[:0], raw)
	}
	switch string(raw) {
	case "jsonrpc":
		return keyJSONRPC
	case "id":
		return keyID
	case "method":
		return keyMethod
	case "params":
		return keyParams
	case "result":
		return keyResult
	case "error":
		return keyError
	}
	return keyOther
}

// methodName returns the method string of m, without allocating for the
// methods of the MCP specification.
func methodName(data []byte, m member, st *idStore) string {
	raw := strContent(data, m)
	if s := knownMethod(raw); s != "" {
		return s
	}
	return st.str(raw, m.ValEscaped)
}

// knownMethod returns raw as a constant string when it is a method of the
// MCP specification, else "".
func knownMethod(raw []byte) string {
	const prefix = "notifications/"
	if len(raw) > len(prefix) && string(raw[:len(prefix)]) == prefix {
		return knownNotification(raw)
	}
	switch string(raw) {
	case "initialize":
		return "initialize"
	case "ping":
		return "ping"
	case "server/discover":
		return "server/discover"
	case "tools/list":
		return "tools/list"
	case "tools/call":
		return "tools/call"
	case "resources/list":
		return "resources/list"
	case "resources/templates/list":
		return "resources/templates/list"
	case "resources/read":
		return "resources/read"
	case "resources/subscribe":
		return "resources/subscribe"
	case "resources/unsubscribe":
		return "resources/unsubscribe"
	case "prompts/list":
		return "prompts/list"
	case "prompts/get":
		return "prompts/get"
	case "completion/complete":
		return "completion/complete"
	case "logging/setLevel":
		return "logging/setLevel"
	case "sampling/createMessage":
		return "sampling/createMessage"
	case "elicitation/create":
		return "elicitation/create"
	case "roots/list":
		return "roots/list"
	case "tasks/get":
		return "tasks/get"
	case "tasks/result":
		return "tasks/result"
	case "tasks/list":
		return "tasks/list"
	case "tasks/cancel":
		return "tasks/cancel"
	}
	return ""
}

// knownNotification is knownMethod for the notifications.
func knownNotification(raw []byte) string {
	switch string(raw) {
	case "notifications/initialized":
		return "notifications/initialized"
	case "notifications/progress":
		return "notifications/progress"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "notifications/message":
		return "notifications/message"
	case "notifications/resources/updated":
		return "notifications/resources/updated"
	case "notifications/resources/list_changed":
		return "notifications/resources/list_changed"
	case "notifications/tools/list_changed":
		return "notifications/tools/list_changed"
	case "notifications/prompts/list_changed":
		return "notifications/prompts/list_changed"
	case "notifications/roots/list_changed":
		return "notifications/roots/list_changed"
	case "notifications/tasks/status":
		return "notifications/tasks/status"
	case "notifications/elicitation/complete":
		return "notifications/elicitation/complete"
	}
	return ""
}

// Append appends the wire form of msg to dst. Raw values (params, result,
// error data) are copied as they are, without re-encoding, and must be valid
// JSON.
//
// A request without params omits "params"; a notification omits "id". A
// response always has an "id" (null when invalid) and exactly one of "error"
// and "result": a response with neither encodes "result":{}. An Error that is
// a *jsonrpc.Error is encoded with its code, message and data; any other error
// is encoded with its Error() text as message and the code of the
// *jsonrpc.Error it wraps, or jsonrpc.CodeInternalError when it wraps none.
func Append(dst []byte, msg jsonrpc.Message) ([]byte, error) {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m == nil {
			return dst, errors.New("wire: cannot encode a nil *jsonrpc.Request")
		}
		dst = slices.Grow(dst, 48+len(m.Method)+len(m.Params))
		dst = append(dst, `{"jsonrpc":"2.0"`...)
		if m.ID.IsValid() {
			dst = append(dst, `,"id":`...)
			dst = AppendID(dst, m.ID)
		}
		dst = append(dst, `,"method":`...)
		dst = AppendString(dst, m.Method)
		if len(m.Params) > 0 {
			dst = append(dst, `,"params":`...)
			dst = append(dst, m.Params...)
		}
		return append(dst, '}'), nil
	case *jsonrpc.Response:
		if m == nil {
			return dst, errors.New("wire: cannot encode a nil *jsonrpc.Response")
		}
		dst = slices.Grow(dst, 48+len(m.Result))
		dst = append(dst, `{"jsonrpc":"2.0","id":`...)
		dst = AppendID(dst, m.ID)
		if m.Error != nil {
			if e, ok := m.Error.(*jsonrpc.Error); !ok || e != nil {
				dst = append(dst, `,"error":`...)
				dst = appendError(dst, m.Error)
				return append(dst, '}'), nil
			}
		}
		if len(m.Result) == 0 {
			return append(dst, `,"result":{}}`...), nil
		}
		dst = append(dst, `,"result":`...)
		dst = append(dst, m.Result...)
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("wire: cannot encode message of type %T", msg)
}

// appendError appends the JSON-RPC error object for err.
func appendError(dst []byte, err error) []byte {
	var (
		code    int64 = jsonrpc.CodeInternalError
		message string
		data    json.RawMessage
	)
	if e, ok := err.(*jsonrpc.Error); ok {
		code, message, data = e.Code, e.Message, e.Data
	} else {
		message = err.Error()
		var wrapped *jsonrpc.Error
		if errors.As(err, &wrapped) && wrapped != nil {
			code = wrapped.Code
		}
	}
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, code, 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, message)
	if len(data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, data...)
	}
	return append(dst, '}')
}

// Encode returns the wire form of msg, as [Append] does.
func Encode(msg jsonrpc.Message) ([]byte, error) { return Append(nil, msg) }

// Field returns the raw JSON value of the top-level key in the JSON object
// obj, and whether it was present. When the key occurs more than once the
// last occurrence wins, as in encoding/json. The value aliases obj. Field
// returns an error when obj is not a valid JSON object.
func Field(obj []byte, key string) (json.RawMessage, bool, error) {
	it, err := newObjectIter(obj, 0, 1, "value")
	if err != nil {
		return nil, false, err
	}
	var found member
	ok := false
	for {
		m, more, err := it.next()
		if err != nil {
			return nil, false, err
		}
		if !more {
			break
		}
		if keyEquals(obj, m, key) {
			found, ok = m, true
		}
	}
	if err := it.finish(obj); err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, nil
	}
	return sub(obj, found), true, nil
}

// String returns the top-level key of obj as a Go string when obj is a valid
// JSON object and the key is present with a JSON string value.
func String(obj []byte, key string) (string, bool) {
	v, ok, err := Field(obj, key)
	if err != nil || !ok {
		return "", false
	}
	return Unquote(v)
}

// SetField returns a copy of the JSON object obj in which the top-level key
// has the raw JSON value value (replaced in place when present, appended
// otherwise). Other members keep their bytes and order. A nil or empty obj is
// treated as {}. Every occurrence of a duplicated key is replaced. It returns
// an error when obj is not a valid JSON object or value is not valid JSON.
func SetField(obj []byte, key string, value json.RawMessage) (json.RawMessage, error) {
	if !Valid(value) {
		return nil, fmt.Errorf("wire: setting %q: value is not valid JSON", key)
	}
	if len(obj) == 0 {
		out := make([]byte, 0, len(key)+len(value)+5)
		out = append(out, '{')
		out = AppendString(out, key)
		out = append(out, ':')
		out = append(out, value...)
		return append(out, '}'), nil
	}
	it, err := newObjectIter(obj, 0, 1, "value")
	if err != nil {
		return nil, err
	}
	open := it.Pos() // just after '{'
	var matchBuf [4]member
	matches := matchBuf[:0]
	insertAt := open
	members := 0
	for {
		m, more, err := it.next()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		members++
		insertAt = m.ValEnd
		if keyEquals(obj, m, key) {
			matches = append(matches, m)
		}
	}
	if err := it.finish(obj); err != nil {
		return nil, err
	}
	if len(matches) == 0 {
		out := make([]byte, 0, len(obj)+len(key)+len(value)+8)
		out = append(out, obj[:insertAt]...)
		if members > 0 {
			out = append(out, ',')
		}
		out = AppendString(out, key)
		out = append(out, ':')
		out = append(out, value...)
		return append(out, obj[insertAt:]...), nil
	}
	size := len(obj)
	for _, m := range matches {
		size += len(value) - (m.ValEnd - m.ValStart)
	}
	out := make([]byte, 0, size)
	from := 0
	for _, m := range matches {
		out = append(out, obj[from:m.ValStart]...)
		out = append(out, value...)
		from = m.ValEnd
	}
	return append(out, obj[from:]...), nil
}

// DeleteField returns a copy of obj without the top-level key (every
// occurrence of it), together with the comma that separated it. Other members
// keep their bytes and order. It returns an error when obj is not a valid JSON
// object.
func DeleteField(obj []byte, key string) (json.RawMessage, error) {
	it, err := newObjectIter(obj, 0, 1, "value")
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj))
	var (
		first      = true
		kept       bool // a member has been kept
		prevKept   bool // the previous member (in obj) was kept
		prevEnd    int  // end of the previous member's value
		sepS, sepE int  // separator after the last kept member
	)
	for {
		m, more, err := it.next()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		if first {
			out = append(out, obj[:m.KeyStart]...)
			first = false
		}
		if prevKept {
			sepS, sepE = prevEnd, m.KeyStart
		}
		prevEnd = m.ValEnd
		prevKept = !keyEquals(obj, m, key)
		if !prevKept {
			continue
		}
		if kept {
			out = append(out, obj[sepS:sepE]...)
		}
		out = append(out, obj[m.KeyStart:m.ValEnd]...)
		kept = true
	}
	if err := it.finish(obj); err != nil {
		return nil, err
	}
	if first { // no members at all
		return append(out, obj...), nil
	}
	return append(out, obj[prevEnd:]...), nil
}

// Member is a key and the raw JSON value [EditFields] gives it.
type Member struct {
	Key   string
	Value json.RawMessage
}

// EditFields returns a copy of the JSON object obj without the top-level
// members named in drop and with each member of set given its value:
// replaced in place where obj has the key (every occurrence), appended in
// the order of set otherwise. Other members keep their bytes and order. It
// is DeleteField of each key of drop followed by SetField of each member of
// set, in one pass and one allocation (only whitespace around dropped
// members may differ). A nil or empty obj is treated as {}. It returns an
// error when obj is not a valid JSON object or a value is not valid JSON.
func EditFields(obj []byte, drop []string, set []Member) (json.RawMessage, error) {
	size := len(obj) + 2
	for _, kv := range set {
		if !Valid(kv.Value) {
			// A copy: set's contents then do not escape, so callers can
			// build it on the stack.
			return nil, fmt.Errorf("wire: setting %q: value is not valid JSON", strings.Clone(kv.Key))
		}
		size += len(kv.Key) + len(kv.Value) + 8
	}
	if len(obj) == 0 {
		obj = []byte("{}")
	}
	it, err := newObjectIter(obj, 0, 1, "value")
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, size)
	var (
		found    []bool // found[i]: set[i] was replaced in place
		foundBuf [16]bool
		head     = it.Pos() // obj[:head] starts the result
		tail     = head     // obj[tail:] ends it
		first    = true
		kept     bool // a member has been written
		prevKept bool
		sep      []byte // separator after the last kept member
	)
	if len(set) <= len(foundBuf) {
		found = foundBuf[:len(set)]
	} else {
		found = make([]bool, len(set))
	}
	for {
		m, more, err := it.next()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		if first {
			head, first = m.KeyStart, false
			out = append(out, obj[:head]...)
		}
		if prevKept {
			sep = obj[tail:m.KeyStart]
		}
		tail = m.ValEnd
		prevKept = !keyIn(obj, m, drop)
		if !prevKept {
			continue
		}
		if kept {
			out = append(out, sep...)
		}
		kept = true
		if i := keyIndex(obj, m, set); i >= 0 {
			found[i] = true
			out = append(out, obj[m.KeyStart:m.ValStart]...)
			out = append(out, set[i].Value...)
			continue
		}
		out = append(out, obj[m.KeyStart:m.ValEnd]...)
	}
	if err := it.finish(obj); err != nil {
		return nil, err
	}
	if first {
		out = append(out, obj[:head]...)
	}
	for i, kv := range set {
		if found[i] {
			continue
		}
		if kept {
			out = append(out, ',')
		}
		kept = true
		out = appendKey(out, kv.Key)
		out = append(out, ':')
		out = append(out, kv.Value...)
	}
	return append(out, obj[tail:]...), nil
}

// appendKey is AppendString for a key, without letting key escape (so that
// EditFields' callers can build their members on the stack): a key of
// letters, digits and "/._-" (every key edited in practice) is copied as
// is, any other is quoted from a copy.
func appendKey(dst []byte, key string) []byte {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '/' || c == '.' || c == '_' || c == '-') {
			return AppendString(dst, strings.Clone(key))
		}
	}
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"')
}

func keyIn(data []byte, m member, keys []string) bool {
	for _, k := range keys {
		if keyEquals(data, m, k) {
			return true
		}
	}
	return false
}

func keyIndex(data []byte, m member, set []Member) int {
	for i, kv := range set {
		if keyEquals(data, m, kv.Key) {
			return i
		}
	}
	return -1
}
