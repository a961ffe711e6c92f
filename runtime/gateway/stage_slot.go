package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/limits"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
)

// concurrencySlot waits for a slot of the server's concurrency limit, as
// long as the call's timeout, and holds it in the call's scope until the
// call has been answered.
func concurrencySlot(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		conc := tc.gd.Concurrency(tc.target.name)
		if conc == nil {
			return next(tc)
		}
		ctx, cancel := context.WithTimeout(tc.s.ctx, tc.timeout())
		rel, err := conc.Acquire(ctx)
		cancel()
		if err != nil {
			reason := fmt.Sprintf("edge-mcp: server %q is busy: %d calls in flight and %d waiting", tc.target.name, conc.InFlight(), conc.Waiting())
			if !errors.Is(err, limits.ErrQueueFull) {
				reason = fmt.Sprintf("edge-mcp: server %q stayed busy: %v", tc.target.name, err)
			}
			return nil, tc.failed(metrics.OutcomeUnavailable, jsonrpc.CodeInternalError, reason)
		}
		tc.scope.Slot = rel
		return next(tc)
	}
}
