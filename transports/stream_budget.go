package transports

import (
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// streamCost is what one open downstream stream (a streamable HTTP GET
// stream, a legacy SSE session, a WebSocket) is charged to its client's
// client-memory account while it is open: its goroutines, connection and
// buffers and a few queued messages: the release binary's RSS grew by
// about 29 KiB per legacy SSE session and 39 KiB per WebSocket (60 of
// each; README, "What the client-memory budget counts"). Its queue's worst case
// is not charged: that is bounded per stream, and charging per message
// would make a slow reader's stream drop what it owes.
const streamCost = 64 << 10

// holdStream charges one open stream to the account budgetOf gives peer
// (who opened the stream's session) and returns the func that credits it (once), to defer;
// over the budget it answers 429, naming it, and returns nil. A nil
// budgetOf charges nothing.
func holdStream(w http.ResponseWriter, peer any, budgetOf func(peer any) *budget.Account) (release func()) {
	if budgetOf == nil {
		return func() {}
	}
	a := budgetOf(peer)
	if release = a.Hold(budget.Streams, streamCost); release == nil {
		writeJSONRPCError(w, http.StatusTooManyRequests, jsonrpc.ID{}, codeServerError,
			fmt.Sprintf("over the client memory budget: identity %q holds %d of its %d bytes and a stream takes %d "+
				"(limits.client_memory_per_identity, limits.client_memory); close a stream or try again later",
				a.Identity(), a.Used(), a.Limit(), streamCost), nil)
	}
	return release
}
