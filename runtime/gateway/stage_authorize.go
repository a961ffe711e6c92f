package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// userAuthorized makes sure a server that holds a token per identity has
// the caller's, asking the caller's user when not (oauth_client.go).
func userAuthorized(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		if tc.target.perIdentity() && !authorizeUser(tc.s, tc) {
			return nil, nil // answered: refused, or input_required
		}
		return next(tc)
	}
}
