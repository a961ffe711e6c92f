package gateway

import (
	"context"
	"encoding/json"

	"github.com/edge-mcp/edge-mcp/runtime/pins"
)

// Tool pinning is runtime/pins's: a tool whose definition changed since it
// was pinned is withheld (or flagged) until an operator approves the
// change. The router passes every upstream's offer through pinTools; the
// admin API's decisions and the fleet's (fleet.go) go to g.pinGate.

// pinTools is the router's pin (called with its lock held): u's offer
// without the tools gate withholds.
func pinTools(gate *pins.Gate) func(*upstream, *upstreamLists) *upstreamLists {
	return func(u *upstream, offer *upstreamLists) *upstreamLists {
		if offer == nil {
			return offer
		}
		kept := pins.Filter(gate, u.name, offer[kindTools], itemDef)
		if len(kept) == len(offer[kindTools]) {
			return offer // nothing withheld
		}
		out := *offer
		out[kindTools] = kept
		return &out
	}
}

// itemDef is a tool's upstream name and definition, for its pin.
func itemDef(it *item) (string, json.RawMessage) { return it.Name, it.Raw }

func (o adminOps) PendingToolChanges() []PendingToolChange { return o.g.pinGate.Pending() }

// ApproveToolChange accepts a changed tool definition as the new pin; the
// tool returns to the catalogue (with list_changed). In a fleet the
// decision is recorded for every replica first
// (runtime/fleet/control_pins.go).
func (o adminOps) ApproveToolChange(ctx context.Context, server, tool string) error {
	return o.g.pinGate.Approve(ctx, server, tool)
}

// RejectToolChange refuses the pending definition of server's tool.
func (o adminOps) RejectToolChange(ctx context.Context, server, tool string) error {
	return o.g.pinGate.Reject(ctx, server, tool)
}
