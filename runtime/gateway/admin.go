package gateway

import (
	"context"
	"fmt"
	"net/http"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/console"
)

// This file connects the admin API (package admin, which owns the HTTP
// side and the checks of each operation) to the gateway: policyHost gives
// admin.PolicyOps the policy generations, the module store and the fleet
// (policyChange, modules.go, carries out a change); adminOps does the rest
// (reload here, tool-pin decisions in pins.go, OAuth in oauth.go).

// The admin API's types, under the names callers of package gateway know.
type (
	ModuleInfo        = admin.ModuleInfo
	PolicyInfo        = admin.PolicyInfo
	PendingToolChange = admin.PendingToolChange
)

// AdminHandler returns the admin API. It checks every request's Origin and
// Host with the gateway's guard, then authenticates it with the admin
// tokens of the running config (and EDGE_MCP_ADMIN_TOKEN).
func (g *Gateway) AdminHandler() http.Handler {
	ops := adminAPI{admin.NewPolicyOps(policyHost{g}), adminOps{g}}
	srv := admin.New(admin.Options{
		Ops:    ops,
		Tokens: func() map[string]string { return g.config().Admin.Tokens },
		Audit:  g.audit,
		Log:    g.log,
		Guard:  g.door,
	})
	// The operator console under /ui/ (console.go).
	srv.MountUI(console.New(console.Options{Ops: ops, Source: consoleSource{g}, Auth: srv, Audit: g.audit, Log: g.log}))
	return srv
}

// adminAPI is admin.Operations for a gateway: the policy and module
// operations of package admin, the rest of adminOps.
type adminAPI struct {
	*admin.PolicyOps
	adminOps
}

var _ admin.Operations = adminAPI{}

// adminOps carries out the admin operations on the gateway itself.
type adminOps struct{ g *Gateway }

func (o adminOps) Reload(ctx context.Context) (string, fmt.Stringer, error) {
	res, err := o.g.ReloadFile(ctx)
	return o.g.config().Path, res, err
}

// policyHost implements admin.PolicyHost for a gateway.
type policyHost struct{ g *Gateway }

// Policies describes the attachments of the current generation, in chain
// order.
func (h policyHost) Policies() (generation uint64, out []PolicyInfo) {
	pg := h.g.pol.current()
	if pg == nil {
		return 0, []PolicyInfo{}
	}
	stats := pg.chain.Stats()
	for i, a := range pg.atts {
		st := stats[i]
		out = append(out, PolicyInfo{Spec: a.spec, Source: a.source, Digest: a.module.digest, Healthy: st.Healthy,
			Calls: st.Calls, Failures: st.Failures, ShadowRuns: st.ShadowRuns, ShadowDiffs: st.ShadowDiffs})
	}
	return pg.id, out
}

func (h policyHost) Config() *config.Config         { return h.g.config() }
func (h policyHost) Store() *store.Store            { return h.g.pol.store }
func (h policyHost) Writable() error                { return h.g.fleet.Writable() }
func (h policyHost) AddReplicas(infos []ModuleInfo) { h.g.fleet.AddReplicas(infos) }

// Change runs fn with the policy lock held.
func (h policyHost) Change(fn func(admin.PolicyChange) error) error {
	p := &h.g.pol
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return admin.Errorf(http.StatusServiceUnavailable, "closing", "the gateway is shutting down")
	}
	return fn(policyChange{p})
}

// applyAttachments builds and activates a generation with the given
// run-time attachments, then records them in the store.
func applyAttachments(ctx context.Context, p *policies, st *store.Store, next []policy.Spec) error {
	if p.fleet != nil {
		return p.fleet.SetAttachmentsLocked(ctx, next)
	}
	if err := p.rebuildLocked(ctx, next, nil); err != nil {
		return admin.Errorf(http.StatusUnprocessableEntity, "activation_failed", "%v", err)
	}
	if err := st.SetAttachments(next); err != nil {
		return fmt.Errorf("recording the attachments: %w", err)
	}
	return nil
}
