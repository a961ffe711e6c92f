package gateway

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
// aside and swapping it in (policies.go); in a fleet, through the fleet's
// record (fleet_control_admin.go).

// policyChange implements admin.PolicyChange; p.mu is held.
type policyChange struct{ p *policies }

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

// checkSignature is admin.CheckSignature: the fleet's modules are checked
// as uploads are (fleet_control.go).
var checkSignature = admin.CheckSignature

// verifyUpload verifies wasm as module name against every attachment that
// will run it, with its options (with none, against the defaults), and
// returns the verified modules, ready for the next generation, and the
// module's ABI version. Called with p.mu held.
func verifyUpload(ctx context.Context, p *policies, name string, wasm []byte, vectors []policy.TestVector) (map[moduleKey]*policy.Module, string, error) {
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
func attachmentsUsing(pg *policyGen, name string) []policy.Spec {
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
func activateUpload(ctx context.Context, p *policies, st *store.Store, name string, wasm []byte, meta store.Version, sig string, preloaded map[moduleKey]*policy.Module) error {
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
func closeUnused(p *policies, preloaded map[moduleKey]*policy.Module) {
	for k, m := range preloaded {
		if lm := p.loaded[k]; lm == nil || lm.mod != m {
			m.Close()
		}
	}
}
