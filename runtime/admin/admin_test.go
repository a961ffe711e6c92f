package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy"
)

// fakeOps records the calls it gets; unset operations panic through the
// nil embedded interface.
type fakeOps struct {
	Operations
	err      error
	attached []string
	rejected []string
}

func (f *fakeOps) ListModules() ([]ModuleInfo, error) { return []ModuleInfo{{Name: "m"}}, f.err }

func (f *fakeOps) ListPolicies() (uint64, []PolicyInfo) { return 7, nil }

func (f *fakeOps) AttachPolicy(_ context.Context, sp policy.Spec, pos int) error {
	f.attached = append(f.attached, fmt.Sprintf("%s@%d", sp.Name, pos))
	return f.err
}

func (f *fakeOps) RejectToolChange(_ context.Context, server, tool string) error {
	f.rejected = append(f.rejected, server+"/"+tool)
	return f.err
}

func serve(t *testing.T, ops Operations, tokens map[string]string) (*httptest.Server, *[]Record) {
	t.Helper()
	t.Setenv(TokenEnv, "")
	var recs []Record
	srv := httptest.NewServer(New(Options{Ops: ops, Tokens: func() map[string]string { return tokens },
		Audit: func(r Record) { recs = append(recs, r) }}))
	t.Cleanup(srv.Close)
	return srv, &recs
}

func call(t *testing.T, method, url, token, body string) (int, http.Header, map[string]any) {
	t.Helper()
	var h map[string]string
	if body != "" {
		h = map[string]string{"Content-Type": "application/json"}
	}
	return callWith(t, method, url, token, body, h)
}

// callWith is call with request headers ("Host" sets the Host).
func callWith(t *testing.T, method, url, token, body string, hdr map[string]string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, resp.Header, doc
}

func TestAdminAuth(t *testing.T) {
	tests := []struct {
		name      string
		tokens    map[string]string
		token     string
		code      int
		challenge string
	}{
		{"no tokens configured", nil, "", 200, ""},
		{"token missing", map[string]string{"ops": "s3cret-token"}, "", 401, `Bearer realm="edge-mcp-admin"`},
		{"token wrong", map[string]string{"ops": "s3cret-token"}, "other", 401, `error="invalid_token"`},
		{"token right", map[string]string{"ops": "s3cret-token"}, "s3cret-token", 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := serve(t, &fakeOps{}, tc.tokens)
			code, h, body := call(t, "GET", srv.URL+"/admin/modules", tc.token, "")
			if code != tc.code || !strings.Contains(h.Get("WWW-Authenticate"), tc.challenge) {
				t.Errorf("got %d %q %v", code, h.Get("WWW-Authenticate"), body)
			}
		})
	}
}

func TestAdminErrorsAndAudit(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		err                      error
		code                     int
		errCode                  string
		attached, rejected       string
		action                   string
	}{
		{"unknown endpoint", "GET", "/admin/nope", "", nil, 404, "not_found", "", "", ""},
		{"operation refuses", "GET", "/admin/modules", "", Errorf(409, "no_store", "no store"), 409, "no_store", "", "", ""},
		{"operation fails", "GET", "/admin/modules", "", errors.New("disk on fire"), 500, "internal", "", "", ""},
		{"attach, bad body", "POST", "/admin/policies", `{"nme": 1}`, nil, 400, "bad_body", "", "", ""},
		{"attach, invalid spec", "POST", "/admin/policies", `{"name": "p"}`, nil, 422, "invalid_policy", "", "", ""},
		{"attach, bad position", "POST", "/admin/policies?position=x", `{"name": "p", "module": "m"}`, nil, 400, "bad_position", "", "", ""},
		{"attach at 2", "POST", "/admin/policies?position=2", `{"name": "p", "module": "m"}`, nil, 201, "", "p@2", "", "policy.attach"},
		{"attach last", "POST", "/admin/policies", `{"name": "p", "module": "m"}`, nil, 201, "", "p@-1", "", "policy.attach"},
		{"reject", "POST", "/admin/tools/s/t/reject", "", nil, 200, "", "", "s/t", "tool.reject"},
		{"reject, nothing pending", "POST", "/admin/tools/s/t/reject", "", Errorf(404, "not_pending", "no"), 404, "not_pending", "", "s/t", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := &fakeOps{err: tc.err}
			srv, recs := serve(t, ops, map[string]string{"ops": "tok"})
			code, _, body := call(t, tc.method, srv.URL+tc.path, "tok", tc.body)
			if code != tc.code || (tc.errCode != "" && body["error"] != tc.errCode) {
				t.Errorf("got %d %v, want %d %s", code, body, tc.code, tc.errCode)
			}
			if got := strings.Join(ops.attached, ","); got != tc.attached {
				t.Errorf("attached %q, want %q", got, tc.attached)
			}
			if got := strings.Join(ops.rejected, ","); got != tc.rejected {
				t.Errorf("rejected %q, want %q", got, tc.rejected)
			}
			switch {
			case tc.action == "" && len(*recs) > 0:
				t.Errorf("audited %+v", *recs)
			case tc.action != "" && (len(*recs) != 1 || (*recs)[0].Action != tc.action || (*recs)[0].Identity != "ops"):
				t.Errorf("audit %+v, want one %s by ops", *recs, tc.action)
			}
		})
	}
}

// TestAdminDoor: what the admin API checks before it asks the gateway for
// anything: Origin and Host (a web page must not drive it, even on
// loopback without tokens), the body's Content-Type, and module names
// (one rule, 400 with the reason, before any file is touched).
func TestAdminDoor(t *testing.T) {
	long := strings.Repeat("m", 65)
	tests := []struct {
		name, method, path, body string
		hdr                      map[string]string
		code                     int
		errCode, reason          string
	}{
		{"foreign Host", "GET", "/admin/modules", "", map[string]string{"Host": "evil.example"}, 403, "forbidden", "Host"},
		{"foreign Origin", "GET", "/admin/modules", "", map[string]string{"Origin": "https://evil.example"}, 403, "forbidden", "Origin"},
		{"attach as text/plain", "POST", "/admin/policies", `{"name": "p", "module": "m"}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type", "application/json"},
		{"attach without Content-Type", "POST", "/admin/policies", `{"name": "p", "module": "m"}`, nil, 415, "unsupported_media_type", "application/json"},
		{"upload as text/plain", "PUT", "/admin/modules/m", "\x00asm", map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type", "application/wasm"},
		{"upload, NUL in the name", "PUT", "/admin/modules/a%00b", "x", map[string]string{"Content-Type": "application/wasm"}, 400, "bad_name", "NUL"},
		{"upload, control character", "PUT", "/admin/modules/a%07b", "x", map[string]string{"Content-Type": "application/wasm"}, 400, "bad_name", "control"},
		{"upload, space", "PUT", "/admin/modules/a%20b", "x", map[string]string{"Content-Type": "application/wasm"}, 400, "bad_name", "space"},
		{"upload, leading dot", "PUT", "/admin/modules/.hidden", "x", map[string]string{"Content-Type": "application/wasm"}, 400, "bad_name", "starts with '.'"},
		{"upload, too long", "PUT", "/admin/modules/" + long, "x", map[string]string{"Content-Type": "application/wasm"}, 400, "bad_name", "64"},
		{"get, bad name", "GET", "/admin/modules/a%20b", "", nil, 400, "bad_name", "space"},
		{"delete, bad name", "DELETE", "/admin/modules/a%00b", "", nil, 400, "bad_name", "NUL"},
		{"rollback, bad name", "POST", "/admin/modules/.x/rollback", "", nil, 400, "bad_name", "starts with '.'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := &fakeOps{} // any operation it reached would panic or be recorded
			srv, _ := serve(t, ops, nil)
			code, _, body := callWith(t, tc.method, srv.URL+tc.path, "", tc.body, tc.hdr)
			reason, _ := body["reason"].(string)
			if code != tc.code || body["error"] != tc.errCode || !strings.Contains(strings.ToLower(reason), strings.ToLower(tc.reason)) {
				t.Errorf("got %d %v, want %d %s naming %q", code, body, tc.code, tc.errCode, tc.reason)
			}
			if len(ops.attached) > 0 {
				t.Errorf("the operation ran: %v", ops.attached)
			}
		})
	}
}
