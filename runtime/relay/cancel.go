package relay

import (
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// CancelParams are the params of a notifications/cancelled of request
// id for reason, either way: a request the gateway sent upstream, or one
// it asked of its client.
func CancelParams(id int64, reason string) json.RawMessage {
	b := append([]byte(`{"requestId":`), strconv.FormatInt(id, 10)...)
	b = append(b, `,"reason":`...)
	b = wire.AppendString(b, reason)
	return append(b, '}')
}

// CancelledID decodes params.requestId of a notifications/cancelled: a
// JSON string or integer.
func CancelledID(params json.RawMessage) (jsonrpc.ID, bool) {
	raw, ok, _ := wire.Field(params, "requestId")
	if !ok {
		return jsonrpc.ID{}, false
	}
	if s, ok := wire.Unquote(raw); ok {
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(float64(n))
	return id, err == nil
}
