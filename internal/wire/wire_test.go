package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	if n, ok := v.(int); ok {
		v = float64(n)
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestDecodeRequests(t *testing.T) {
	deep := strings.Repeat("[", 9998) + strings.Repeat("]", 9998)
	tests := []struct {
		name   string
		in     string
		id     any // nil, int or string
		method string
		params string // "" for absent
	}{
		{"call with int id", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, 1, "tools/call", `{"name":"x"}`},
		{"call with string id", `{"jsonrpc":"2.0","id":"abc","method":"ping"}`, "abc", "ping", ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, "notifications/initialized", ""},
		{"null id is a notification", `{"jsonrpc":"2.0","id":null,"method":"notifications/progress","params":{}}`, nil, "notifications/progress", `{}`},
		{"member order free", `{"params":[1,2],"method":"m","id":-5,"jsonrpc":"2.0"}`, -5, "m", `[1,2]`},
		{"negative zero id", `{"jsonrpc":"2.0","id":-0,"method":"m"}`, 0, "m", ""},
		{"largest exact id", `{"jsonrpc":"2.0","id":9007199254740992,"method":"m"}`, 9007199254740992, "m", ""},
		{"smallest exact id", `{"jsonrpc":"2.0","id":-9007199254740992,"method":"m"}`, -9007199254740992, "m", ""},
		{"escapes in method and id", `{"jsonrpc":"2.0","id":"a\"b\\c\/d\u0041\n","method":"tools\/call\t"}`, "a\"b\\c/dA\n", "tools/call\t", ""},
		{"unicode", `{"jsonrpc":"2.0","id":"日本\u00e9\ud83d\ude00","method":"méthode/\u65e5"}`, "日本é😀", "méthode/日", ""},
		{"lone surrogate becomes U+FFFD", `{"jsonrpc":"2.0","id":"\ud800x\udc00","method":"m\ud83d\u0041"}`, "\ufffdx\ufffd", "m\ufffdA", ""},
		{"invalid UTF-8 becomes U+FFFD", "{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"m\xc3\"}", "a\ufffdb", "m\ufffd", ""},
		{"invalid UTF-8 growing past the inline buffer", "{\"jsonrpc\":\"2.0\",\"id\":\"" + strings.Repeat("\xff", 30) + "\",\"method\":\"m\"}", strings.Repeat("\ufffd", 30), "m", ""},
		{"long unknown method and id", `{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 50) + `","method":"` + strings.Repeat("m", 50) + `"}`, strings.Repeat("i", 50), strings.Repeat("m", 50), ""},
		{"nested params", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"a":[{"b":{"c":[null,true,false,-1.5e+3,"\u0000"]}}],"_meta":{"progressToken":7}}}`, 2, "tools/call", `{"a":[{"b":{"c":[null,true,false,-1.5e+3,"\u0000"]}}],"_meta":{"progressToken":7}}`},
		{"whitespace everywhere", " \t\r\n{ \"jsonrpc\" :\n\"2.0\" ,\t\"id\" : 3 , \"method\" : \"m\" , \"params\" : [ 1 , { } ] }\n ", 3, "m", `[ 1 , { } ]`},
		{"duplicate keys: last wins", `{"jsonrpc":"2.0","id":1,"method":"a","params":1,"id":"x","method":"b","params":[2]}`, "x", "b", `[2]`},
		{"duplicate id null removes it", `{"jsonrpc":"2.0","id":1,"method":"a","id":null}`, nil, "a", ""},
		{"earlier method of another type", `{"jsonrpc":"2.0","method":5,"method":"a"}`, nil, "a", ""},
		{"null jsonrpc keeps the earlier one", `{"jsonrpc":"2.0","jsonrpc":null,"method":"a"}`, nil, "a", ""},
		{"null method is empty", `{"jsonrpc":"2.0","id":1,"method":null}`, 1, "", ""},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":"","result":{}}`, 1, "", ""},
		{"null params kept raw", `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`, 1, "m", `null`},
		{"escaped member names", `{"\u006asonrpc":"2\u002e0","\u0069d":4,"meth\u006fd":"m","par\u0061ms":{}}`, 4, "m", `{}`},
		{"case-sensitive names", `{"jsonrpc":"2.0","Id":4,"method":"m","Params":{}}`, nil, "m", ""},
		{"result ignored on a request", `{"jsonrpc":"2.0","id":1,"method":"m","result":1,"error":{"code":1}}`, 1, "m", ""},
		{"deep params", `{"jsonrpc":"2.0","method":"m","params":[` + deep + `]}`, nil, "m", `[` + deep + `]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			msg, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			req, ok := msg.(*jsonrpc.Request)
			if !ok {
				t.Fatalf("got %T, want *jsonrpc.Request", msg)
			}
			var wantID jsonrpc.ID
			if tc.id != nil {
				wantID = mustID(t, tc.id)
			}
			if req.ID != wantID {
				t.Errorf("ID = %#v, want %#v", req.ID.Raw(), wantID.Raw())
			}
			if req.Method != tc.method {
				t.Errorf("Method = %q, want %q", req.Method, tc.method)
			}
			if string(req.Params) != tc.params || (tc.params == "") != (req.Params == nil) {
				t.Errorf("Params = %q, want %q", req.Params, tc.params)
			}
			if len(req.Params) > 0 {
				if cap(req.Params) != len(req.Params) {
					t.Errorf("Params capacity %d exceeds length %d: appending would overwrite the input", cap(req.Params), len(req.Params))
				}
				if !bytes.Contains(data, req.Params) || &req.Params[0] != &data[bytes.Index(data, req.Params)] {
					t.Errorf("Params do not alias the input")
				}
			}
		})
	}
}

func TestDecodeResponses(t *testing.T) {
	type wantErr struct {
		code    int64
		message string
		data    string
	}
	tests := []struct {
		name   string
		in     string
		id     any
		result string // "" for absent
		err    *wantErr
	}{
		{"result", `{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"a":1},"x-new":true}}`, 1, `{"content":[],"structuredContent":{"a":1},"x-new":true}`, nil},
		{"string id", `{"jsonrpc":"2.0","id":"r-1","result":{}}`, "r-1", `{}`, nil},
		{"null result kept raw", `{"jsonrpc":"2.0","id":1,"result":null}`, 1, `null`, nil},
		{"no result no error", `{"jsonrpc":"2.0","id":1}`, 1, "", nil},
		{"error with data", `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Unknown tool: \"x\"","data":{"tool":"x"}}}`, 3, "", &wantErr{-32602, `Unknown tool: "x"`, `{"tool":"x"}`}},
		{"error without data", `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope"}}`, 3, "", &wantErr{-32601, "nope", ""}},
		{"error with null data", `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m","data":null}}`, 3, "", &wantErr{1, "m", "null"}},
		{"empty error object", `{"jsonrpc":"2.0","id":3,"error":{}}`, 3, "", &wantErr{0, "", ""}},
		{"error code bounds", `{"jsonrpc":"2.0","id":3,"error":{"code":-9223372036854775808,"message":"x"}}`, 3, "", &wantErr{-9223372036854775808, "x", ""}},
		{"null error members are no-ops", `{"jsonrpc":"2.0","id":3,"error":{"code":5,"message":"a","code":null,"message":null}}`, 3, "", &wantErr{5, "a", ""}},
		{"repeated error objects merge", `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"a"},"error":{"data":[1]}}`, 3, "", &wantErr{1, "a", "[1]"}},
		{"null error resets", `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"a"},"error":null,"error":{"data":2}}`, 3, "", &wantErr{0, "", "2"}},
		{"null error", `{"jsonrpc":"2.0","id":3,"error":null,"result":1}`, 3, "1", nil},
		{"unknown error members ignored", `{"jsonrpc":"2.0","id":3,"error":{"Code":9,"code":2,"message":"m","extra":{}}}`, 3, "", &wantErr{2, "m", ""}},
		{"result and error both kept", `{"jsonrpc":"2.0","id":3,"result":[],"error":{"code":4,"message":"m"}}`, 3, `[]`, &wantErr{4, "m", ""}},
		{"params ignored on a response", `{"jsonrpc":"2.0","id":3,"params":{},"result":2}`, 3, `2`, nil},
		{"duplicate result", `{"jsonrpc":"2.0","id":3,"result":1,"result":"two"}`, 3, `"two"`, nil},
		{"duplicate id", `{"jsonrpc":"2.0","id":"a","result":1,"id":9}`, 9, `1`, nil},
		{"whitespace", "\n{\"jsonrpc\" : \"2.0\" , \"id\" : 1 , \"result\" : [ 1 ,\n2 ] }\t", 1, "[ 1 ,\n2 ]", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := Decode([]byte(tc.in))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			resp, ok := msg.(*jsonrpc.Response)
			if !ok {
				t.Fatalf("got %T, want *jsonrpc.Response", msg)
			}
			if want := mustID(t, tc.id); resp.ID != want {
				t.Errorf("ID = %#v, want %#v", resp.ID.Raw(), want.Raw())
			}
			if string(resp.Result) != tc.result || (tc.result == "") != (resp.Result == nil) {
				t.Errorf("Result = %q, want %q", resp.Result, tc.result)
			}
			if tc.err == nil {
				if resp.Error != nil {
					t.Errorf("Error = %v, want nil", resp.Error)
				}
				return
			}
			e, ok := resp.Error.(*jsonrpc.Error)
			if !ok {
				t.Fatalf("Error = %#v, want *jsonrpc.Error", resp.Error)
			}
			if e.Code != tc.err.code || e.Message != tc.err.message || string(e.Data) != tc.err.data {
				t.Errorf("Error = {%d %q %q}, want {%d %q %q}", e.Code, e.Message, e.Data, tc.err.code, tc.err.message, tc.err.data)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	const parse, invalid = jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest
	tests := []struct {
		name string
		in   string
		code int64
		want string // substring of the error message
	}{
		{"empty", ``, parse, "invalid JSON at offset 0: unexpected end of input"},
		{"whitespace only", " \n", parse, "offset 2: unexpected end of input"},
		{"array", `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, invalid, "message is an array, not a JSON object"},
		{"null", `null`, invalid, "message is null, not a JSON object"},
		{"string", `"x"`, invalid, "message is a string"},
		{"number with garbage", `000`, parse, "offset 1: invalid character '0' after top-level value"},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"m"`, parse, "unexpected end of input after object key:value pair"},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"result":1} x`, parse, "offset 36: invalid character 'x' after top-level value"},
		{"second value", `{"jsonrpc":"2.0","id":1,"result":1}{}`, parse, "after top-level value"},
		{"trailing comma", `{"jsonrpc":"2.0","id":1,"result":1,}`, parse, "looking for beginning of object key string"},
		{"missing colon", `{"jsonrpc" "2.0"}`, parse, "after object key"},
		{"unquoted key", `{jsonrpc:"2.0"}`, parse, "offset 1: invalid character 'j' looking for beginning of object key string"},
		{"bad escape", `{"jsonrpc":"2.0","id":1,"result":"\x"}`, parse, `invalid character 'x' in string escape code`},
		{"bad unicode escape", `{"jsonrpc":"2.0","id":1,"result":"\u00zz"}`, parse, `invalid character 'z' in \u escape`},
		{"control character in string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"a\tb\"}", parse, `invalid character '\t' in string literal`},
		{"unterminated string", `{"jsonrpc":"2.0","id":1,"result":"abc`, parse, "unexpected end of input in string literal"},
		{"leading zero", `{"jsonrpc":"2.0","id":1,"result":01}`, parse, "invalid character '1' after object key:value pair"},
		{"bare minus", `{"jsonrpc":"2.0","id":1,"result":-}`, parse, "in numeric literal"},
		{"no fraction digits", `{"jsonrpc":"2.0","id":1,"result":1.}`, parse, "after decimal point"},
		{"no exponent digits", `{"jsonrpc":"2.0","id":1,"result":1e+}`, parse, "in exponent"},
		{"bad literal", `{"jsonrpc":"2.0","id":1,"result":tru}`, parse, "in literal true"},
		{"capitalised literal", `{"jsonrpc":"2.0","id":1,"result":Null}`, parse, "looking for beginning of value"},
		{"unclosed array", `{"jsonrpc":"2.0","id":1,"result":[1,2}`, parse, "after array element"},
		{"BOM", "\ufeff{}", parse, "looking for beginning of value"},
		{"too deep", `{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, parse, "exceeded maximum nesting depth of 10000"},
		{"missing version", `{"id":1,"method":"m"}`, invalid, "wire: missing jsonrpc version"},
		{"null version", `{"jsonrpc":null,"id":1,"method":"m"}`, invalid, "missing jsonrpc version"},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"m"}`, invalid, `invalid jsonrpc version "1.0"`},
		{"numeric version", `{"jsonrpc":2.0,"id":1,"method":"m"}`, invalid, "invalid jsonrpc version: must be the string \"2.0\", got a number"},
		{"numeric version overridden", `{"jsonrpc":2,"jsonrpc":"2.0","id":1,"method":"m"}`, invalid, "invalid jsonrpc version"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"m"}`, invalid, "wire: invalid id: 1.5 is not an integer"},
		{"integral fraction id", `{"jsonrpc":"2.0","id":1.0,"method":"m"}`, invalid, "invalid id: 1.0 is not an integer"},
		{"exponent id", `{"jsonrpc":"2.0","id":1e3,"result":1}`, invalid, "invalid id: 1e3 is not an integer"},
		{"id too large", `{"jsonrpc":"2.0","id":9007199254740993,"method":"m"}`, invalid, "invalid id: integer 9007199254740993 is out of range"},
		{"id beyond int64", `{"jsonrpc":"2.0","id":-99999999999999999999999,"method":"m"}`, invalid, "out of range"},
		{"boolean id", `{"jsonrpc":"2.0","id":true,"method":"m"}`, invalid, "invalid id: must be a string, an integer or null, got a boolean"},
		{"object id", `{"jsonrpc":"2.0","id":{},"result":1}`, invalid, "got an object"},
		{"array id", `{"jsonrpc":"2.0","id":[1],"result":1}`, invalid, "got an array"},
		{"overridden bad id", `{"jsonrpc":"2.0","id":false,"id":1,"result":1}`, invalid, "invalid id"},
		{"numeric method", `{"jsonrpc":"2.0","id":1,"method":5}`, invalid, "wire: invalid method: must be a string, got a number"},
		{"object method", `{"jsonrpc":"2.0","method":{}}`, invalid, "invalid method"},
		{"string error", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, invalid, "wire: invalid error: must be an object, got a string"},
		{"fractional error code", `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}`, invalid, "invalid error code 1.5: must be an integer"},
		{"exponent error code", `{"jsonrpc":"2.0","id":1,"error":{"code":1e2,"message":"m"}}`, invalid, "invalid error code 1e2"},
		{"overflowing error code", `{"jsonrpc":"2.0","id":1,"error":{"code":9223372036854775808,"message":"m"}}`, invalid, "invalid error code"},
		{"string error code", `{"jsonrpc":"2.0","id":1,"error":{"code":"-1","message":"m"}}`, invalid, "invalid error code: must be an integer, got a string"},
		{"numeric error message", `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":1}}`, invalid, "invalid error message: must be a string"},
		{"neither request nor response", `{"jsonrpc":"2.0","result":1}`, invalid, "no method (not a request) and no id (not a response)"},
		{"null id response", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, invalid, "no id"},
		{"case-sensitive method", `{"jsonrpc":"2.0","Method":"m"}`, invalid, "no method"},
		{"type error inside invalid JSON is a parse error", `{"jsonrpc":5,"id":1,"method":"m"`, parse, "unexpected end of input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := Decode([]byte(tc.in))
			if err == nil {
				t.Fatalf("Decode succeeded with %#v", msg)
			}
			if !strings.HasPrefix(err.Error(), "wire: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != tc.code {
				t.Errorf("error %q wraps code %v, want %d", err, we, tc.code)
			}
			if !errors.Is(err, &jsonrpc.Error{Code: tc.code}) {
				t.Errorf("errors.Is(%q, code %d) = false", err, tc.code)
			}
		})
	}
}

func TestDecodeDepthLimit(t *testing.T) {
	// The message object counts as depth 1, as in encoding/json.
	for _, n := range []int{9999, 10000} {
		in := `{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
		_, err := Decode([]byte(in))
		if ok := n <= 10000; (err == nil) != ok || json.Valid([]byte(in)) != ok {
			t.Errorf("depth %d: Decode error %v, json.Valid %v", n, err, json.Valid([]byte(in)))
		}
	}
	in := `{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`
	if _, err := Decode([]byte(in)); err == nil || json.Valid([]byte(in)) {
		t.Errorf("depth 10001 accepted")
	}
}

func TestDecodedIDs(t *testing.T) {
	// Decoded ids must be interchangeable with the go-sdk's own, as map keys
	// too.
	seen := map[jsonrpc.ID]bool{mustID(t, 4242): true, mustID(t, "req-1"): true, mustID(t, 7): true}
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":4242,"result":{}}`,
		`{"jsonrpc":"2.0","id":"req-1","method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":"req\u002d1","method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":7,"method":"x"}`,
	} {
		msg, err := Decode([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		var id jsonrpc.ID
		switch m := msg.(type) {
		case *jsonrpc.Request:
			id = m.ID
		case *jsonrpc.Response:
			id = m.ID
		}
		if !seen[id] {
			t.Errorf("%s: id %#v not found among go-sdk ids", in, id.Raw())
		}
	}
}

// makeIDAllocs is what go-sdk's jsonrpc.MakeID allocates for id (a string
// or a float64, passed as such), which Decode adds to its own allocations.
func makeIDAllocs(id any) float64 {
	switch v := id.(type) {
	case string:
		s := strings.Clone(v)
		return testing.AllocsPerRun(100, func() { _, _ = jsonrpc.MakeID(s) })
	case float64:
		return testing.AllocsPerRun(100, func() { _, _ = jsonrpc.MakeID(v) })
	}
	panic("not an id")
}

func TestDecodeAllocations(t *testing.T) {
	tests := []struct {
		name string
		in   string
		id   any
		max  float64 // besides MakeID's
	}{
		{"tools/call with int id", smallCall, float64(4242), 1},
		{"string id", `{"jsonrpc":"2.0","id":"5f1e2d3c-aaaa-bbbb","method":"tools/call","params":{"name":"x"}}`, "5f1e2d3c-aaaa-bbbb", 1},
		{"unknown method", `{"jsonrpc":"2.0","id":"abc","method":"vendor/custom","params":{}}`, "abc", 1},
		{"result", `{"jsonrpc":"2.0","id":123456,"result":{"content":[{"type":"text","text":"hi"}]}}`, float64(123456), 1},
		{"long id", `{"jsonrpc":"2.0","id":"` + strings.Repeat("x", 60) + `","method":"ping"}`, strings.Repeat("x", 60), 2},
		{"error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`, float64(1), 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			got := testing.AllocsPerRun(100, func() {
				if _, err := Decode(data); err != nil {
					t.Fatal(err)
				}
			})
			if got -= makeIDAllocs(tc.id); got > tc.max {
				t.Errorf("Decode allocates %v times, want at most %v", got, tc.max)
			}
		})
	}
	msg, _ := Decode([]byte(smallCall))
	buf := make([]byte, 0, 512)
	if got := testing.AllocsPerRun(100, func() { buf, _ = Append(buf[:0], msg) }); got != 0 {
		t.Errorf("Append into a large enough buffer allocates %v times", got)
	}
}

func TestDecodeKnownMethods(t *testing.T) {
	// The methods of the MCP specification decode without allocating a
	// string: the only allocation is the message itself.
	for _, method := range []string{
		"initialize", "ping", "server/discover", "tools/list", "tools/call",
		"resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "resources/unsubscribe", "prompts/list",
		"prompts/get", "completion/complete", "logging/setLevel",
		"sampling/createMessage", "elicitation/create", "roots/list",
		"tasks/get", "tasks/result", "tasks/list", "tasks/cancel",
		"notifications/initialized", "notifications/progress",
		"notifications/cancelled", "notifications/message",
		"notifications/resources/updated", "notifications/resources/list_changed",
		"notifications/tools/list_changed", "notifications/prompts/list_changed",
		"notifications/roots/list_changed", "notifications/tasks/status",
		"notifications/elicitation/complete",
	} {
		id := strings.Repeat("x", inlineBuf)
		data := []byte(`{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `"}`)
		var got string
		allocs := testing.AllocsPerRun(10, func() {
			msg, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			got = msg.(*jsonrpc.Request).Method
		})
		if allocs -= makeIDAllocs(id); got != method || allocs > 1 {
			t.Errorf("method %q decoded as %q with %v allocations", method, got, allocs)
		}
	}
}

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		msg  jsonrpc.Message
		want string
	}{
		{"request", &jsonrpc.Request{ID: mustID(t, 1), Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`},
		{"request without params", &jsonrpc.Request{ID: mustID(t, "a\"b"), Method: "ping"},
			`{"jsonrpc":"2.0","id":"a\"b","method":"ping"}`},
		{"notification", &jsonrpc.Request{Method: "notifications/progress", Params: json.RawMessage(`{"progress":1}`)},
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`},
		{"raw params kept byte for byte", &jsonrpc.Request{ID: mustID(t, -3), Method: "m\n<é>", Params: json.RawMessage("[ 1,\n2 ]")},
			"{\"jsonrpc\":\"2.0\",\"id\":-3,\"method\":\"m\\n<é>\",\"params\":[ 1,\n2 ]}"},
		{"empty method", &jsonrpc.Request{ID: mustID(t, 1), Method: ""},
			`{"jsonrpc":"2.0","id":1,"method":""}`},
		{"result", &jsonrpc.Response{ID: mustID(t, 9), Result: json.RawMessage(`{"content":[]}`)},
			`{"jsonrpc":"2.0","id":9,"result":{"content":[]}}`},
		{"nil result", &jsonrpc.Response{ID: mustID(t, "r")},
			`{"jsonrpc":"2.0","id":"r","result":{}}`},
		{"error with data", &jsonrpc.Response{ID: mustID(t, 2), Error: &jsonrpc.Error{Code: -32602, Message: "bad \"x\"", Data: json.RawMessage(`{"k":1}`)}},
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad \"x\"","data":{"k":1}}}`},
		{"error wins over result", &jsonrpc.Response{ID: mustID(t, 2), Result: json.RawMessage(`1`), Error: &jsonrpc.Error{Code: 5, Message: "m"}},
			`{"jsonrpc":"2.0","id":2,"error":{"code":5,"message":"m"}}`},
		{"plain error", &jsonrpc.Response{ID: mustID(t, 2), Error: errors.New("boom\x01")},
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"boom\u0001"}}`},
		{"wrapped wire error keeps its code", &jsonrpc.Response{ID: mustID(t, 2), Error: fmt.Errorf("calling x: %w", &jsonrpc.Error{Code: -32601, Message: "not found"})},
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"calling x: not found"}}`},
		{"decode error keeps its code", &jsonrpc.Response{Error: func() error { _, err := Decode([]byte(`{`)); return err }()},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"wire: invalid JSON at offset 1: unexpected end of input looking for beginning of object key string"}}`},
		{"typed nil error", &jsonrpc.Response{ID: mustID(t, 1), Error: (*jsonrpc.Error)(nil)},
			`{"jsonrpc":"2.0","id":1,"result":{}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Encode(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Encode =\n%s\nwant\n%s", got, tc.want)
			}
			appended, err := Append([]byte("prefix"), tc.msg)
			if err != nil || string(appended) != "prefix"+tc.want {
				t.Errorf("Append = %q, %v", appended, err)
			}
			if r, ok := tc.msg.(*jsonrpc.Response); ok && !r.ID.IsValid() {
				return // neither decoder accepts a response without id
			}
			// The go-sdk reads it back as the same message.
			back, err := jsonrpc.DecodeMessage(got)
			if err != nil {
				t.Fatalf("go-sdk cannot decode %s: %v", got, err)
			}
			mine, err := Decode(got)
			if err != nil {
				t.Fatalf("cannot decode %s: %v", got, err)
			}
			sameMessage(t, got, mine, back)
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	for _, msg := range []jsonrpc.Message{nil, (*jsonrpc.Request)(nil), (*jsonrpc.Response)(nil)} {
		if got, err := Append([]byte("x"), msg); err == nil || string(got) != "x" {
			t.Errorf("Append(%#v) = %q, %v; want an error and dst unchanged", msg, got, err)
		}
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`q"b\s/`, `"q\"b\\s/"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f" + `"`},
		{"<html>&", `"<html>&"`},
		{"日本語 é 😀", `"日本語 é 😀"`},
		{"bad\xffutf8\xc3", `"bad\ufffdutf8\ufffd"`},
	}
	for _, tc := range tests {
		if got := string(AppendString([]byte("x"), tc.in)); got != "x"+tc.want {
			t.Errorf("AppendString(%q) = %s, want x%s", tc.in, got, tc.want)
		}
	}
}

func TestAppendID(t *testing.T) {
	tests := []struct {
		id   jsonrpc.ID
		want string
	}{
		{jsonrpc.ID{}, `null`},
		{mustID(t, 0), `0`},
		{mustID(t, -42), `-42`},
		{mustID(t, 1<<53), `9007199254740992`},
		{mustID(t, "a\"\n"), `"a\"\n"`},
	}
	for _, tc := range tests {
		if got := string(AppendID(nil, tc.id)); got != tc.want {
			t.Errorf("AppendID(%#v) = %s, want %s", tc.id.Raw(), got, tc.want)
		}
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{`"abc"`, "abc", true},
		{` "a\u00e9\n" `, "aé\n", true},
		{`"\ud83d\ude00\ud800"`, "😀\ufffd", true},
		{"\"\xff\"", "\ufffd", true},
		{`""`, "", true},
		{`abc`, "", false},
		{`"abc`, "", false},
		{`"a" "b"`, "", false},
		{`1`, "", false},
		{`null`, "", false},
		{``, "", false},
	}
	for _, tc := range tests {
		got, ok := Unquote([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("Unquote(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{`{}`, true}, {` [ ] `, true}, {`"x"`, true}, {`-0.5e-3`, true}, {`true`, true}, {`null`, true},
		{`{"a":[1,{"b":null}],"c":"\u1234\""}`, true}, {"\"\xff\"", true},
		{``, false}, {`{`, false}, {`{"a"}`, false}, {`[1,]`, false}, {`{} {}`, false}, {`01`, false},
		{`.5`, false}, {`+1`, false}, {`"\u12"`, false}, {`'a'`, false}, {`nul`, false}, {`[1 2]`, false},
		{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), true},
		{strings.Repeat("[", 10001) + strings.Repeat("]", 10001), false},
		{strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001), false},
	}
	for _, tc := range tests {
		if got := Valid([]byte(tc.in)); got != tc.ok || json.Valid([]byte(tc.in)) != tc.ok {
			t.Errorf("Valid(%.40q) = %v, json.Valid = %v, want %v", tc.in, got, json.Valid([]byte(tc.in)), tc.ok)
		}
	}
}

func TestField(t *testing.T) {
	obj := []byte(` {"name":"echo", "arguments" : {"name":"inner"} ,"n":1,"n":[2], "\u0073":"escaped", "esc":"a\"b"} `)
	tests := []struct {
		key  string
		want string
		ok   bool
	}{
		{"name", `"echo"`, true},
		{"arguments", `{"name":"inner"}`, true},
		{"n", `[2]`, true},
		{"s", `"escaped"`, true},
		{"esc", `"a\"b"`, true},
		{"missing", ``, false},
		{"Name", ``, false},
	}
	for _, tc := range tests {
		got, ok, err := Field(obj, tc.key)
		if err != nil || ok != tc.ok || string(got) != tc.want {
			t.Errorf("Field(%q) = %q, %v, %v; want %q, %v", tc.key, got, ok, err, tc.want, tc.ok)
		}
	}
	if s, ok := String(obj, "esc"); !ok || s != `a"b` {
		t.Errorf("String(esc) = %q, %v", s, ok)
	}
	if s, ok := String(obj, "n"); ok {
		t.Errorf("String(n) = %q, true for a non-string", s)
	}
	for _, bad := range []string{``, `[]`, `"x"`, `null`, `{"a":1`, `{"a":1} x`, `{"a" 1}`} {
		if _, _, err := Field([]byte(bad), "a"); err == nil {
			t.Errorf("Field(%q) accepted a non-object", bad)
		}
		if _, ok := String([]byte(bad), "a"); ok {
			t.Errorf("String(%q) succeeded", bad)
		}
	}
}

func TestSetField(t *testing.T) {
	tests := []struct {
		name, obj, key, value, want string
	}{
		{"replace in place", `{"name":"a", "arguments":{}}`, "name", `"b"`, `{"name":"b", "arguments":{}}`},
		{"replace keeps formatting", "{\n  \"a\": 1,\n  \"b\": [1, 2],\n  \"c\": 3\n}", "b", `null`, "{\n  \"a\": 1,\n  \"b\": null,\n  \"c\": 3\n}"},
		{"append", `{"a":1}`, "_meta", `{"progressToken":5}`, `{"a":1,"_meta":{"progressToken":5}}`},
		{"append before trailing whitespace", "{\"a\":1\n}", "b", `2`, "{\"a\":1,\"b\":2\n}"},
		{"append to empty", `{ }`, "k", `"v"`, `{"k":"v" }`},
		{"nil object", ``, "k", `[]`, `{"k":[]}`},
		{"escaped key matched", `{"\u006b":1}`, "k", `2`, `{"\u006b":2}`},
		{"key needing escapes", `{}`, "a\"b", `1`, `{"a\"b":1}`},
		{"duplicates all replaced", `{"k":1,"x":0,"k":2}`, "k", `3`, `{"k":3,"x":0,"k":3}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetField([]byte(tc.obj), tc.key, json.RawMessage(tc.value))
			if err != nil || string(got) != tc.want {
				t.Errorf("SetField = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	orig := []byte(`{"a":1}`)
	if _, err := SetField(orig, "a", json.RawMessage(`2`)); err != nil || string(orig) != `{"a":1}` {
		t.Errorf("SetField modified its input: %q", orig)
	}
	for _, bad := range []struct{ obj, value string }{{`[]`, `1`}, {`{"a":}`, `1`}, {`{}`, ``}, {`{}`, `{`}, {`{}`, `1 2`}, {` `, `1`}} {
		if got, err := SetField([]byte(bad.obj), "a", json.RawMessage(bad.value)); err == nil {
			t.Errorf("SetField(%q, %q) = %q, want an error", bad.obj, bad.value, got)
		}
	}
}

func TestDeleteField(t *testing.T) {
	tests := []struct {
		name, obj, key, want string
	}{
		{"first", `{"a":1,"b":2,"c":3}`, "a", `{"b":2,"c":3}`},
		{"middle", `{"a":1,"b":2,"c":3}`, "b", `{"a":1,"c":3}`},
		{"last", `{"a":1,"b":2,"c":3}`, "c", `{"a":1,"b":2}`},
		{"only", ` { "a" : 1 } `, "a", ` {  } `},
		{"missing keeps bytes", ` {"a" : 1 , "b":2} `, "x", ` {"a" : 1 , "b":2} `},
		{"pretty", "{\n  \"a\": 1,\n  \"b\": 2\n}", "b", "{\n  \"a\": 1\n}"},
		{"pretty first", "{\n  \"a\": 1,\n  \"b\": 2\n}", "a", "{\n  \"b\": 2\n}"},
		{"duplicates", `{"k":1,"a":2,"k":3,"b":4,"k":5}`, "k", `{"a":2,"b":4}`},
		{"escaped key", `{"x":0,"\u006b":1}`, "k", `{"x":0}`},
		{"empty", `{}`, "k", `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DeleteField([]byte(tc.obj), tc.key)
			if err != nil || string(got) != tc.want {
				t.Errorf("DeleteField = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `null`, `{"a":1,}`, `{} {}`} {
		if got, err := DeleteField([]byte(bad), "a"); err == nil {
			t.Errorf("DeleteField(%q) = %q, want an error", bad, got)
		}
	}
}
