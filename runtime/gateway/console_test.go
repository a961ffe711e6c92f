package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileDescription is what a hostile upstream puts in a tool's
// description, hoping the console renders it as HTML.
const hostileDescription = `<script>document.title="pwned"</script><img src=x onerror="document.title='pwned'">`

// hostileUpstream serves n tools, tool0000 with hostileDescription.
func hostileUpstream(t testing.TB, n int) (*mcp.Server, string) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	}
	for i := range n {
		desc := fmt.Sprintf("Tool number %d.", i)
		if i == 0 {
			desc = hostileDescription
		}
		s.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool%04d", i), Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}, handler)
	}
	return s, serveMCP(t, s)
}

// consoleClient keeps cookies and does not follow redirects.
func consoleClient(t testing.TB) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func consoleDo(t *testing.T, c *http.Client, method, u string, form url.Values, header map[string]string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// csrfOf is the CSRF token of the first form of page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`name="csrf" (?:value|content)="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

// TestConsoleLoginSessionAndCSRF: with admin tokens the console wants a
// login; a token becomes a signed HttpOnly, SameSite=Strict cookie; a
// forged cookie, a missing CSRF token, another origin and another Host are
// refused; pages are HTML with a script-free CSP and hostile descriptions
// escaped; a thousand tools are paginated under 100 KB a page.
func TestConsoleLoginSessionAndCSRF(t *testing.T) {
	t.Parallel()
	_, up := hostileUpstream(t, 1000)
	_, adminURL, g := adminGateway(t, fmt.Sprintf(`{"mcpServers": {"hostile": {"url": %q}}, "admin": {"tokens": {"ops": %q}}}`, up, adminToken), t.TempDir())
	waitFor(t, "the upstream's tools", func() bool { return len(consoleSource{g}.Tools()) == 1000 })
	c := consoleClient(t)

	resp, _ := consoleDo(t, c, "GET", adminURL+"/ui/", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("GET /ui/ without a session: %d %s, want 303 to /ui/login", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, page := consoleDo(t, c, "GET", adminURL+"/ui/login", nil, nil)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}
	loginCSRF := csrfOf(t, page)
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  map[string]string
		want int
	}{
		{"wrong token", url.Values{"csrf": {loginCSRF}, "token": {"nope"}}, nil, http.StatusUnauthorized},
		{"no CSRF token", url.Values{"token": {adminToken}}, nil, http.StatusForbidden},
		{"another origin", url.Values{"csrf": {loginCSRF}, "token": {adminToken}}, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
	} {
		t.Run("login/"+tc.name, func(t *testing.T) {
			if resp, body := consoleDo(t, c, "POST", adminURL+"/ui/login", tc.form, tc.hdr); resp.StatusCode != tc.want || len(resp.Cookies()) > 0 {
				t.Errorf("%d (cookies %v), want %d: %s", resp.StatusCode, resp.Cookies(), tc.want, body)
			}
		})
	}
	resp, _ = consoleDo(t, c, "POST", adminURL+"/ui/login", url.Values{"csrf": {loginCSRF}, "token": {adminToken}}, nil)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d %v", resp.StatusCode, resp.Cookies())
	}
	if ck := resp.Cookies()[0]; !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || ck.Secure {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path /ui/, not Secure without TLS", ck)
	}

	resp, page = consoleDo(t, c, "GET", adminURL+"/ui/", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(page, "hostile") || !strings.Contains(page, "ops") {
		t.Fatalf("overview: %d\n%s", resp.StatusCode, page)
	}
	resp, page = consoleDo(t, c, "GET", adminURL+"/ui/catalogue", nil, nil)
	if resp.StatusCode != 200 || len(page) > 100<<10 || !strings.Contains(page, "tool0099") || strings.Contains(page, "tool0100") || !strings.Contains(page, "page=1") {
		t.Errorf("catalogue page 1 of 1,000 tools: %d, %d bytes", resp.StatusCode, len(page))
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "<img src=x") || !strings.Contains(page, "&lt;script&gt;") {
		t.Errorf("the hostile description is not escaped")
	}
	if _, page = consoleDo(t, c, "GET", adminURL+"/ui/catalogue?q=number+999", nil, nil); !strings.Contains(page, "tool0999") || strings.Contains(page, "tool0998") {
		t.Errorf("searching for one tool")
	}
	csrf := csrfOf(t, page)
	for _, p := range []string{"/ui/policies", "/ui/oauth", "/ui/fleet"} {
		if resp, page := consoleDo(t, c, "GET", adminURL+p, nil, nil); resp.StatusCode != 200 || len(page) > 100<<10 || !strings.Contains(page, "<h1>") {
			t.Errorf("%s: %d, %d bytes", p, resp.StatusCode, len(page))
		}
	}

	forged := consoleClient(t)
	u, _ := url.Parse(adminURL + "/ui/")
	good := c.Jar.Cookies(u)[0].Value
	forged.Jar.SetCookies(u, []*http.Cookie{{Name: "edge_mcp_console", Value: strings.Replace(good, good[:3], "b3B", 1) + "x", Path: "/ui/"}})
	if resp, _ := consoleDo(t, forged, "GET", adminURL+"/ui/catalogue", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a forged cookie: %d, want 303 to the login", resp.StatusCode)
	}
	for _, tc := range []struct {
		name string
		c    *http.Client
		form url.Values
		hdr  map[string]string
		want int
	}{
		{"no CSRF token", c, url.Values{"action": {"detach"}, "name": {"x"}}, nil, http.StatusForbidden},
		{"the login form's CSRF token", c, url.Values{"action": {"detach"}, "name": {"x"}, "csrf": {loginCSRF}}, nil, http.StatusForbidden},
		{"another origin", c, url.Values{"action": {"detach"}, "name": {"x"}, "csrf": {csrf}}, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"another loopback port", c, url.Values{"action": {"detach"}, "name": {"x"}, "csrf": {csrf}}, map[string]string{"Origin": "http://127.0.0.1:1"}, http.StatusForbidden},
		{"another Host", c, url.Values{"action": {"detach"}, "name": {"x"}, "csrf": {csrf}}, map[string]string{"Host": "evil.example"}, http.StatusForbidden},
		{"forged cookie", forged, url.Values{"action": {"detach"}, "name": {"x"}, "csrf": {csrf}}, nil, http.StatusUnauthorized},
		{"valid, unknown policy", c, url.Values{"action": {"detach"}, "name": {"x"}, "csrf": {csrf}}, nil, http.StatusNotFound},
	} {
		t.Run("post/"+tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", adminURL+"/ui/policies", strings.NewReader(tc.form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			if h := tc.hdr["Host"]; h != "" {
				req.Host = h
			}
			resp, err := tc.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%d, want %d", resp.StatusCode, tc.want)
			}
		})
	}

	resp, _ = consoleDo(t, c, "POST", adminURL+"/ui/logout", url.Values{"csrf": {csrf}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("logout: %d", resp.StatusCode)
	}
	if resp, _ := consoleDo(t, c, "GET", adminURL+"/ui/", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout: %d, want 303 to the login", resp.StatusCode)
	}
}

// TestConsoleOpenOnLoopback: without admin tokens the console needs no
// login (the admin listener is loopback-only then), and still wants the
// CSRF token of its forms.
func TestConsoleOpenOnLoopback(t *testing.T) {
	t.Parallel()
	_, up := hostileUpstream(t, 3)
	_, g := startGateway(t, fmt.Sprintf(`{"mcpServers": {"hostile": {"url": %q}}}`, up), Options{})
	srv := httptest.NewServer(g.AdminHandler())
	t.Cleanup(srv.Close)
	c := consoleClient(t)
	resp, page := consoleDo(t, c, "GET", srv.URL+"/ui/", nil, nil)
	if resp.StatusCode != 200 || strings.Contains(page, "Log out") {
		t.Fatalf("open console: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := consoleDo(t, c, "POST", srv.URL+"/ui/pins", url.Values{"action": {"approve"}, "server": {"hostile"}, "tool": {"x"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a form without its CSRF token: %d, want 403", resp.StatusCode)
	}
	if resp, _ := consoleDo(t, c, "POST", srv.URL+"/ui/pins", url.Values{"action": {"approve"}, "server": {"hostile"}, "tool": {"x"}, "csrf": {csrfOf(t, page)}}, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("approving a tool with no pending change: %d, want 404", resp.StatusCode)
	}
}

// BenchmarkConsolePages renders each console page of a gateway whose
// upstream offers 1,000 tools (the catalogue pages them 100 at a time),
// with a virtual server selecting all of them: one gateway alone
// (single), and replica r0 of a fleet of three on an in-process NATS
// (fleet3: its fleet page lists three members, read from NATS). A page
// over 100 KB fails it (the console's budget).
func BenchmarkConsolePages(b *testing.B) {
	_, up := hostileUpstream(b, 1000)
	servers := fmt.Sprintf(`{"mcpServers": {"hostile": {"url": %q}},
		"virtual_servers": {"all": {"path": "/mcp/all", "tools": ["*"], "overrides": {"tool0001": {"name": "first", "description": "The first."}}}}}`, up)
	b.Run("single", func(b *testing.B) {
		_, g := startGateway(b, servers, Options{})
		benchConsolePages(b, g)
	})
	b.Run("fleet3", func(b *testing.B) {
		f := startFleet(b, 3, servers)
		waitFor(b, "three members", func() bool { return len(f.gws[0].fleet.Status(context.Background()).Members) == 3 })
		benchConsolePages(b, f.gws[0])
	})
}

func benchConsolePages(b *testing.B, g *Gateway) {
	waitFor(b, "the upstream's tools", func() bool { return len(consoleSource{g}.Tools()) == 1000 })
	h := g.AdminHandler()
	for _, p := range []string{"/ui/", "/ui/catalogue", "/ui/catalogue?q=number+5", "/ui/catalogue/item?kind=tools&server=hostile&name=tool0500",
		"/ui/catalogue?vs=all", "/ui/catalogue?vs=all&page=9", "/ui/catalogue/item?kind=tools&server=hostile&name=first&vs=all",
		"/ui/policies", "/ui/oauth", "/ui/fleet", "/ui/playground", "/ui/tail", "/ui/chart.svg"} {
		b.Run(p, func(b *testing.B) {
			size := 0
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1"+p, nil))
				if rec.Code != 200 {
					b.Fatalf("%s: %d", p, rec.Code)
				}
				size = rec.Body.Len()
			}
			if size > 100<<10 {
				b.Errorf("%s: %d bytes; the budget is 100 KB a page", p, size)
			}
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
}

// TestConsoleCookieSecureUnderTLS: served over TLS, the session cookie is
// Secure.
func TestConsoleCookieSecureUnderTLS(t *testing.T) {
	t.Parallel()
	_, up := hostileUpstream(t, 1)
	_, g := startGateway(t, fmt.Sprintf(`{"mcpServers": {"hostile": {"url": %q}}, "admin": {"tokens": {"ops": %q}}}`, up, adminToken), Options{})
	srv := httptest.NewTLSServer(g.AdminHandler())
	t.Cleanup(srv.Close)
	c := consoleClient(t)
	c.Transport = srv.Client().Transport
	_, page := consoleDo(t, c, "GET", srv.URL+"/ui/login", nil, nil)
	resp, _ := consoleDo(t, c, "POST", srv.URL+"/ui/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {adminToken}}, nil)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || !resp.Cookies()[0].Secure {
		t.Fatalf("login over TLS: %d %+v, want a Secure cookie", resp.StatusCode, resp.Cookies())
	}
}

// TestConsoleSessionSurvivesRestart: the session signing key is kept in
// the state folder, so a gateway started again on it keeps the console's
// users logged in; one with another state folder does not.
func TestConsoleSessionSurvivesRestart(t *testing.T) {
	t.Parallel()
	_, up := hostileUpstream(t, 1)
	cfg := fmt.Sprintf(`{"mcpServers": {"hostile": {"url": %q}}, "admin": {"tokens": {"ops": %q}}}`, up, adminToken)
	state := t.TempDir()
	_, first, _ := adminGateway(t, cfg, state)
	c := consoleClient(t)
	_, page := consoleDo(t, c, "GET", first+"/ui/login", nil, nil)
	if resp, _ := consoleDo(t, c, "POST", first+"/ui/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {adminToken}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	u, _ := url.Parse(first + "/ui/")
	cookie := c.Jar.Cookies(u)[0]
	for _, tc := range []struct {
		name  string
		state string
		want  int
	}{
		{"same state folder", state, http.StatusOK},
		{"another state folder", t.TempDir(), http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, again, _ := adminGateway(t, cfg, tc.state)
			c2 := consoleClient(t)
			u2, _ := url.Parse(again + "/ui/")
			c2.Jar.SetCookies(u2, []*http.Cookie{{Name: cookie.Name, Value: cookie.Value, Path: "/ui/"}})
			if resp, _ := consoleDo(t, c2, "GET", again+"/ui/", nil, nil); resp.StatusCode != tc.want {
				t.Errorf("the old session: %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}
