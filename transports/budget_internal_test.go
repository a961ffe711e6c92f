package transports

import "testing"

func TestDroppedMessageFindsResponseID(t *testing.T) {
	t.Parallel()
	b := NewByteBudget(1 << 20)
	for _, tc := range []struct {
		msg  string
		want any // the id answered, nil when none is
	}{
		{`{"jsonrpc":"2.0","id":7,"result":{"blob":"xxxx"}}`, int64(7)},
		{`{"result":{"id":3,"method":"no","s":"\"id\":4"},"jsonrpc":"2.0","id" : "a\"b" }`, `a"b`},
		{"{\n \"id\":\t12 ,\n\"result\":[1,{\"id\":2}]}", int64(12)},
		{`{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{}}`, nil},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":5}}`, nil},
		{`{"jsonrpc":"2.0","result":{"id":5}}`, nil},
		{`{"jsonrpc":"2.0","id":null,"error":{}}`, nil},
	} {
		var d droppedMessage
		// Fed in small pieces, as a dropped message is.
		for i := 0; i < len(tc.msg); i += 3 {
			d.feed([]byte(tc.msg[i:min(i+3, len(tc.msg))]))
		}
		resp, ok := d.answer(b)
		switch {
		case tc.want == nil && ok:
			t.Errorf("%s: answered as %v", tc.msg, resp.ID.Raw())
		case tc.want != nil && (!ok || resp.ID.Raw() != tc.want):
			t.Errorf("%s: answer %v (%v), want id %v", tc.msg, ok, resp, tc.want)
		case ok && (!IsLocal(resp) || resp.Error == nil):
			t.Errorf("%s: the answer is not a local error", tc.msg)
		}
	}
}
