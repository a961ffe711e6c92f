package gateway

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file is the module side of the admin API: upload, verification,
// activation, rollback and removal of uploaded policy modules. Every change
// is made by building the next policy generation aside and swapping it in
// (see generation.go).

// moduleInfo builds the description of an uploaded module from the store
// and the current generation.
func (o adminOps) moduleInfo(m store.Module) ModuleInfo {
	info := ModuleInfo{Name: m.Name, Digest: m.Active.Digest, Size: m.Active.Size, ABIVersion: m.Active.ABIVersion,
		UploadedBy: m.Active.UploadedBy, SignedBy: m.Active.SignedBy, ActivatedAt: m.Active.ActivatedAt,
		History: m.History, AttachedAs: []string{}, Healthy: true}
	pg := o.g.pol.current()
	if pg == nil {
		return info
	}
	stats := pg.chain.Stats()
	for i, a := range pg.atts {
		if name, ok := config.UploadedModule(a.spec.Module); ok && name == m.Name {
			info.AttachedAs = append(info.AttachedAs, a.spec.Name)
			info.Calls += stats[i].Calls
			info.Failures += stats[i].Failures
			info.Healthy = info.Healthy && stats[i].Healthy
		}
	}
	return info
}

func (o adminOps) ListModules() ([]ModuleInfo, error) {
	st, err := o.moduleStore()
	if err != nil {
		return nil, err
	}
	out := []ModuleInfo{}
	for _, m := range st.List() {
		out = append(out, o.moduleInfo(m))
	}
	o.g.addReplicas(out)
	return out, nil
}

func (o adminOps) GetModule(name string) (ModuleInfo, error) {
	st, err := o.moduleStore()
	if err != nil {
		return ModuleInfo{}, err
	}
	m, ok := st.Get(name)
	if !ok {
		return ModuleInfo{}, admin.Errorf(http.StatusNotFound, "not_found", "no module named %q", name)
	}
	out := []ModuleInfo{o.moduleInfo(m)}
	o.g.addReplicas(out)
	return out[0], nil
}

// UploadModule checks an upload (size, decompression, digest, signature),
// verifies it against every attachment that uses the name (compile, ABI,
// exports, imports, configure with the attachment's config, test vectors),
// then commits it to the store and activates it by generation. Any failure
// leaves the previous version serving.
func (o adminOps) UploadModule(ctx context.Context, up admin.Upload) (ModuleInfo, error) {
	g := o.g
	st, err := o.moduleStore()
	if err != nil {
		return ModuleInfo{}, err
	}
	if err := g.fleetWritable(); err != nil {
		return ModuleInfo{}, err
	}
	if _, ok := config.UploadedModule(up.Name); !ok {
		return ModuleInfo{}, admin.Errorf(http.StatusBadRequest, "bad_name", "module name %q must not contain / or end in .wasm", up.Name)
	}
	cfg := g.config()
	wasm, err := readModule(cfg, up)
	if err != nil {
		return ModuleInfo{}, err
	}
	signedBy, err := checkSignature(cfg, wasm, up.Signature)
	if err != nil {
		return ModuleInfo{}, err
	}
	var vectors []policy.TestVector
	if up.Vectors != nil {
		if vectors, err = policy.ParseTestVectors(up.Vectors); err != nil {
			return ModuleInfo{}, admin.Errorf(http.StatusBadRequest, "bad_vectors", "%s: %v", admin.HeaderModuleVectors, err)
		}
	}
	err = o.withStore(func(p *policies, st *store.Store) error {
		preloaded, abi, err := verifyUpload(ctx, p, up.Name, wasm, vectors)
		if err != nil {
			return err
		}
		meta := store.Version{UploadedBy: up.Identity, SignedBy: signedBy, ABIVersion: abi, UploadedAt: time.Now()}
		return activateUpload(ctx, p, st, up.Name, wasm, meta, up.Signature, preloaded)
	})
	if err != nil {
		return ModuleInfo{}, err
	}
	m, _ := st.Get(up.Name)
	return o.moduleInfo(m), nil
}

// readModule reads the body of an upload within admin.max_module_bytes
// (after decompression) and checks its digest when one was sent.
func readModule(cfg *config.Config, up admin.Upload) ([]byte, error) {
	limit := cfg.Admin.MaxModuleBytes
	if limit <= 0 {
		limit = config.DefaultMaxModuleBytes
	}
	if up.ContentLength > limit && up.ContentEncoding == "" {
		return nil, admin.Errorf(http.StatusRequestEntityTooLarge, "too_large", "the module is %d bytes; the limit is %d (admin.max_module_bytes)", up.ContentLength, limit)
	}
	wasm, err := store.ReadBody(http.MaxBytesReader(nil, io.NopCloser(up.Body), max(limit*4, 1<<20)), up.ContentEncoding, limit)
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return nil, admin.Errorf(http.StatusRequestEntityTooLarge, "too_large", "the module is larger than %d bytes (admin.max_module_bytes) once decompressed", limit)
	case errors.As(err, &mbe):
		return nil, admin.Errorf(http.StatusRequestEntityTooLarge, "too_large", "the request body is larger than %d bytes", mbe.Limit)
	case err != nil:
		return nil, admin.Errorf(http.StatusBadRequest, "bad_body", "reading the module: %v", err)
	case len(wasm) == 0:
		return nil, admin.Errorf(http.StatusBadRequest, "empty", "the request body is empty; send the module's bytes")
	}
	if up.Digest == "" {
		return wasm, nil
	}
	if _, err := store.ParseDigest(up.Digest); err != nil {
		return nil, admin.Errorf(http.StatusBadRequest, "bad_digest", "%s: %v", admin.HeaderModuleDigest, err)
	}
	if err := store.CheckDigest(wasm, up.Digest); err != nil {
		return nil, admin.Errorf(http.StatusUnprocessableEntity, "digest_mismatch", "%v (the upload was corrupted or is not the module you meant)", err)
	}
	return wasm, nil
}

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
			return nil, "", verifyError(sp.Name, err)
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
		return p.fleet.uploadLocked(fleetChangeCtx(ctx, "module.upload", name), name, wasm, meta, sig, preloaded)
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

// verifyError maps a module verification failure to an admin error.
func verifyError(attachment string, err error) error {
	code := "invalid_module"
	switch {
	case errors.Is(err, policy.ErrCompile):
		code = "compile_failed"
	case errors.Is(err, policy.ErrABIVersion):
		code = "unsupported_abi"
	case errors.Is(err, policy.ErrMissingExport):
		code = "missing_export"
	case errors.Is(err, policy.ErrForbiddenImport):
		code = "forbidden_import"
	case errors.Is(err, policy.ErrConfigure):
		code = "configure_failed"
	case errors.Is(err, policy.ErrTestVector):
		code = "test_vector_failed"
	case errors.Is(err, policy.ErrInitTimeout):
		code = "start_timeout" // its start function or _initialize did not finish in time
	case errors.Is(err, policy.ErrMemoryLimit):
		code = "memory_limit"
	}
	return admin.Errorf(http.StatusUnprocessableEntity, code, "module rejected (checked as attachment %q): %v", attachment, err)
}

// checkSignature verifies the detached signature of an upload: required
// when the config says so, checked whenever one is sent. It returns the
// signer's key id.
func checkSignature(cfg *config.Config, wasm []byte, sig string) (string, error) {
	if sig == "" && !cfg.Admin.RequireSigned {
		return "", nil
	}
	var keys []ed25519.PublicKey
	for i, s := range cfg.Admin.TrustedKeys {
		k, err := store.ParsePublicKey(s)
		if err != nil {
			return "", fmt.Errorf("admin.trusted_keys[%d]: %w", i, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "", admin.Errorf(http.StatusForbidden, "untrusted", "the upload is signed but admin.trusted_keys is empty: nothing to check the signature against")
	}
	id, err := store.NewTrustedKeys(keys...).Verify(wasm, sig)
	switch {
	case errors.Is(err, store.ErrUnsigned):
		return "", admin.Errorf(http.StatusForbidden, "unsigned", "modules must be signed (admin.require_signed): send %s with the base64 ed25519 signature of the module bytes", admin.HeaderModuleSignature)
	case err != nil:
		return "", admin.Errorf(http.StatusForbidden, "bad_signature", "%s does not verify against any trusted key: %v", admin.HeaderModuleSignature, err)
	}
	return id, nil
}

func (o adminOps) DeleteModule(ctx context.Context, name string) error {
	return o.withStore(func(p *policies, st *store.Store) error {
		if _, ok := st.Get(name); !ok {
			return admin.Errorf(http.StatusNotFound, "not_found", "no module named %q", name)
		}
		if pg := p.cur.Load(); pg != nil {
			for _, a := range pg.atts {
				if n, ok := config.UploadedModule(a.spec.Module); ok && n == name {
					return admin.Errorf(http.StatusConflict, "attached", "module %q is attached as policy %q (by the %s); detach it first", name, a.spec.Name, a.source)
				}
			}
		}
		if p.fleet != nil {
			return p.fleet.removeLocked(fleetChangeCtx(ctx, "module.delete", name), name)
		}
		return st.Remove(name)
	})
}

// RollbackModule activates the version of name before the active one.
func (o adminOps) RollbackModule(ctx context.Context, name string) (ModuleInfo, error) {
	var info ModuleInfo
	err := o.withStore(func(p *policies, st *store.Store) error {
		prev, ok := st.Get(name)
		if !ok {
			return admin.Errorf(http.StatusNotFound, "not_found", "no module named %q", name)
		}
		if p.fleet != nil {
			err := p.fleet.rollbackLocked(fleetChangeCtx(ctx, "module.rollback", name), name)
			m, _ := st.Get(name)
			info = o.moduleInfo(m)
			return err
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
		m, _ := st.Get(name)
		info = o.moduleInfo(m)
		return nil
	})
	return info, err
}
