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

func (f *fakeOps) RejectToolChange(server, tool string) error {
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
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
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
