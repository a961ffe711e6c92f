package wire

import (
	"unicode/utf8"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/guest/jsontext"
)

// The go-sdk's jsonrpc.ID is a struct holding one interface value (nil, an
// int64 or a string), and jsonrpc.MakeID boxes that value in a separate heap
// object (two for integers, which pass through float64). To decode a message
// in one allocation, Decode stores the id's value inside the message's own
// allocation and points the interface at it. That relies on the layout of
// jsonrpc.ID, which checkIDLayout verifies at start-up against MakeID; if the
// check fails, Decode falls back to MakeID.

// eface is the runtime layout of an empty interface.
type eface struct {
	typ, data unsafe.Pointer
}

var (
	int64Type  = (*eface)(unsafe.Pointer(&[]any{int64(0)}[0])).typ
	stringType = (*eface)(unsafe.Pointer(&[]any{""}[0])).typ
	inlineIDs  = checkIDLayout()
)

// setID makes *id hold the value at ptr, an *int64 or a *string that must
// never change afterwards.
func setID(id *jsonrpc.ID, typ unsafe.Pointer, ptr unsafe.Pointer) {
	e := (*eface)(unsafe.Pointer(id))
	e.typ, e.data = typ, ptr
}

// checkIDLayout reports whether setID builds ids equal to MakeID's.
func checkIDLayout() bool {
	if unsafe.Sizeof(jsonrpc.ID{}) != unsafe.Sizeof(eface{}) {
		return false
	}
	for _, n := range []int64{0, 1, 255, 256, -7, 1 << 53} {
		box := &struct {
			id jsonrpc.ID
			n  int64
		}{n: n}
		setID(&box.id, int64Type, unsafe.Pointer(&box.n))
		want, err := jsonrpc.MakeID(float64(n))
		if err != nil || box.id != want || box.id.Raw() != any(n) || !box.id.IsValid() {
			return false
		}
	}
	for _, s := range []string{"", "a", "abc-123"} {
		box := &struct {
			id jsonrpc.ID
			s  string
		}{s: s}
		setID(&box.id, stringType, unsafe.Pointer(&box.s))
		want, err := jsonrpc.MakeID(s)
		if err != nil || box.id != want || box.id.Raw() != any(s) || !box.id.IsValid() {
			return false
		}
	}
	return true
}

// inlineBuf is the size of the buffer in a decoded message's allocation that
// holds its decoded strings (id and method) when they fit.
const inlineBuf = 40

// idStore is the storage for a decoded message's id and strings, allocated
// together with the message.
type idStore struct {
	n   int64
	s   string
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
		return jsontext.UnquoteContent(raw, escaped)
	}
	var out []byte
	if !escaped && utf8.Valid(raw) {
		out = append(free[:0], raw...)
	} else {
		out = jsontext.AppendUnquoted(free[:0], raw)
	}
	if len(out) > len(free) {
		// Replacing invalid UTF-8 can make the string longer than raw; out
		// was then reallocated on the heap.
		return string(out)
	}
	st.off += len(out)
	return unsafe.String(&free[0], len(out))
}

// setID sets *id to the decoded id described by kind, using st for storage.
func (st *idStore) setID(id *jsonrpc.ID, kind idKind, n int64, raw []byte, escaped bool) {
	switch kind {
	case idString:
		st.s = st.str(raw, escaped)
		if inlineIDs {
			setID(id, stringType, unsafe.Pointer(&st.s))
		} else {
			*id, _ = jsonrpc.MakeID(st.s)
		}
	case idInteger:
		st.n = n
		if inlineIDs {
			setID(id, int64Type, unsafe.Pointer(&st.n))
		} else {
			*id, _ = jsonrpc.MakeID(float64(n))
		}
	}
}
