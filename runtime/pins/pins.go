package pins

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// Fleet records and applies the operators' decisions across a fleet's
// replicas (runtime/fleet's Fleet; outside a fleet both do nothing).
type Fleet interface {
	// ApplyPinDecision applies the fleet's decision, if any, about
	// definition fp of server's tool, and reports whether it did.
	ApplyPinDecision(server, tool, fp string) bool
	// DecidePin records decision ("approve" or "reject") for every
	// replica before this one applies it, and reports whether it did.
	DecidePin(ctx context.Context, server, tool, decision string) (bool, error)
}

// Gate checks upstreams' tools against their pins.
type Gate struct {
	store    *pinning.Store // nil: pinning off
	fleet    Fleet
	withhold func() bool // pinning.mode is "withhold" (not "flag"), as configured now
	changed  func()      // the catalogue must be built again
	log      *slog.Logger
	// seen remembers which changed definitions were logged (by server,
	// tool and fingerprint) and which were rejected (by rejection: the
	// fingerprint of the rejected definition).
	seen sync.Map
}

// rejection is the key, in seen, of a rejected change of a tool.
type rejection struct{ server, tool string }

// New makes the gate of store (nil: pinning off). withhold tells the mode
// configured now; changed is called when a decision changes what the
// catalogue holds.
func New(store *pinning.Store, fleet Fleet, withhold func() bool, changed func(), log *slog.Logger) *Gate {
	return &Gate{store: store, fleet: fleet, withhold: withhold, changed: changed, log: log}
}

// Filter checks the tools of server against their pins and returns them
// without the withheld ones (tools itself when none is). def tells a
// tool's upstream name and definition.
func Filter[T any](g *Gate, server string, tools []T, def func(*T) (string, json.RawMessage)) []T {
	if g.store == nil || len(tools) == 0 {
		return tools
	}
	withhold := g.withhold()
	var kept []T
	changed := false
	g.store.Batch(func() {
		for i := range tools {
			name, raw := def(&tools[i])
			v, c := g.store.Check(server, name, raw)
			if v == pinning.Changed && g.fleet.ApplyPinDecision(server, name, c.NewFingerprint) && !g.Rejected(server, name, c.NewFingerprint) {
				v = pinning.Unchanged // approved by the fleet before this replica saw it
			}
			if v != pinning.Changed {
				if changed {
					kept = append(kept, tools[i])
				}
				continue
			}
			key := server + "\x00" + name + "\x00" + c.NewFingerprint
			if _, seen := g.seen.LoadOrStore(key, true); !seen {
				g.log.Warn("tool definition changed since it was pinned; "+map[bool]string{true: "withheld", false: "flagged"}[withhold]+" until an operator approves it",
					"server", server, "tool", name, "diff", c.Diff)
			}
			if !withhold && !g.Rejected(server, name, c.NewFingerprint) {
				if changed {
					kept = append(kept, tools[i])
				}
				continue
			}
			if !changed {
				changed = true
				kept = append(kept, tools[:i]...)
			}
		}
	})
	if !changed {
		return tools
	}
	return kept
}

// Rejected reports whether the definition fp of server's tool was
// rejected by an operator.
func (g *Gate) Rejected(server, tool, fp string) bool {
	v, ok := g.seen.Load(rejection{server, tool})
	return ok && v.(string) == fp
}

// Pending lists the changes awaiting an operator's decision.
func (g *Gate) Pending() []admin.PendingToolChange {
	out := []admin.PendingToolChange{}
	if g.store == nil {
		return out
	}
	withheld := g.withhold()
	for _, c := range g.store.Pending() {
		if g.Rejected(c.Server, c.Tool, c.NewFingerprint) {
			continue
		}
		out = append(out, admin.PendingToolChange{Server: c.Server, Tool: c.Tool, Diff: c.Diff, ChangedAt: c.ChangedAt, Withheld: withheld})
	}
	return out
}

// Approve accepts a changed tool definition as the new pin; the tool
// returns to the catalogue. A rejected change may still be approved. In a
// fleet the decision is recorded for every replica first.
func (g *Gate) Approve(ctx context.Context, server, tool string) error {
	if g.store == nil {
		return admin.Errorf(http.StatusConflict, "pinning_off", "tool pinning is off (pinning.mode)")
	}
	recorded, err := g.fleet.DecidePin(ctx, server, tool, "approve")
	if err != nil {
		return err
	}
	// The fleet's decision may have reached this replica's watcher first.
	if err := g.store.Approve(server, tool); errors.Is(err, pinning.ErrNotPending) && !recorded {
		return admin.Errorf(http.StatusNotFound, "not_pending", "tool %q of server %q has no change awaiting approval", tool, server)
	} else if err != nil && !errors.Is(err, pinning.ErrNotPending) {
		return err // already names the tool
	}
	g.seen.Delete(rejection{server, tool})
	g.changed()
	return nil
}

// Reject refuses the pending definition of server's tool: the old pin
// stays, the tool stays withheld, and this definition is not offered for
// approval again.
func (g *Gate) Reject(ctx context.Context, server, tool string) error {
	if g.store == nil {
		return admin.Errorf(http.StatusConflict, "pinning_off", "tool pinning is off (pinning.mode)")
	}
	for _, c := range g.store.Pending() {
		if c.Server != server || c.Tool != tool || g.Rejected(server, tool, c.NewFingerprint) {
			continue
		}
		if _, err := g.fleet.DecidePin(ctx, server, tool, "reject"); err != nil {
			return err
		}
		g.seen.Store(rejection{server, tool}, c.NewFingerprint)
		g.changed() // in flag mode the tool leaves the catalogue now
		return nil
	}
	return admin.Errorf(http.StatusNotFound, "not_pending", "tool %q of server %q has no change awaiting a decision", tool, server)
}

// The fleet's side: another replica's decision, applied here.

// FleetPending lists the changes pending on this replica.
func (g *Gate) FleetPending() []pinning.Change {
	if g.store == nil {
		return nil
	}
	return g.store.Pending()
}

// FleetApprove applies another replica's approval, and reports whether
// it changed anything.
func (g *Gate) FleetApprove(server, tool string) bool {
	if g.store == nil || g.store.Approve(server, tool) != nil {
		return false
	}
	g.seen.Delete(rejection{server, tool})
	return true
}

// FleetReject applies another replica's rejection of definition fp, and
// reports whether it changed anything.
func (g *Gate) FleetReject(server, tool, fp string) bool {
	if g.Rejected(server, tool, fp) {
		return false
	}
	g.seen.Store(rejection{server, tool}, fp)
	return true
}
