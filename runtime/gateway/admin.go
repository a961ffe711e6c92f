package gateway

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
)

// This file is the admin API: module upload, verification, activation and
// rollback; run-time attachments; config reload. Every change is made by
// building the next policy generation aside and swapping it in (see
// generation.go), and is recorded as an audit record.

// Admin API request headers.
const (
	headerModuleDigest    = "X-Module-SHA256"
	headerModuleSignature = "X-Module-Signature"
	headerModuleVectors   = "X-Module-Test-Vectors"
)

// adminError is an admin API failure: an HTTP status and a reason a person
// can act on.
type adminError struct {
	status int
	code   string
	reason string
}

func (e *adminError) Error() string { return e.reason }

func adminErr(status int, code, format string, args ...any) *adminError {
	return &adminError{status: status, code: code, reason: fmt.Sprintf(format, args...)}
}

// AdminHandler returns the admin API. It authenticates every request with
// the admin tokens of the config (and EDGE_MCP_ADMIN_TOKEN).
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/modules", g.adminListModules)
	mux.HandleFunc("GET /admin/modules/{name}", g.adminGetModule)
	mux.HandleFunc("PUT /admin/modules/{name}", g.adminPutModule)
	mux.HandleFunc("DELETE /admin/modules/{name}", g.adminDeleteModule)
	mux.HandleFunc("POST /admin/modules/{name}/rollback", g.adminRollback)
	mux.HandleFunc("GET /admin/policies", g.adminListPolicies)
	mux.HandleFunc("POST /admin/policies", g.adminAttach)
	mux.HandleFunc("DELETE /admin/policies/{name}", g.adminDetach)
	mux.HandleFunc("PUT /admin/policies/order", g.adminReorder)
	mux.HandleFunc("POST /admin/policies/{name}/promote", g.adminPromote)
	mux.HandleFunc("POST /admin/reload", g.adminReload)
	mux.HandleFunc("GET /admin/tools/pending", g.adminPendingTools)
	mux.HandleFunc("POST /admin/tools/{server}/{tool}/approve", g.adminApproveTool)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAdminError(w, adminErr(http.StatusNotFound, "not_found", "no admin endpoint %s %s", r.Method, r.URL.Path))
	})
	return g.adminAuth(mux)
}

type adminIdentityKey struct{}

// adminAuth checks the bearer token of every admin request.
func (g *Gateway) adminAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokens := g.adminTokens()
		id := "local"
		if len(tokens) > 0 {
			tok, ok := bearerToken(r)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="edge-mcp-admin"`)
				writeAdminError(w, adminErr(http.StatusUnauthorized, "unauthorized", "this admin API needs Authorization: Bearer <admin token>"))
				return
			}
			id = ""
			presented := sha256.Sum256([]byte(tok))
			for name, want := range tokens {
				w := sha256.Sum256([]byte(want))
				if subtle.ConstantTimeCompare(presented[:], w[:]) == 1 {
					id = name
				}
			}
			if id == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="edge-mcp-admin", error="invalid_token"`)
				writeAdminError(w, adminErr(http.StatusUnauthorized, "unauthorized", "the admin token is not valid"))
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), adminIdentityKey{}, id)))
	})
}

// adminTokens returns the admin identities and their tokens.
func (g *Gateway) adminTokens() map[string]string {
	cfg := g.config()
	tokens := make(map[string]string, len(cfg.Admin.Tokens)+1)
	for k, v := range cfg.Admin.Tokens {
		tokens[k] = v
	}
	if v := os.Getenv("EDGE_MCP_ADMIN_TOKEN"); v != "" {
		tokens["env"] = v
	}
	return tokens
}

func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 8 || !equalFoldASCII(h[:7], "Bearer ") {
		return "", false
	}
	return h[7:], h[7:] != ""
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

func adminIdentity(r *http.Request) string {
	id, _ := r.Context().Value(adminIdentityKey{}).(string)
	return id
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeAdminError(w http.ResponseWriter, err error) {
	var ae *adminError
	if !errors.As(err, &ae) {
		ae = adminErr(http.StatusInternalServerError, "internal", "%v", err)
	}
	writeAdminJSON(w, ae.status, map[string]string{"error": ae.code, "reason": ae.reason})
}

// ModuleInfo describes an uploaded module in the admin API.
type ModuleInfo struct {
	Name        string          `json:"name"`
	Digest      string          `json:"digest"`
	Size        int64           `json:"size"`
	ABIVersion  string          `json:"abi_version,omitempty"`
	UploadedBy  string          `json:"uploaded_by,omitempty"`
	SignedBy    string          `json:"signed_by,omitempty"`
	ActivatedAt time.Time       `json:"activated_at,omitzero"`
	Healthy     bool            `json:"healthy"`
	Calls       uint64          `json:"calls"`
	Failures    uint64          `json:"failures"`
	AttachedAs  []string        `json:"attached_as"`
	History     []store.Version `json:"history,omitempty"`
}

func (g *Gateway) moduleStore() (*store.Store, error) {
	if g.pol.store == nil {
		return nil, adminErr(http.StatusConflict, "no_store", "no module store: set admin.state_dir in the config (or --state-dir)")
	}
	return g.pol.store, nil
}

// moduleInfo builds the description of an uploaded module from the store
// and the current generation.
func (g *Gateway) moduleInfo(m store.Module) ModuleInfo {
	info := ModuleInfo{Name: m.Name, Digest: m.Active.Digest, Size: m.Active.Size, ABIVersion: m.Active.ABIVersion,
		UploadedBy: m.Active.UploadedBy, SignedBy: m.Active.SignedBy, ActivatedAt: m.Active.ActivatedAt,
		History: m.History, AttachedAs: []string{}, Healthy: true}
	if pg := g.pol.current(); pg != nil {
		stats := pg.chain.Stats()
		for i, a := range pg.atts {
			if name, ok := config.UploadedModule(a.spec.Module); ok && name == m.Name {
				info.AttachedAs = append(info.AttachedAs, a.spec.Name)
				st := stats[i]
				info.Calls += st.Calls
				info.Failures += st.Failures
				info.Healthy = info.Healthy && st.Healthy
			}
		}
	}
	return info
}

func (g *Gateway) adminListModules(w http.ResponseWriter, r *http.Request) {
	st, err := g.moduleStore()
	if err != nil {
		writeAdminError(w, err)
		return
	}
	out := []ModuleInfo{}
	for _, m := range st.List() {
		out = append(out, g.moduleInfo(m))
	}
	writeAdminJSON(w, http.StatusOK, map[string]any{"modules": out})
}

func (g *Gateway) adminGetModule(w http.ResponseWriter, r *http.Request) {
	st, err := g.moduleStore()
	if err != nil {
		writeAdminError(w, err)
		return
	}
	m, ok := st.Get(r.PathValue("name"))
	if !ok {
		writeAdminError(w, adminErr(http.StatusNotFound, "not_found", "no module named %q", r.PathValue("name")))
		return
	}
	writeAdminJSON(w, http.StatusOK, g.moduleInfo(m))
}

// adminPutModule uploads a module: read (size cap, decompression), digest
// and signature checks, verification against every attachment that uses the
// name (compile, ABI, exports, imports, configure with the attachment's
// config, test vectors), then commit to the store and activate by
// generation. Any failure leaves the previous version serving.
func (g *Gateway) adminPutModule(w http.ResponseWriter, r *http.Request) {
	info, err := g.uploadModule(r)
	if err != nil {
		g.auditAdmin(r, "module.upload.rejected", r.PathValue("name"), "", err.Error())
		writeAdminError(w, err)
		return
	}
	g.auditAdmin(r, "module.upload", info.Name, info.Digest, fmt.Sprintf("activated; attached as %v", info.AttachedAs))
	writeAdminJSON(w, http.StatusCreated, info)
}

func (g *Gateway) uploadModule(r *http.Request) (ModuleInfo, error) {
	name := r.PathValue("name")
	st, err := g.moduleStore()
	if err != nil {
		return ModuleInfo{}, err
	}
	if _, ok := config.UploadedModule(name); !ok {
		return ModuleInfo{}, adminErr(http.StatusBadRequest, "bad_name", "module name %q must not contain / or end in .wasm", name)
	}
	cfg := g.config()
	limit := cfg.Admin.MaxModuleBytes
	if limit <= 0 {
		limit = config.DefaultMaxModuleBytes
	}
	if r.ContentLength > limit && r.Header.Get("Content-Encoding") == "" {
		return ModuleInfo{}, adminErr(http.StatusRequestEntityTooLarge, "too_large", "the module is %d bytes; the limit is %d (admin.max_module_bytes)", r.ContentLength, limit)
	}
	wasm, err := store.ReadBody(http.MaxBytesReader(nil, r.Body, max(limit*4, 1<<20)), r.Header.Get("Content-Encoding"), limit)
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return ModuleInfo{}, adminErr(http.StatusRequestEntityTooLarge, "too_large", "the module is larger than %d bytes (admin.max_module_bytes) once decompressed", limit)
	case err != nil:
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return ModuleInfo{}, adminErr(http.StatusRequestEntityTooLarge, "too_large", "the request body is larger than %d bytes", mbe.Limit)
		}
		return ModuleInfo{}, adminErr(http.StatusBadRequest, "bad_body", "reading the module: %v", err)
	case len(wasm) == 0:
		return ModuleInfo{}, adminErr(http.StatusBadRequest, "empty", "the request body is empty; send the module's bytes")
	}
	if want := r.Header.Get(headerModuleDigest); want != "" {
		if _, err := store.ParseDigest(want); err != nil {
			return ModuleInfo{}, adminErr(http.StatusBadRequest, "bad_digest", "%s: %v", headerModuleDigest, err)
		}
		if err := store.CheckDigest(wasm, want); err != nil {
			return ModuleInfo{}, adminErr(http.StatusUnprocessableEntity, "digest_mismatch", "%v (the upload was corrupted or is not the module you meant)", err)
		}
	}
	signedBy, err := g.checkSignature(cfg, wasm, r.Header.Get(headerModuleSignature))
	if err != nil {
		return ModuleInfo{}, err
	}
	var vectors []policy.TestVector
	if h := r.Header.Get(headerModuleVectors); h != "" {
		raw, err := base64.StdEncoding.DecodeString(h)
		if err != nil {
			return ModuleInfo{}, adminErr(http.StatusBadRequest, "bad_vectors", "%s must be base64 of a JSON array of test vectors: %v", headerModuleVectors, err)
		}
		if vectors, err = policy.ParseTestVectors(raw); err != nil {
			return ModuleInfo{}, adminErr(http.StatusBadRequest, "bad_vectors", "%s: %v", headerModuleVectors, err)
		}
	}

	p := &g.pol
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ModuleInfo{}, adminErr(http.StatusServiceUnavailable, "closing", "the gateway is shutting down")
	}
	eng, err := p.engineLocked(r.Context())
	if err != nil {
		return ModuleInfo{}, err
	}
	// Verify against every attachment that will run it, with its options;
	// with none, against the defaults.
	specs := []policy.Spec{{Name: name, Module: name}}
	if pg := p.cur.Load(); pg != nil {
		var using []policy.Spec
		for _, a := range pg.atts {
			if n, ok := config.UploadedModule(a.spec.Module); ok && n == name {
				using = append(using, a.spec)
			}
		}
		if len(using) > 0 {
			specs = using
		}
	}
	preloaded := map[moduleKey]*policy.Module{}
	closePreloaded := func() {
		for _, m := range preloaded {
			m.Close()
		}
	}
	var abiVersion string
	for _, sp := range specs {
		key, err := keyFor(&sp, wasm)
		if err != nil {
			closePreloaded()
			return ModuleInfo{}, adminErr(http.StatusUnprocessableEntity, "bad_attachment", "%v", err)
		}
		if preloaded[key] != nil {
			continue
		}
		opts, _ := sp.ModuleOptions()
		m, err := eng.Verify(r.Context(), sp.Name, wasm, opts, vectors)
		if err != nil {
			closePreloaded()
			return ModuleInfo{}, verifyError(sp.Name, err)
		}
		abiVersion = m.Stats().ABIVersion
		preloaded[key] = m
	}
	ver, err := st.Commit(name, wasm, store.Version{UploadedBy: adminIdentity(r), SignedBy: signedBy, ABIVersion: abiVersion, UploadedAt: time.Now()})
	if err != nil {
		closePreloaded()
		return ModuleInfo{}, fmt.Errorf("storing the module: %w", err)
	}
	if err := p.rebuildLocked(r.Context(), st.Attachments(), preloaded); err != nil {
		// The store already holds the new version: put the old one back.
		if _, rerr := st.Rollback(name); rerr != nil && !errors.Is(rerr, store.ErrNoPrevious) {
			err = errors.Join(err, rerr)
		} else if errors.Is(rerr, store.ErrNoPrevious) {
			st.Remove(name)
		}
		closePreloaded()
		return ModuleInfo{}, adminErr(http.StatusUnprocessableEntity, "activation_failed", "activating %s: %v", ver.Digest, err)
	}
	closeUnused(p, preloaded)
	m, _ := st.Get(name)
	return g.moduleInfo(m), nil
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
	}
	return adminErr(http.StatusUnprocessableEntity, code, "module rejected (checked as attachment %q): %v", attachment, err)
}

// checkSignature verifies the detached signature of an upload: required
// when the config says so, checked whenever one is sent.
func (g *Gateway) checkSignature(cfg *config.Config, wasm []byte, sig string) (string, error) {
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
		return "", adminErr(http.StatusForbidden, "untrusted", "the upload is signed but admin.trusted_keys is empty: nothing to check the signature against")
	}
	id, err := store.NewTrustedKeys(keys...).Verify(wasm, sig)
	switch {
	case errors.Is(err, store.ErrUnsigned):
		return "", adminErr(http.StatusForbidden, "unsigned", "modules must be signed (admin.require_signed): send %s with the base64 ed25519 signature of the module bytes", headerModuleSignature)
	case err != nil:
		return "", adminErr(http.StatusForbidden, "bad_signature", "%s does not verify against any trusted key: %v", headerModuleSignature, err)
	}
	return id, nil
}

func (g *Gateway) adminDeleteModule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := g.withStore(func(p *policies, st *store.Store) error {
		if _, ok := st.Get(name); !ok {
			return adminErr(http.StatusNotFound, "not_found", "no module named %q", name)
		}
		if pg := p.cur.Load(); pg != nil {
			for _, a := range pg.atts {
				if n, ok := config.UploadedModule(a.spec.Module); ok && n == name {
					return adminErr(http.StatusConflict, "attached", "module %q is attached as policy %q (by the %s); detach it first", name, a.spec.Name, a.source)
				}
			}
		}
		return st.Remove(name)
	})
	if err != nil {
		writeAdminError(w, err)
		return
	}
	g.auditAdmin(r, "module.delete", name, "", "")
	w.WriteHeader(http.StatusNoContent)
}

func (g *Gateway) adminRollback(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var info ModuleInfo
	err := g.withStore(func(p *policies, st *store.Store) error {
		prev, ok := st.Get(name)
		if !ok {
			return adminErr(http.StatusNotFound, "not_found", "no module named %q", name)
		}
		if _, err := st.Rollback(name); err != nil {
			if errors.Is(err, store.ErrNoPrevious) {
				return adminErr(http.StatusConflict, "no_previous", "module %q has no earlier version to roll back to", name)
			}
			return err
		}
		if err := p.rebuildLocked(r.Context(), st.Attachments(), nil); err != nil {
			// Put the version we rolled back from back in place.
			if _, cerr := st.Commit(name, mustBlob(st, prev.Active.Digest), prev.Active); cerr != nil {
				err = errors.Join(err, cerr)
			}
			return adminErr(http.StatusUnprocessableEntity, "activation_failed", "the previous version of %q does not load any more: %v", name, err)
		}
		m, _ := st.Get(name)
		info = g.moduleInfo(m)
		return nil
	})
	if err != nil {
		writeAdminError(w, err)
		return
	}
	g.auditAdmin(r, "module.rollback", name, info.Digest, "")
	writeAdminJSON(w, http.StatusOK, info)
}

func mustBlob(st *store.Store, digest string) []byte {
	b, _ := st.Blob(digest)
	return b
}

// withStore runs fn with the policy lock held and the store open.
func (g *Gateway) withStore(fn func(*policies, *store.Store) error) error {
	st, err := g.moduleStore()
	if err != nil {
		return err
	}
	p := &g.pol
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return adminErr(http.StatusServiceUnavailable, "closing", "the gateway is shutting down")
	}
	return fn(p, st)
}

// PolicyInfo describes one attachment of the current generation.
type PolicyInfo struct {
	policy.Spec
	Source   string `json:"source"`
	Digest   string `json:"digest"`
	Healthy  bool   `json:"healthy"`
	Calls    uint64 `json:"calls"`
	Failures uint64 `json:"failures"`
	// ShadowRuns and ShadowDiffs count a shadow attachment's runs and the
	// runs whose decision differed from the enforced one.
	ShadowRuns  uint64 `json:"shadow_runs,omitempty"`
	ShadowDiffs uint64 `json:"shadow_diffs,omitempty"`
}

// Policies describes the attachments of the current generation, in chain
// order.
func (g *Gateway) Policies() (generation uint64, out []PolicyInfo) {
	pg := g.pol.current()
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

func (g *Gateway) adminListPolicies(w http.ResponseWriter, r *http.Request) {
	gen, list := g.Policies()
	writeAdminJSON(w, http.StatusOK, map[string]any{"generation": gen, "policies": list})
}

// adminAttach attaches a module at run time: the body is one policy
// attachment with the fields of the config's "policies"; ?position=N
// inserts it at N among the run-time attachments (default: last).
func (g *Gateway) adminAttach(w http.ResponseWriter, r *http.Request) {
	var sp policy.Spec
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sp); err != nil {
		writeAdminError(w, adminErr(http.StatusBadRequest, "bad_body", "the body must be one policy attachment (name, module, tools, servers, config, on_error, mode, timeout_ms, memory_mb, pool_size, grants): %v", err))
		return
	}
	if err := sp.Validate(); err != nil {
		writeAdminError(w, adminErr(http.StatusUnprocessableEntity, "invalid_policy", "%v", err))
		return
	}
	err := g.withStore(func(p *policies, st *store.Store) error {
		admin := st.Attachments()
		pos := len(admin)
		if v := r.URL.Query().Get("position"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > len(admin) {
				return adminErr(http.StatusBadRequest, "bad_position", "position must be 0..%d, got %q", len(admin), v)
			}
			pos = n
		}
		for _, a := range p.fileSpecs {
			if a.Name == sp.Name {
				return adminErr(http.StatusConflict, "exists", "policy %q is attached by the config file; pick another name", sp.Name)
			}
		}
		for _, a := range admin {
			if a.Name == sp.Name {
				return adminErr(http.StatusConflict, "exists", "policy %q is already attached; detach it first", sp.Name)
			}
		}
		next := slices.Insert(slices.Clone(admin), pos, sp)
		return g.applyAttachments(r.Context(), p, st, next)
	})
	if err != nil {
		writeAdminError(w, err)
		return
	}
	g.auditAdmin(r, "policy.attach", sp.Name, "", fmt.Sprintf("module %s mode %s", sp.Module, modeOf(sp)))
	g.adminListPoliciesStatus(w, http.StatusCreated)
}

func modeOf(sp policy.Spec) string {
	if sp.Mode == "" {
		return "enforce"
	}
	return sp.Mode
}

// applyAttachments builds and activates a generation with the given
// run-time attachments, then records them in the store.
func (g *Gateway) applyAttachments(ctx context.Context, p *policies, st *store.Store, admin []policy.Spec) error {
	if err := p.rebuildLocked(ctx, admin, nil); err != nil {
		return adminErr(http.StatusUnprocessableEntity, "activation_failed", "%v", err)
	}
	if err := st.SetAttachments(admin); err != nil {
		return fmt.Errorf("recording the attachments: %w", err)
	}
	return nil
}

func (g *Gateway) adminListPoliciesStatus(w http.ResponseWriter, status int) {
	gen, list := g.Policies()
	writeAdminJSON(w, status, map[string]any{"generation": gen, "policies": list})
}

func (g *Gateway) adminDetach(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := g.withStore(func(p *policies, st *store.Store) error {
		admin := st.Attachments()
		i, err := g.runtimeAttachment(p, admin, name, "remove it there")
		if err != nil {
			return err
		}
		return g.applyAttachments(r.Context(), p, st, slices.Delete(slices.Clone(admin), i, i+1))
	})
	if err != nil {
		writeAdminError(w, err)
		return
	}
	g.auditAdmin(r, "policy.detach", name, "", "")
	g.adminListPoliciesStatus(w, http.StatusOK)
}

// runtimeAttachment finds the run-time attachment name among admin, or
// says why there is none: unknown, or owned by the config file (where the
// operator should do instead).
func (g *Gateway) runtimeAttachment(p *policies, admin []policy.Spec, name, instead string) (int, error) {
	if i := slices.IndexFunc(admin, func(s policy.Spec) bool { return s.Name == name }); i >= 0 {
		return i, nil
	}
	if slices.ContainsFunc(p.fileSpecs, func(s policy.Spec) bool { return s.Name == name }) {
		return -1, adminErr(http.StatusConflict, "config_owned", "policy %q is attached by the config file %s; %s", name, g.config().Path, instead)
	}
	return -1, adminErr(http.StatusNotFound, "not_found", "no run-time policy named %q", name)
}

// adminReorder sets the order of the run-time attachments: the body is
// {"order": [names]} naming each exactly once.
func (g *Gateway) adminReorder(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Order []string `json:"order"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeAdminError(w, adminErr(http.StatusBadRequest, "bad_body", `the body must be {"order": ["policy", ...]}: %v`, err))
		return
	}
	err := g.withStore(func(p *policies, st *store.Store) error {
		admin := st.Attachments()
		have := make([]string, len(admin))
		for i, a := range admin {
			have[i] = a.Name
		}
		want := slices.Clone(body.Order)
		sort.Strings(want)
		sorted := slices.Clone(have)
		sort.Strings(sorted)
		if !slices.Equal(want, sorted) {
			return adminErr(http.StatusUnprocessableEntity, "bad_order", "order must name every run-time policy exactly once: have %v, got %v", have, body.Order)
		}
		next := make([]policy.Spec, len(admin))
		for i, n := range body.Order {
			next[i] = admin[slices.Index(have, n)]
		}
		return g.applyAttachments(r.Context(), p, st, next)
	})
	if err != nil {
		writeAdminError(w, err)
		return
	}
	g.auditAdmin(r, "policy.reorder", "", "", fmt.Sprint(body.Order))
	g.adminListPoliciesStatus(w, http.StatusOK)
}

// adminPromote turns a shadow attachment into an enforcing one.
func (g *Gateway) adminPromote(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := g.withStore(func(p *policies, st *store.Store) error {
		admin := slices.Clone(st.Attachments())
		i, err := g.runtimeAttachment(p, admin, name, "change its mode there")
		if err != nil {
			return err
		}
		if admin[i].Mode != "shadow" {
			return adminErr(http.StatusConflict, "not_shadow", "policy %q already enforces", name)
		}
		admin[i].Mode = ""
		return g.applyAttachments(r.Context(), p, st, admin)
	})
	if err != nil {
		writeAdminError(w, err)
		return
	}
	g.auditAdmin(r, "policy.promote", name, "", "shadow → enforce")
	g.adminListPoliciesStatus(w, http.StatusOK)
}

func (g *Gateway) adminReload(w http.ResponseWriter, r *http.Request) {
	res, err := g.ReloadFile(r.Context())
	if err != nil {
		g.auditAdmin(r, "config.reload.rejected", g.config().Path, "", err.Error())
		var ce *config.Error
		if errors.As(err, &ce) {
			writeAdminJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "invalid_config", "reason": err.Error(), "file": ce.File, "key": ce.Key})
			return
		}
		writeAdminError(w, adminErr(http.StatusUnprocessableEntity, "reload_failed", "%v", err))
		return
	}
	g.auditAdmin(r, "config.reload", g.config().Path, "", res.String())
	writeAdminJSON(w, http.StatusOK, res)
}

// auditAdmin records an admin change: what, which digest, when, by whom.
func (g *Gateway) auditAdmin(r *http.Request, action, target, digest, detail string) {
	id := "local"
	if r != nil {
		id = adminIdentity(r)
	}
	g.audit(AuditAdmin{Time: time.Now().UTC(), Identity: id, Action: action, Target: target, Digest: digest, Detail: detail})
}
