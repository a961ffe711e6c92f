package admin

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file carries out the policy and module operations of the admin API
// (PolicyOps): the checks of each request and the errors a person can act
// on. What they change, the gateway's policy generations, its module store
// and its fleet, it reaches through PolicyHost.

// PolicyHost is what the policy and module operations need of the gateway.
type PolicyHost interface {
	// Policies describes the attachments of the current generation, in
	// chain order.
	Policies() (generation uint64, policies []PolicyInfo)
	// Config is the running configuration.
	Config() *config.Config
	// Store is the module store; nil when there is none.
	Store() *store.Store
	// Writable is why admin writes are refused now (a fleet without
	// NATS), or nil.
	Writable() error
	// AddReplicas adds, in a fleet, the per-replica lines of infos.
	AddReplicas(infos []ModuleInfo)
	// Change runs fn with the policy lock held, or says why it cannot
	// (the gateway is shutting down).
	Change(fn func(PolicyChange) error) error
}

// PolicyChange is one change of the policy configuration, made with the
// gateway's policy lock held.
type PolicyChange interface {
	// FileSpecs are the attachments the config file makes.
	FileSpecs() []policy.Spec
	// Apply activates next as the run-time attachments and records them;
	// action and target name the change in the fleet's record.
	Apply(ctx context.Context, action, target string, next []policy.Spec) error
	// Upload verifies wasm as module name (with vectors) against every
	// attachment that uses it, then stores and activates it (meta gets
	// the module's ABI version and the upload time).
	Upload(ctx context.Context, name string, wasm []byte, vectors []policy.TestVector, meta store.Version, signature string) error
	// Remove deletes module name, attached nowhere.
	Remove(ctx context.Context, name string) error
	// Rollback activates the version of module name before prev's
	// active one.
	Rollback(ctx context.Context, name string, prev store.Module) error
}

// PolicyOps carries out the policy and module operations of Operations.
type PolicyOps struct{ host PolicyHost }

// NewPolicyOps returns the policy and module operations on host.
func NewPolicyOps(host PolicyHost) *PolicyOps { return &PolicyOps{host: host} }

// ListPolicies describes the attachments of the current generation.
func (o *PolicyOps) ListPolicies() (uint64, []PolicyInfo) { return o.host.Policies() }

// AttachPolicy inserts sp at pos among the run-time attachments (pos < 0:
// last).
func (o *PolicyOps) AttachPolicy(ctx context.Context, sp policy.Spec, pos int) error {
	return o.change(func(c PolicyChange, st *store.Store) error {
		current := st.Attachments()
		if pos < 0 {
			pos = len(current)
		}
		if pos > len(current) {
			return Errorf(http.StatusBadRequest, "bad_position", "position must be 0..%d, got %d", len(current), pos)
		}
		if slices.ContainsFunc(c.FileSpecs(), func(s policy.Spec) bool { return s.Name == sp.Name }) {
			return Errorf(http.StatusConflict, "exists", "policy %q is attached by the config file; pick another name", sp.Name)
		}
		if slices.ContainsFunc(current, func(s policy.Spec) bool { return s.Name == sp.Name }) {
			return Errorf(http.StatusConflict, "exists", "policy %q is already attached; detach it first", sp.Name)
		}
		return c.Apply(ctx, "policy.attach", sp.Name, slices.Insert(slices.Clone(current), pos, sp))
	})
}

func (o *PolicyOps) DetachPolicy(ctx context.Context, name string) error {
	return o.change(func(c PolicyChange, st *store.Store) error {
		current := st.Attachments()
		i, err := o.runtimeAttachment(c, current, name, "remove it there")
		if err != nil {
			return err
		}
		return c.Apply(ctx, "policy.detach", name, slices.Delete(slices.Clone(current), i, i+1))
	})
}

// ReorderPolicies sets the order of the run-time attachments; order names
// each exactly once.
func (o *PolicyOps) ReorderPolicies(ctx context.Context, order []string) error {
	return o.change(func(c PolicyChange, st *store.Store) error {
		current := st.Attachments()
		have := make([]string, len(current))
		for i, a := range current {
			have[i] = a.Name
		}
		want, sorted := slices.Clone(order), slices.Clone(have)
		sort.Strings(want)
		sort.Strings(sorted)
		if !slices.Equal(want, sorted) {
			return Errorf(http.StatusUnprocessableEntity, "bad_order", "order must name every run-time policy exactly once: have %v, got %v", have, order)
		}
		next := make([]policy.Spec, len(current))
		for i, n := range order {
			next[i] = current[slices.Index(have, n)]
		}
		return c.Apply(ctx, "policy.reorder", "", next)
	})
}

// PromotePolicy turns a shadow attachment into an enforcing one.
func (o *PolicyOps) PromotePolicy(ctx context.Context, name string) error {
	return o.change(func(c PolicyChange, st *store.Store) error {
		current := slices.Clone(st.Attachments())
		i, err := o.runtimeAttachment(c, current, name, "change its mode there")
		if err != nil {
			return err
		}
		if current[i].Mode != "shadow" {
			return Errorf(http.StatusConflict, "not_shadow", "policy %q already enforces", name)
		}
		current[i].Mode = ""
		return c.Apply(ctx, "policy.promote", name, current)
	})
}

// runtimeAttachment finds the run-time attachment name among current, or
// says why there is none: unknown, or owned by the config file (where the
// operator should do instead).
func (o *PolicyOps) runtimeAttachment(c PolicyChange, current []policy.Spec, name, instead string) (int, error) {
	if i := slices.IndexFunc(current, func(s policy.Spec) bool { return s.Name == name }); i >= 0 {
		return i, nil
	}
	if slices.ContainsFunc(c.FileSpecs(), func(s policy.Spec) bool { return s.Name == name }) {
		return -1, Errorf(http.StatusConflict, "config_owned", "policy %q is attached by the config file %s; %s", name, o.host.Config().Path, instead)
	}
	return -1, Errorf(http.StatusNotFound, "not_found", "no run-time policy named %q", name)
}

// change runs fn with the policy lock held and the store open.
func (o *PolicyOps) change(fn func(PolicyChange, *store.Store) error) error {
	st, err := o.store()
	if err != nil {
		return err
	}
	return o.host.Change(func(c PolicyChange) error { return fn(c, st) })
}

func (o *PolicyOps) store() (*store.Store, error) {
	st := o.host.Store()
	if st == nil {
		return nil, Errorf(http.StatusConflict, "no_store", "no module store: set admin.state_dir in the config (or --state-dir)")
	}
	return st, nil
}

// moduleInfo builds the description of an uploaded module from the store
// and the current generation.
func (o *PolicyOps) moduleInfo(m store.Module) ModuleInfo {
	info := ModuleInfo{Name: m.Name, Digest: m.Active.Digest, Size: m.Active.Size, ABIVersion: m.Active.ABIVersion,
		UploadedBy: m.Active.UploadedBy, SignedBy: m.Active.SignedBy, ActivatedAt: m.Active.ActivatedAt,
		History: m.History, AttachedAs: []string{}, Healthy: true}
	_, atts := o.host.Policies()
	for _, a := range atts {
		if storeName(a.Module) == m.Name {
			info.AttachedAs = append(info.AttachedAs, a.Name)
			info.Calls += a.Calls
			info.Failures += a.Failures
			info.Healthy = info.Healthy && a.Healthy
		}
	}
	return info
}

func (o *PolicyOps) ListModules() ([]ModuleInfo, error) {
	st, err := o.store()
	if err != nil {
		return nil, err
	}
	out := []ModuleInfo{}
	for _, m := range st.List() {
		out = append(out, o.moduleInfo(m))
	}
	o.host.AddReplicas(out)
	return out, nil
}

func (o *PolicyOps) GetModule(name string) (ModuleInfo, error) {
	st, err := o.store()
	if err != nil {
		return ModuleInfo{}, err
	}
	m, ok := st.Get(name)
	if !ok {
		return ModuleInfo{}, Errorf(http.StatusNotFound, "not_found", "no module named %q", name)
	}
	out := []ModuleInfo{o.moduleInfo(m)}
	o.host.AddReplicas(out)
	return out[0], nil
}

// UploadModule checks an upload (size, decompression, digest, signature),
// verifies it against every attachment that uses the name (compile, ABI,
// exports, imports, configure with the attachment's config, test vectors),
// then commits it to the store and activates it by generation. Any failure
// leaves the previous version serving.
func (o *PolicyOps) UploadModule(ctx context.Context, up Upload) (ModuleInfo, error) {
	st, err := o.store()
	if err != nil {
		return ModuleInfo{}, err
	}
	if err := o.host.Writable(); err != nil {
		return ModuleInfo{}, err
	}
	if _, ok := config.UploadedModule(up.Name); !ok {
		return ModuleInfo{}, Errorf(http.StatusBadRequest, "bad_name", "module name %q must not contain / or end in .wasm", up.Name)
	}
	cfg := o.host.Config()
	wasm, err := readModule(cfg, up)
	if err != nil {
		return ModuleInfo{}, err
	}
	signedBy, err := CheckSignature(cfg, wasm, up.Signature)
	if err != nil {
		return ModuleInfo{}, err
	}
	var vectors []policy.TestVector
	if up.Vectors != nil {
		if vectors, err = policy.ParseTestVectors(up.Vectors); err != nil {
			return ModuleInfo{}, Errorf(http.StatusBadRequest, "bad_vectors", "%s: %v", HeaderModuleVectors, err)
		}
	}
	meta := store.Version{UploadedBy: up.Identity, SignedBy: signedBy}
	err = o.host.Change(func(c PolicyChange) error { return c.Upload(ctx, up.Name, wasm, vectors, meta, up.Signature) })
	if err != nil {
		return ModuleInfo{}, err
	}
	m, _ := st.Get(up.Name)
	return o.moduleInfo(m), nil
}

// DeleteModule removes a module no attachment uses.
func (o *PolicyOps) DeleteModule(ctx context.Context, name string) error {
	return o.change(func(c PolicyChange, st *store.Store) error {
		if _, ok := st.Get(name); !ok {
			return Errorf(http.StatusNotFound, "not_found", "no module named %q", name)
		}
		_, atts := o.host.Policies()
		for _, a := range atts {
			if storeName(a.Module) == name {
				return Errorf(http.StatusConflict, "attached", "module %q is attached as policy %q (by the %s); detach it first", name, a.Name, a.Source)
			}
		}
		return c.Remove(ctx, name)
	})
}

// RollbackModule activates the version of name before the active one.
func (o *PolicyOps) RollbackModule(ctx context.Context, name string) (ModuleInfo, error) {
	var info ModuleInfo
	err := o.change(func(c PolicyChange, st *store.Store) error {
		prev, ok := st.Get(name)
		if !ok {
			return Errorf(http.StatusNotFound, "not_found", "no module named %q", name)
		}
		err := c.Rollback(ctx, name, prev)
		m, _ := st.Get(name)
		info = o.moduleInfo(m)
		return err
	})
	return info, err
}

// readModule reads the body of an upload within admin.max_module_bytes
// (after decompression) and checks its digest when one was sent.
func readModule(cfg *config.Config, up Upload) ([]byte, error) {
	limit := cfg.Admin.MaxModuleBytes
	if limit <= 0 {
		limit = config.DefaultMaxModuleBytes
	}
	if up.ContentLength > limit && up.ContentEncoding == "" {
		return nil, Errorf(http.StatusRequestEntityTooLarge, "too_large", "the module is %d bytes; the limit is %d (admin.max_module_bytes)", up.ContentLength, limit)
	}
	wasm, err := store.ReadBody(http.MaxBytesReader(nil, io.NopCloser(up.Body), max(limit*4, 1<<20)), up.ContentEncoding, limit)
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return nil, Errorf(http.StatusRequestEntityTooLarge, "too_large", "the module is larger than %d bytes (admin.max_module_bytes) once decompressed", limit)
	case errors.As(err, &mbe):
		return nil, Errorf(http.StatusRequestEntityTooLarge, "too_large", "the request body is larger than %d bytes", mbe.Limit)
	case err != nil:
		return nil, Errorf(http.StatusBadRequest, "bad_body", "reading the module: %v", err)
	case len(wasm) == 0:
		return nil, Errorf(http.StatusBadRequest, "empty", "the request body is empty; send the module's bytes")
	}
	if up.Digest == "" {
		return wasm, nil
	}
	if _, err := store.ParseDigest(up.Digest); err != nil {
		return nil, Errorf(http.StatusBadRequest, "bad_digest", "%s: %v", HeaderModuleDigest, err)
	}
	if err := store.CheckDigest(wasm, up.Digest); err != nil {
		return nil, Errorf(http.StatusUnprocessableEntity, "digest_mismatch", "%v (the upload was corrupted or is not the module you meant)", err)
	}
	return wasm, nil
}

// VerifyError maps a module verification failure to an admin error.
func VerifyError(attachment string, err error) error {
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
	return Errorf(http.StatusUnprocessableEntity, code, "module rejected (checked as attachment %q): %v", attachment, err)
}

// CheckSignature verifies the detached signature of an upload: required
// when the config says so, checked whenever one is sent. It returns the
// signer's key id.
func CheckSignature(cfg *config.Config, wasm []byte, sig string) (string, error) {
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
		return "", Errorf(http.StatusForbidden, "untrusted", "the upload is signed but admin.trusted_keys is empty: nothing to check the signature against")
	}
	id, err := store.NewTrustedKeys(keys...).Verify(wasm, sig)
	switch {
	case errors.Is(err, store.ErrUnsigned):
		return "", Errorf(http.StatusForbidden, "unsigned", "modules must be signed (admin.require_signed): send %s with the base64 ed25519 signature of the module bytes", HeaderModuleSignature)
	case err != nil:
		return "", Errorf(http.StatusForbidden, "bad_signature", "%s does not verify against any trusted key: %v", HeaderModuleSignature, err)
	}
	return id, nil
}

// storeName is the store name of the module a policy's module names: an
// uploaded module's, or the cache of an oci:// module (store.OCIName);
// "" for a file.
func storeName(module string) string {
	if n, ok := config.UploadedModule(module); ok {
		return n
	}
	if r, err := ociwasm.ParseRef(module); err == nil {
		return store.OCIName(r)
	}
	return ""
}
