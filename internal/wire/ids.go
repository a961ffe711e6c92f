package wire

import (
	"unicode/utf8"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
)

// A decoded id is built with jsonrpc.MakeID, go-sdk's own constructor:
// nothing here depends on the layout of jsonrpc.ID. Its value is boxed in
// an allocation of its own (none for integers from 0 to 255); a string
// id's bytes live in the message's allocation (idStore.buf) when they fit.

// inlineBuf is the size of the buffer in a decoded message's allocation that
// holds its decoded strings (id and method) when they fit.
const inlineBuf = 40

// idStore is the storage for a decoded message's strings, allocated
// together with the message.
type idStore struct {
	buf [inlineBuf]byte
	off int
}

// str returns the Go string for validated JSON string content raw (escaped
// when it holds escapes), stored in st.buf when it fits.
func (st *idStore) str(raw []byte, escaped bool) string {
	if len(raw) == 0 {
		return ""
	}
	free := st.buf[st.off:]
	if len(raw) > len(free) {
		return jsonscan.UnquoteContent(raw, escaped)
	}
	var out []byte
	if !escaped && utf8.Valid(raw) {
		out = append(free[:0], raw...)
	} else {
		out = jsonscan.AppendUnquoted(free[:0], raw)
	}
	if len(out) > len(free) {
		// Replacing invalid UTF-8 can make the string longer than raw; out
		// was then reallocated on the heap.
		return string(out)
	}
	st.off += len(out)
	return unsafe.String(&free[0], len(out))
}

// setID sets *id to the decoded id described by kind, using st for the
// string's storage.
func (st *idStore) setID(id *jsonrpc.ID, kind idKind, n int64, raw []byte, escaped bool) {
	switch kind {
	case idString:
		*id, _ = jsonrpc.MakeID(st.str(raw, escaped))
	case idInteger:
		*id, _ = jsonrpc.MakeID(float64(n))
	}
}
