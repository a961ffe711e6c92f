package policyset

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// This file carries out the changes the admin API's policy and module
// operations ask for (admin.PolicyOps checks them): attachments, and the
// verification, activation, rollback and removal of uploaded policy
// modules. Every change is made by building the next policy generation
// aside and swapping it in (set.go); in a fleet, through the fleet's
// record (runtime/fleet, control_admin.go). The Set is also the policy
// half of admin.PolicyHost (Policies, Store, Change) and the fleet's
// fleet.Policies.

// Policies describes the attachments of the current generation, in chain
// order.
func (p *Set) Policies() (generation uint64, out []admin.PolicyInfo) {
	pg := p.Current()
	if pg == nil {
		return 0, []admin.PolicyInfo{}
	}
	stats := pg.chain.Stats()
	for i, a := range pg.atts {
		st := stats[i]
		out = append(out, admin.PolicyInfo{Spec: a.spec, Source: a.source, Digest: a.module.digest, Healthy: st.Healthy,
			Calls: st.Calls, Failures: st.Failures, ShadowRuns: st.ShadowRuns, ShadowDiffs: st.ShadowDiffs})
	}
	return pg.id, out
}

// Change runs fn with the policy lock held.
func (p *Set) Change(fn func(admin.PolicyChange) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return admin.Errorf(http.StatusServiceUnavailable, "closing", "the gateway is shutting down")
	}
	return fn(policyChange{p})
}

// The Set as the fleet's control plane changes it (fleet.Policies).
var _ fleet.Policies = (*Set)(nil)

func (p *Set) Lock()                    { p.mu.Lock() }
func (p *Set) Unlock()                  { p.mu.Unlock() }
func (p *Set) Store() *store.Store      { return p.store }
func (p *Set) UseStore(st *store.Store) { p.store = st }
func (p *Set) Attach(c *fleet.Control)  { p.fleet = c }
func (p *Set) Closed() bool             { return p.closed }
func (p *Set) Rebuild(ctx context.Context, atts []policy.Spec, pre fleet.Preloaded) error {
	mods, _ := pre.(preloadedModules)
	if err := p.rebuildLocked(ctx, atts, mods); err != nil {
		closeAll(mods)
		return err
	}
	closeUnused(p, mods)
	return nil
}

// Loaded is the number of loaded modules.
func (p *Set) Loaded() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.loaded)
}

// preloadedModules are modules the admin API compiled ahead of a change.
type preloadedModules map[moduleKey]*policy.Module

func (m preloadedModules) Close() { closeAll(m) }

// applyAttachments builds and activates a generation with the given
// run-time attachments, then records them in the store.
func applyAttachments(ctx context.Context, p *Set, st *store.Store, next []policy.Spec) error {
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

// policyChange implements admin.PolicyChange; p.mu is held.
type policyChange struct{ p *Set }

func (c policyChange) FileSpecs() []policy.Spec { return c.p.fileSpecs }

func (c policyChange) Apply(ctx context.Context, action, target string, next []policy.Spec) error {
	return applyAttachments(fleet.ChangeContext(ctx, action, target), c.p, c.p.store, next)
}

func (c policyChange) Upload(ctx context.Context, name string, wasm []byte, vectors []policy.TestVector, meta store.Version, sig string) error {
	preloaded, abi, err := verifyUpload(ctx, c.p, name, wasm, vectors)
	if err != nil {
		return err
	}
	meta.ABIVersion, meta.UploadedAt = abi, time.Now()
	return activateUpload(ctx, c.p, c.p.store, name, wasm, meta, sig, preloaded)
}

func (c policyChange) Remove(ctx context.Context, name string) error {
	if c.p.fleet != nil {
		return c.p.fleet.RemoveLocked(fleet.ChangeContext(ctx, "module.delete", name), name)
	}
	return c.p.store.Remove(name)
}

// Rollback activates the version of name before prev's active one; when
// that version does not load any more, prev's comes back.
func (c policyChange) Rollback(ctx context.Context, name string, prev store.Module) error {
	p, st := c.p, c.p.store
	if p.fleet != nil {
		return p.fleet.RollbackLocked(fleet.ChangeContext(ctx, "module.rollback", name), name)
	}
	if _, err := st.Rollback(name); errors.Is(err, store.ErrNoPrevious) {
		return admin.Errorf(http.StatusConflict, "no_previous", "module %q has no earlier version to roll back to", name)
	} else if err != nil {
		return fmt.Errorf("rolling back module %q: %w", name, err)
	}
	if err := p.rebuildLocked(ctx, st.Attachments(), nil); err != nil {
		// Put the version we rolled back from back in place.
		blob, _ := st.Blob(prev.Active.Digest)
		if _, cerr := st.Commit(name, blob, prev.Active); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return admin.Errorf(http.StatusUnprocessableEntity, "activation_failed", "the previous version of %q does not load any more: %v", name, err)
	}
	return nil
}

// verifyUpload verifies wasm as module name against every attachment that
// will run it, with its options (with none, against the defaults), and
// returns the verified modules, ready for the next generation, and the
// module's ABI version. Called with p.mu held.
func verifyUpload(ctx context.Context, p *Set, name string, wasm []byte, vectors []policy.TestVector) (map[moduleKey]*policy.Module, string, error) {
	eng, err := p.engineLocked(ctx)
	if err != nil {
		return nil, "", err
	}
	specs := []policy.Spec{{Name: name, Module: name}}
	if using := attachmentsUsing(p.cur.Load(), name); len(using) > 0 {
		specs = using
	}
	preloaded := map[moduleKey]*policy.Module{}
	var abiVersion string
	for _, sp := range specs {
		key, err := keyFor(&sp, wasm)
		if err != nil {
			closeAll(preloaded)
			return nil, "", admin.Errorf(http.StatusUnprocessableEntity, "bad_attachment", "%v", err)
		}
		if preloaded[key] != nil {
			continue
		}
		opts, _ := policy.SpecOptions(&sp)
		m, err := eng.Verify(ctx, sp.Name, wasm, opts, vectors)
		if err != nil {
			closeAll(preloaded)
			return nil, "", admin.VerifyError(sp.Name, err)
		}
		abiVersion = m.Stats().ABIVersion
		preloaded[key] = m
	}
	return preloaded, abiVersion, nil
}

// attachmentsUsing returns the specs of pg's attachments that run the
// uploaded module name.
func attachmentsUsing(pg *Gen, name string) []policy.Spec {
	if pg == nil {
		return nil
	}
	var using []policy.Spec
	for _, a := range pg.atts {
		if n, ok := config.UploadedModule(a.spec.Module); ok && n == name {
			using = append(using, a.spec)
		}
	}
	return using
}

// activateUpload commits a verified module to the store and builds the
// generation that uses it; on failure the store gets its previous version
// back. Called with p.mu held.
func activateUpload(ctx context.Context, p *Set, st *store.Store, name string, wasm []byte, meta store.Version, sig string, preloaded map[moduleKey]*policy.Module) error {
	if p.fleet != nil {
		return p.fleet.UploadLocked(fleet.ChangeContext(ctx, "module.upload", name), name, wasm, meta, sig, preloadedModules(preloaded))
	}
	ver, err := st.Commit(name, wasm, meta)
	if err != nil {
		closeAll(preloaded)
		return fmt.Errorf("storing module %q: %w", name, err)
	}
	if err := p.rebuildLocked(ctx, st.Attachments(), preloaded); err != nil {
		// The store already holds the new version: put the old one back.
		if _, rerr := st.Rollback(name); errors.Is(rerr, store.ErrNoPrevious) {
			st.Remove(name)
		} else if rerr != nil {
			err = errors.Join(err, rerr)
		}
		closeAll(preloaded)
		return admin.Errorf(http.StatusUnprocessableEntity, "activation_failed", "activating %s: %v", ver.Digest, err)
	}
	closeUnused(p, preloaded)
	return nil
}

func closeAll(mods map[moduleKey]*policy.Module) {
	for _, m := range mods {
		m.Close()
	}
}

// closeUnused closes preloaded modules the new generation did not take.
func closeUnused(p *Set, preloaded map[moduleKey]*policy.Module) {
	for k, m := range preloaded {
		if lm := p.loaded[k]; lm == nil || lm.mod != m {
			m.Close()
		}
	}
}
