package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/pinning"
)

// This file guards against "rug pulls": every tool definition is pinned
// the first time the gateway sees it; when an upstream later serves a
// different description or schema, the tool is withheld (pinning.mode
// "withhold", the default) or only flagged ("flag") until an operator
// approves the change through the admin API. Changes are logged with a
// diff, once per new definition.

// pinOffer checks the tools of an offer against their pins and returns the
// offer without the withheld ones. Called by the router with its lock held.
func (g *Gateway) pinOffer(u *upstream, offer *upstreamLists) *upstreamLists {
	if g.pins == nil || offer == nil || len(offer[kindTools]) == 0 {
		return offer
	}
	withhold := g.config().Pinning.Mode != "flag"
	var kept []item
	changed := false
	g.pins.Batch(func() {
		for i := range offer[kindTools] {
			it := &offer[kindTools][i]
			v, c := g.pins.Check(u.name, it.name, it.raw)
			if v != pinning.Changed {
				if changed {
					kept = append(kept, *it)
				}
				continue
			}
			key := u.name + "\x00" + it.name + "\x00" + c.NewFingerprint
			if _, seen := g.pinLogged.LoadOrStore(key, true); !seen {
				g.log.Warn("tool definition changed since it was pinned; "+map[bool]string{true: "withheld", false: "flagged"}[withhold]+" until an operator approves it",
					"server", u.name, "tool", it.name, "diff", c.Diff)
			}
			if !withhold {
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

// PendingToolChange is a changed tool definition awaiting approval.
type PendingToolChange struct {
	Server    string    `json:"server"`
	Tool      string    `json:"tool"`
	Diff      string    `json:"diff"`
	ChangedAt time.Time `json:"changed_at"`
	Withheld  bool      `json:"withheld"`
}

func (g *Gateway) adminPendingTools(w http.ResponseWriter, r *http.Request) {
	out := []PendingToolChange{}
	if g.pins != nil {
		withheld := g.config().Pinning.Mode != "flag"
		for _, c := range g.pins.Pending() {
			out = append(out, PendingToolChange{Server: c.Server, Tool: c.Tool, Diff: c.Diff, ChangedAt: c.ChangedAt, Withheld: withheld})
		}
	}
	writeAdminJSON(w, http.StatusOK, map[string]any{"pending": out})
}

// adminApproveTool accepts a changed tool definition as the new pin; the
// tool returns to the catalogue (with list_changed).
func (g *Gateway) adminApproveTool(w http.ResponseWriter, r *http.Request) {
	server, tool := r.PathValue("server"), r.PathValue("tool")
	if g.pins == nil {
		writeAdminError(w, adminErr(http.StatusConflict, "pinning_off", "tool pinning is off (pinning.mode)"))
		return
	}
	if err := g.pins.Approve(server, tool); err != nil {
		if errors.Is(err, pinning.ErrNotPending) {
			writeAdminError(w, adminErr(http.StatusNotFound, "not_pending", "tool %q of server %q has no change awaiting approval", tool, server))
			return
		}
		writeAdminError(w, err)
		return
	}
	g.route.publish(nil)
	g.auditAdmin(r, "tool.approve", server+"/"+tool, "", "changed definition approved")
	writeAdminJSON(w, http.StatusOK, json.RawMessage(`{"approved":true}`))
}
