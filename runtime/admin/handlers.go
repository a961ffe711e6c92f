package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/interceptchain"
	"github.com/edge-mcp/edge-mcp/transports"
)

// maxJSONBody caps the JSON bodies of attach and reorder.
const maxJSONBody = 1 << 20

func (s *Server) listModules(w http.ResponseWriter, r *http.Request) {
	list, err := s.ops.ListModules()
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"modules": list})
}

func (s *Server) getModule(w http.ResponseWriter, r *http.Request) {
	name, err := moduleName(r)
	var info ModuleInfo
	if err == nil {
		info, err = s.ops.GetModule(name)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// putModule uploads a module. It is stored and becomes the name's active
// version; it runs only where a policy attaches it.
func (s *Server) putModule(w http.ResponseWriter, r *http.Request) {
	name, err := moduleName(r)
	if err == nil {
		err = wasmBody(r)
	}
	if err != nil {
		s.record(r, "module.upload.rejected", r.PathValue("name"), "", err.Error())
		s.writeError(w, err)
		return
	}
	up := Upload{Name: name, Body: r.Body, ContentLength: r.ContentLength, ContentEncoding: r.Header.Get("Content-Encoding"),
		Digest: r.Header.Get(HeaderModuleDigest), Signature: r.Header.Get(HeaderModuleSignature), Identity: identity(r)}
	if h := r.Header.Get(HeaderModuleVectors); h != "" {
		if up.Vectors, err = base64.StdEncoding.DecodeString(h); err != nil {
			err = Errorf(http.StatusBadRequest, "bad_vectors", "%s must be base64 of a JSON array of test vectors: %v", HeaderModuleVectors, err)
		}
	}
	var info ModuleInfo
	if err == nil {
		info, err = s.ops.UploadModule(r.Context(), up)
	}
	if err != nil {
		s.record(r, "module.upload.rejected", name, "", err.Error())
		s.writeError(w, err)
		return
	}
	detail := "stored; not attached"
	if len(info.AttachedAs) > 0 {
		detail = fmt.Sprintf("stored; active as %v", info.AttachedAs)
	}
	s.record(r, "module.upload", info.Name, info.Digest, detail)
	writeJSON(w, http.StatusCreated, info)
}

func (s *Server) deleteModule(w http.ResponseWriter, r *http.Request) {
	name, err := moduleName(r)
	if err == nil {
		err = s.ops.DeleteModule(r.Context(), name)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.record(r, "module.delete", name, "", "")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) rollback(w http.ResponseWriter, r *http.Request) {
	name, err := moduleName(r)
	var info ModuleInfo
	if err == nil {
		info, err = s.ops.RollbackModule(r.Context(), name)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.record(r, "module.rollback", name, info.Digest, "")
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) {
	s.writePolicies(w, http.StatusOK)
}

func (s *Server) writePolicies(w http.ResponseWriter, status int) {
	gen, list := s.ops.ListPolicies()
	if list == nil {
		list = []PolicyInfo{}
	}
	writeJSON(w, status, map[string]any{"generation": gen, "policies": list})
}

// decodeBody decodes a JSON body strictly into v; what says what the body
// must be.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, what string) error {
	if status, reason := transports.CheckJSONContentType(r); status != 0 {
		return Errorf(status, "unsupported_media_type", "%s; the body must be %s", reason, what)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(http.StatusBadRequest, "bad_body", "the body must be %s: %v", what, err)
	}
	return nil
}

// attach attaches a module at run time: the body is one policy attachment
// with the fields of the config's "policies"; ?position=N inserts it at N
// among the run-time attachments (default: last).
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	var sp policy.Spec
	err := decodeBody(w, r, &sp, "one policy attachment (name, module, tools, servers, config, on_error, mode, timeout_ms, memory_mb, pool_size, grants)")
	if err == nil {
		if verr := sp.Validate(); verr != nil {
			err = Errorf(http.StatusUnprocessableEntity, "invalid_policy", "%v", verr)
		}
	}
	pos := -1
	if v := r.URL.Query().Get("position"); v != "" && err == nil {
		if pos, err = strconv.Atoi(v); err != nil || pos < 0 {
			err = Errorf(http.StatusBadRequest, "bad_position", "position must be a number from 0, got %q", v)
		}
	}
	if err == nil {
		err = s.ops.AttachPolicy(r.Context(), sp, pos)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	mode := sp.Mode
	if mode == "" {
		mode = "enforce"
	}
	s.record(r, "policy.attach", sp.Name, "", fmt.Sprintf("module %s mode %s", sp.Module, mode))
	s.writePolicies(w, http.StatusCreated)
}

func (s *Server) detach(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.ops.DetachPolicy(r.Context(), name); err != nil {
		s.writeError(w, err)
		return
	}
	s.record(r, "policy.detach", name, "", "")
	s.writePolicies(w, http.StatusOK)
}

// reorder sets the order of the run-time attachments: the body is
// {"order": [names]} naming each exactly once.
func (s *Server) reorder(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Order []string `json:"order"`
	}
	err := decodeBody(w, r, &body, `{"order": ["policy", ...]}`)
	if err == nil {
		err = s.ops.ReorderPolicies(r.Context(), body.Order)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.record(r, "policy.reorder", "", "", fmt.Sprint(body.Order))
	s.writePolicies(w, http.StatusOK)
}

func (s *Server) promote(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.ops.PromotePolicy(r.Context(), name); err != nil {
		s.writeError(w, err)
		return
	}
	s.record(r, "policy.promote", name, "", "shadow → enforce")
	s.writePolicies(w, http.StatusOK)
}

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	path, res, err := s.ops.Reload(r.Context())
	if err != nil {
		s.record(r, "config.reload.rejected", path, "", err.Error())
		var ce *config.Error
		if errors.As(err, &ce) {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "invalid_config", "reason": err.Error(), "file": ce.File, "key": ce.Key})
			return
		}
		s.writeError(w, Errorf(http.StatusUnprocessableEntity, "reload_failed", "%v", err))
		return
	}
	s.record(r, "config.reload", path, "", res.String())
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) pendingTools(w http.ResponseWriter, r *http.Request) {
	list := s.ops.PendingToolChanges()
	if list == nil {
		list = []PendingToolChange{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"pending": list})
}

// virtualServers lists the virtual servers and what each serves.
func (s *Server) virtualServers(w http.ResponseWriter, r *http.Request) {
	list := s.ops.VirtualServers()
	if list == nil {
		list = []VirtualServer{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"virtual_servers": list})
}

// virtualServer describes one virtual server; 404 names the others.
func (s *Server) virtualServer(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var names []string
	for _, vs := range s.ops.VirtualServers() {
		if vs.Name == name {
			writeJSON(w, http.StatusOK, vs)
			return
		}
		names = append(names, vs.Name+" ("+vs.Path+")")
	}
	s.writeError(w, Errorf(http.StatusNotFound, "not_found", "no virtual server %q; the configuration has: %s", name, strings.Join(names, ", ")))
}

// approveTool accepts a changed tool definition as the new pin; the tool
// returns to the catalogue.
func (s *Server) approveTool(w http.ResponseWriter, r *http.Request) {
	server, tool := r.PathValue("server"), r.PathValue("tool")
	if err := s.ops.ApproveToolChange(r.Context(), server, tool); err != nil {
		s.writeError(w, err)
		return
	}
	s.record(r, "tool.approve", server+"/"+tool, "", "changed definition approved")
	writeJSON(w, http.StatusOK, map[string]bool{"approved": true})
}

// rejectTool refuses a changed tool definition: the old pin stays, the
// tool stays withheld, and the change is no longer listed as pending until
// the upstream serves yet another definition.
func (s *Server) rejectTool(w http.ResponseWriter, r *http.Request) {
	server, tool := r.PathValue("server"), r.PathValue("tool")
	if err := s.ops.RejectToolChange(r.Context(), server, tool); err != nil {
		s.writeError(w, err)
		return
	}
	s.record(r, "tool.reject", server+"/"+tool, "", "changed definition rejected; tool stays withheld")
	writeJSON(w, http.StatusOK, map[string]bool{"rejected": true})
}

// moduleName is the {name} of a module endpoint, checked against the one
// rule for module names before anything else looks at it.
func moduleName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := store.ValidName(name); err != nil {
		return "", Errorf(http.StatusBadRequest, "bad_name", "%v", err)
	}
	return name, nil
}

// wasmBody checks that an upload says its body is a module:
// application/wasm, or application/octet-stream.
func wasmBody(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/wasm" && mt != "application/octet-stream") {
		return Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type",
			"Content-Type %q: a module upload must be application/wasm or application/octet-stream", ct)
	}
	return nil
}

// interceptors lists the running interceptor chain: GET /admin/interceptors.
func (s *Server) interceptors(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.ops.Interceptors())
}

// ChangeInterceptorMode asks ops to run the chain member name in mode
// ("active" or "audit"), the chain's errors as *Error: 404 for no chain
// or no such member, 409 for a member in that mode already.
func ChangeInterceptorMode(ctx context.Context, ops Operations, name, mode string) (was string, err error) {
	was, err = ops.SetInterceptorMode(ctx, name, mode)
	switch {
	case errors.Is(err, interceptchain.ErrNoChain), errors.Is(err, interceptchain.ErrNotInChain):
		err = Errorf(http.StatusNotFound, "not_found", "%v", err)
	case errors.Is(err, interceptchain.ErrSameMode):
		err = Errorf(http.StatusConflict, "same_mode", "%v", err)
	}
	return was, err
}

// interceptorMode answers POST /admin/interceptors/{name}/promote (mode
// active) and .../demote (audit): the chain runs the member in mode from
// now on, until the next reload. A name with "/" is sent with %2F.
func (s *Server) interceptorMode(mode intercept.Mode) http.HandlerFunc {
	action := map[intercept.Mode]string{intercept.Active: "interceptor.promote", intercept.Audit: "interceptor.demote"}[mode]
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		was, err := ChangeInterceptorMode(r.Context(), s.ops, name, string(mode))
		if err != nil {
			s.writeError(w, err)
			return
		}
		s.record(r, action, name, "", fmt.Sprintf("%s → %s until the next reload", was, mode))
		writeJSON(w, http.StatusOK, map[string]string{"name": name, "mode": string(mode), "was": was, "lasts": "until the next config reload"})
	}
}
