package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// This file guards against "rug pulls": every tool definition is pinned
// the first time the gateway sees it; when an upstream later serves a
// different description or schema, the tool is withheld (pinning.mode
// "withhold", the default) or only flagged ("flag") until an operator
// approves the change through the admin API. Changes are logged with a
// diff, once per new definition.
//
// An operator may instead reject a change: the old pin stays, the tool
// stays withheld (in "flag" mode too), and the change is no longer listed
// as pending. Only a different definition from the upstream is offered
// for a decision again (a return to the pinned one simply restores the
// tool). Rejections live as long as the process: after a restart a
// rejected change is pending again, and the tool still withheld.

// pinGate withholds (or flags) the tools of an upstream's offer whose
// definitions changed since they were pinned; the router calls it on every
// offer.
type pinGate struct{ g *Gateway }

// offer checks the tools of an offer against their pins and returns the
// offer without the withheld ones. Called by the router with its lock held.
func (pg pinGate) offer(u *upstream, offer *upstreamLists) *upstreamLists {
	g := pg.g
	if g.pins == nil || offer == nil || len(offer[kindTools]) == 0 {
		return offer
	}
	withhold := g.config().Pinning.Mode != "flag"
	var kept []item
	changed := false
	g.pins.Batch(func() {
		for i := range offer[kindTools] {
			it := &offer[kindTools][i]
			v, c := g.pins.Check(u.name, it.Name, it.Raw)
			if v == pinning.Changed && g.fleet.ApplyPinDecision(u.name, it.Name, c.NewFingerprint) && !g.pinRejected(u.name, it.Name, c.NewFingerprint) {
				v = pinning.Unchanged // approved by the fleet before this replica saw it
			}
			if v != pinning.Changed {
				if changed {
					kept = append(kept, *it)
				}
				continue
			}
			key := u.name + "\x00" + it.Name + "\x00" + c.NewFingerprint
			if _, seen := g.pinLogged.LoadOrStore(key, true); !seen {
				g.log.Warn("tool definition changed since it was pinned; "+map[bool]string{true: "withheld", false: "flagged"}[withhold]+" until an operator approves it",
					"server", u.name, "tool", it.Name, "diff", c.Diff)
			}
			if !withhold && !g.pinRejected(u.name, it.Name, c.NewFingerprint) {
				if changed {
					kept = append(kept, *it)
				}
				continue
			}
			if !changed {
				changed = true
				kept = append(kept, offer[kindTools][:i]...)
			}
		}
	})
	if !changed {
		return offer
	}
	out := *offer
	out[kindTools] = kept
	return &out
}

// pinRejection is the key, in g.pinLogged, of a rejected change of a
// tool; its value is the fingerprint of the rejected definition.
type pinRejection struct{ server, tool string }

// pinRejected reports whether the definition fp of server's tool was
// rejected by an operator.
func (g *Gateway) pinRejected(server, tool, fp string) bool {
	v, ok := g.pinLogged.Load(pinRejection{server, tool})
	return ok && v.(string) == fp
}

func (o adminOps) PendingToolChanges() []PendingToolChange {
	g := o.g
	out := []PendingToolChange{}
	if g.pins == nil {
		return out
	}
	withheld := g.config().Pinning.Mode != "flag"
	for _, c := range g.pins.Pending() {
		if g.pinRejected(c.Server, c.Tool, c.NewFingerprint) {
			continue
		}
		out = append(out, PendingToolChange{Server: c.Server, Tool: c.Tool, Diff: c.Diff, ChangedAt: c.ChangedAt, Withheld: withheld})
	}
	return out
}

// ApproveToolChange accepts a changed tool definition as the new pin; the
// tool returns to the catalogue (with list_changed). A rejected change may
// still be approved. In a fleet the decision is recorded for every replica
// first (runtime/fleet/control_pins.go).
func (o adminOps) ApproveToolChange(ctx context.Context, server, tool string) error {
	g := o.g
	if g.pins == nil {
		return admin.Errorf(http.StatusConflict, "pinning_off", "tool pinning is off (pinning.mode)")
	}
	recorded, err := g.fleet.DecidePin(ctx, server, tool, "approve")
	if err != nil {
		return err
	}
	// The fleet's decision may have reached this replica's watcher first.
	if err := g.pins.Approve(server, tool); errors.Is(err, pinning.ErrNotPending) && !recorded {
		return admin.Errorf(http.StatusNotFound, "not_pending", "tool %q of server %q has no change awaiting approval", tool, server)
	} else if err != nil && !errors.Is(err, pinning.ErrNotPending) {
		return err // already names the tool
	}
	g.pinLogged.Delete(pinRejection{server, tool})
	g.route.publish(nil)
	return nil
}

// RejectToolChange refuses the pending definition of server's tool: the
// old pin stays, the tool stays withheld, and this definition is not
// offered for approval again.
func (o adminOps) RejectToolChange(ctx context.Context, server, tool string) error {
	g := o.g
	if g.pins == nil {
		return admin.Errorf(http.StatusConflict, "pinning_off", "tool pinning is off (pinning.mode)")
	}
	for _, c := range g.pins.Pending() {
		if c.Server != server || c.Tool != tool || g.pinRejected(server, tool, c.NewFingerprint) {
			continue
		}
		if _, err := g.fleet.DecidePin(ctx, server, tool, "reject"); err != nil {
			return err
		}
		g.pinLogged.Store(pinRejection{server, tool}, c.NewFingerprint)
		g.route.publish(nil) // in flag mode the tool leaves the catalogue now
		return nil
	}
	return admin.Errorf(http.StatusNotFound, "not_pending", "tool %q of server %q has no change awaiting a decision", tool, server)
}
