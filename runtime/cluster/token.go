package cluster

import "encoding/base32"

// subjectEncoding turns any id (session ids, replica names, tool names)
// into one NATS subject token: no '.', '*', '>' or white space.
var subjectEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)

// Token encodes id as one subject token.
func Token(id string) string { return subjectEncoding.EncodeToString([]byte(id)) }

// FromToken decodes a token made by Token.
func FromToken(tok string) (string, error) {
	b, err := subjectEncoding.DecodeString(tok)
	return string(b), err
}
