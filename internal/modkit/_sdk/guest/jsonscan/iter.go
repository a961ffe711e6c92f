package jsonscan

// Member is one member of a scanned object, as positions in the input.
type Member struct {
	KeyStart, KeyEnd int  // the key literal, quotes included
	KeyEscaped       bool // the key contains escapes
	ValStart, ValEnd int  // the value
	ValEscaped       bool // the value is a string with escapes
}

// Key returns the raw content of m's key (without quotes) in b.
func (m Member) Key(b []byte) []byte { return b[m.KeyStart+1 : m.KeyEnd-1] }

// Value returns m's raw value in b.
func (m Member) Value(b []byte) []byte { return b[m.ValStart:m.ValEnd] }

// KeyIs reports whether m's key decodes to key.
func (m Member) KeyIs(b []byte, key string) bool { return KeyEquals(m.Key(b), m.KeyEscaped, key) }

// iter is the state shared by ObjectIter and ArrayIter.
type iter struct {
	b     []byte
	i     int
	depth int
	first bool
	done  bool
}

// advance moves to the next member or element: it returns its index
// (after white space), or ok == false at the end of the container.
func (it *iter) advance(inObject bool) (i int, ok bool, err error) {
	if it.done {
		return it.i, false, nil
	}
	i = SkipSpace(it.b, it.i)
	if it.first {
		it.first = false
		closer := byte(']')
		if inObject {
			closer = '}'
		}
		if i < len(it.b) && it.b[i] == closer {
			it.done, it.i = true, i+1
			return i + 1, false, nil
		}
		return i, true, nil
	}
	if i, it.done, err = Next(it.b, i, inObject); err != nil || it.done {
		it.i = i
		return i, false, err
	}
	return i, true, nil
}

// Pos returns the index just after the opening brace or bracket before the
// first call to Next, and just after the closing one once Next has reported
// the end.
func (it *iter) Pos() int { return it.i }

// ObjectIter walks the members of an object, validating it as it goes.
type ObjectIter struct{ iter }

// NewObjectIter starts walking the object whose '{' is at b[i]; depth is
// the object's own nesting depth (1 for a top-level object).
func NewObjectIter(b []byte, i, depth int) ObjectIter {
	return ObjectIter{iter{b: b, i: i + 1, depth: depth, first: true}}
}

// Next returns the next member, or ok == false at the end of the object.
func (it *ObjectIter) Next() (m Member, ok bool, err error) {
	i, ok, err := it.advance(true)
	if !ok {
		return Member{}, false, err
	}
	b := it.b
	m.KeyStart = i
	if i, m.KeyEnd, m.KeyEscaped, err = SkipKey(b, i); err != nil {
		return Member{}, false, err
	}
	m.ValStart = i
	if i < len(b) && b[i] == '"' {
		i, m.ValEscaped, err = SkipString(b, i)
	} else {
		i, err = SkipNested(b, i, it.depth)
	}
	if err != nil {
		return Member{}, false, err
	}
	m.ValEnd, it.i = i, i
	return m, true, nil
}

// ArrayIter walks the elements of an array, validating it as it goes.
type ArrayIter struct{ iter }

// NewArrayIter starts walking the array whose '[' is at b[i]; depth is the
// array's own nesting depth (1 for a top-level array).
func NewArrayIter(b []byte, i, depth int) ArrayIter {
	return ArrayIter{iter{b: b, i: i + 1, depth: depth, first: true}}
}

// Next returns the bounds of the next element, or ok == false at the end
// of the array.
func (it *ArrayIter) Next() (start, end int, ok bool, err error) {
	start, ok, err = it.advance(false)
	if !ok {
		return 0, 0, false, err
	}
	if end, err = SkipNested(it.b, start, it.depth); err != nil {
		return 0, 0, false, err
	}
	it.i = end
	return start, end, true, nil
}

// Members calls fn for each member of the object that starts at b[i]
// (after white space), in order, with the member's positions, until fn
// returns false. It returns the index after the object (or after the
// member where fn stopped) and reports malformed JSON; a value that is not
// an object is reported as an error too.
func Members(b []byte, i int, fn func(m Member) bool) (int, error) {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return i, errAt(b, i, "looking for beginning of object")
	}
	it := NewObjectIter(b, i, 1)
	for {
		m, ok, err := it.Next()
		if err != nil || !ok {
			return it.Pos(), err
		}
		if !fn(m) {
			return m.ValEnd, nil
		}
	}
}

// Elements calls fn for each element of the array that starts at b[i]
// (after white space), in order, with the element's raw bytes, until fn
// returns false. It returns like Members.
func Elements(b []byte, i int, fn func(elem []byte) bool) (int, error) {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return i, errAt(b, i, "looking for beginning of array")
	}
	it := NewArrayIter(b, i, 1)
	for {
		start, end, ok, err := it.Next()
		if err != nil || !ok {
			return it.Pos(), err
		}
		if !fn(b[start:end]) {
			return end, nil
		}
	}
}

// KeyValue is one member of an object: its key, decoded, and its raw
// value (a sub-slice of the input).
type KeyValue struct {
	Key   string
	Value []byte
}

// ObjectMembers returns the members of the object b (after white space)
// in order, duplicates included. It returns nil and an error when b is not
// an object; on malformed JSON it returns the members before the fault and
// the error. An empty object gives an empty, non-nil slice.
func ObjectMembers(b []byte) ([]KeyValue, error) {
	out := []KeyValue{}
	_, err := Members(b, 0, func(m Member) bool {
		out = append(out, KeyValue{UnquoteContent(m.Key(b), m.KeyEscaped), m.Value(b)})
		return true
	})
	if err != nil && len(out) == 0 {
		if i := SkipSpace(b, 0); i >= len(b) || b[i] != '{' {
			return nil, err
		}
	}
	return out, err
}

// ArrayElements returns the elements of the array b (after white space)
// in order, as ObjectMembers does for an object.
func ArrayElements(b []byte) ([][]byte, error) {
	out := [][]byte{}
	_, err := Elements(b, 0, func(elem []byte) bool {
		out = append(out, elem)
		return true
	})
	if err != nil && len(out) == 0 {
		if i := SkipSpace(b, 0); i >= len(b) || b[i] != '[' {
			return nil, err
		}
	}
	return out, err
}

// Lookup returns the value of the last member named key (the one
// encoding/json decodes), or nil.
func Lookup(members []KeyValue, key string) []byte {
	for i := len(members) - 1; i >= 0; i-- {
		if members[i].Key == key {
			return members[i].Value
		}
	}
	return nil
}

// StringValue returns the JSON value v decoded when it is a valid string
// literal, and false otherwise.
func StringValue(v []byte) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	s, err := Unquote(v)
	return s, err == nil
}
