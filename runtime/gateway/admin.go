package gateway

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// This file connects the admin API (package admin, which owns the HTTP
// side) to the gateway: adminOps carries out its operations on the policy
// generations (see generation.go). Module operations are in modules.go,
// tool-pin decisions in pins.go.

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
	return admin.New(admin.Options{
		Ops:    adminOps{g},
		Tokens: func() map[string]string { return g.config().Admin.Tokens },
		Audit:  g.audit,
		Log:    g.log,
		Guard:  g.door,
	})
}

// adminOps implements admin.Operations for a gateway.
type adminOps struct{ g *Gateway }

var _ admin.Operations = adminOps{}

// ListPolicies describes the attachments of the current generation, in
// chain order.
func (o adminOps) ListPolicies() (generation uint64, out []PolicyInfo) {
	pg := o.g.pol.current()
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

// AttachPolicy inserts sp at pos among the run-time attachments (pos < 0:
// last).
func (o adminOps) AttachPolicy(ctx context.Context, sp policy.Spec, pos int) error {
	return o.withStore(func(p *policies, st *store.Store) error {
		current := st.Attachments()
		if pos < 0 {
			pos = len(current)
		}
		if pos > len(current) {
			return admin.Errorf(http.StatusBadRequest, "bad_position", "position must be 0..%d, got %d", len(current), pos)
		}
		if slices.ContainsFunc(p.fileSpecs, func(s policy.Spec) bool { return s.Name == sp.Name }) {
			return admin.Errorf(http.StatusConflict, "exists", "policy %q is attached by the config file; pick another name", sp.Name)
		}
		if slices.ContainsFunc(current, func(s policy.Spec) bool { return s.Name == sp.Name }) {
			return admin.Errorf(http.StatusConflict, "exists", "policy %q is already attached; detach it first", sp.Name)
		}
		return applyAttachments(fleetChangeCtx(ctx, "policy.attach", sp.Name), p, st, slices.Insert(slices.Clone(current), pos, sp))
	})
}

func (o adminOps) DetachPolicy(ctx context.Context, name string) error {
	return o.withStore(func(p *policies, st *store.Store) error {
		current := st.Attachments()
		i, err := o.runtimeAttachment(p, current, name, "remove it there")
		if err != nil {
			return err
		}
		return applyAttachments(fleetChangeCtx(ctx, "policy.detach", name), p, st, slices.Delete(slices.Clone(current), i, i+1))
	})
}

// ReorderPolicies sets the order of the run-time attachments; order names
// each exactly once.
func (o adminOps) ReorderPolicies(ctx context.Context, order []string) error {
	return o.withStore(func(p *policies, st *store.Store) error {
		current := st.Attachments()
		have := make([]string, len(current))
		for i, a := range current {
			have[i] = a.Name
		}
		want, sorted := slices.Clone(order), slices.Clone(have)
		sort.Strings(want)
		sort.Strings(sorted)
		if !slices.Equal(want, sorted) {
			return admin.Errorf(http.StatusUnprocessableEntity, "bad_order", "order must name every run-time policy exactly once: have %v, got %v", have, order)
		}
		next := make([]policy.Spec, len(current))
		for i, n := range order {
			next[i] = current[slices.Index(have, n)]
		}
		return applyAttachments(fleetChangeCtx(ctx, "policy.reorder", ""), p, st, next)
	})
}

// PromotePolicy turns a shadow attachment into an enforcing one.
func (o adminOps) PromotePolicy(ctx context.Context, name string) error {
	return o.withStore(func(p *policies, st *store.Store) error {
		current := slices.Clone(st.Attachments())
		i, err := o.runtimeAttachment(p, current, name, "change its mode there")
		if err != nil {
			return err
		}
		if current[i].Mode != "shadow" {
			return admin.Errorf(http.StatusConflict, "not_shadow", "policy %q already enforces", name)
		}
		current[i].Mode = ""
		return applyAttachments(fleetChangeCtx(ctx, "policy.promote", name), p, st, current)
	})
}

func (o adminOps) Reload(ctx context.Context) (string, fmt.Stringer, error) {
	res, err := o.g.ReloadFile(ctx)
	return o.g.config().Path, res, err
}

// applyAttachments builds and activates a generation with the given
// run-time attachments, then records them in the store.
func applyAttachments(ctx context.Context, p *policies, st *store.Store, next []policy.Spec) error {
	if p.fleet != nil {
		return p.fleet.setAttachmentsLocked(ctx, next)
	}
	if err := p.rebuildLocked(ctx, next, nil); err != nil {
		return admin.Errorf(http.StatusUnprocessableEntity, "activation_failed", "%v", err)
	}
	if err := st.SetAttachments(next); err != nil {
		return fmt.Errorf("recording the attachments: %w", err)
	}
	return nil
}

// runtimeAttachment finds the run-time attachment name among current, or
// says why there is none: unknown, or owned by the config file (where the
// operator should do instead).
func (o adminOps) runtimeAttachment(p *policies, current []policy.Spec, name, instead string) (int, error) {
	if i := slices.IndexFunc(current, func(s policy.Spec) bool { return s.Name == name }); i >= 0 {
		return i, nil
	}
	if slices.ContainsFunc(p.fileSpecs, func(s policy.Spec) bool { return s.Name == name }) {
		return -1, admin.Errorf(http.StatusConflict, "config_owned", "policy %q is attached by the config file %s; %s", name, o.g.config().Path, instead)
	}
	return -1, admin.Errorf(http.StatusNotFound, "not_found", "no run-time policy named %q", name)
}

// withStore runs fn with the policy lock held and the store open.
func (o adminOps) withStore(fn func(*policies, *store.Store) error) error {
	st, err := o.moduleStore()
	if err != nil {
		return err
	}
	p := &o.g.pol
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return admin.Errorf(http.StatusServiceUnavailable, "closing", "the gateway is shutting down")
	}
	return fn(p, st)
}

func (o adminOps) moduleStore() (*store.Store, error) {
	if o.g.pol.store == nil {
		return nil, admin.Errorf(http.StatusConflict, "no_store", "no module store: set admin.state_dir in the config (or --state-dir)")
	}
	return o.g.pol.store, nil
}
