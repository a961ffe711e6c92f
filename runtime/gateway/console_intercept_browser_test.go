package gateway

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// TestConsoleInterceptorPromoteInBrowser: an interceptor the config runs
// in audit mode would refuse a call, and the call passes; the policies
// page shows its mode, its latency and the audit decision; Promote is
// clicked, and the same call is refused at once, without a reload; the
// change is in the audit log; the admin API's promote of a member
// already enforcing is 409, its demote lets the call pass again.
func TestConsoleInterceptorPromoteInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	ics := serveInterceptors(t, icValidator("acme/no-secret", "tools/call", intercept.Request, "SECRET"))
	mcpURL, adminURL, _ := adminGateway(t, fmt.Sprintf(`{"mcpServers": {"calc": {"url": %q}}, "admin": {"tokens": {"ops": %q}},
	  "audit": {"path": %q},
	  "interceptorServers": {"acme": {"url": %q}},
	  "interceptors": [{"server": "acme", "mode": "audit"}]}`, consoleUpstream(t), adminToken, auditPath, ics), t.TempDir())
	cs := connect(t, mcpURL, nil)
	login(t, ctx, adminURL) // the console records the log from now on
	if got, err := icCall(t, cs, "echo", "a SECRET"); err != nil || got != "echoed" {
		t.Fatalf("in audit mode the call must pass: %q, %v", got, err)
	}
	row := `//section[@aria-labelledby="icpt"]//tr[td[text()="acme/no-secret"]]`
	run(t, ctx, "policies page", chromedp.Navigate(adminURL+"/ui/policies"), chromedp.WaitVisible(chromedp.Search(row+`//button[@value="promote"]`)))
	if mode := value(t, ctx, "mode", chromedp.Evaluate[string](`document.querySelector("td.icept-mode").textContent`)); mode != "audit" {
		t.Errorf("mode shown %q, want audit", mode)
	}
	if p50 := value(t, ctx, "p50", chromedp.Evaluate[string](`document.querySelector("td.icept-p50").textContent`)); p50 == "" || p50 == "0" {
		t.Errorf("p50 shown %q, want the interceptor's latency in µs", p50)
	}
	if d := value(t, ctx, "audit decision", chromedp.Evaluate[string](`(document.querySelector("pre.audit-decision") || {}).textContent || ""`)); !strings.Contains(d, "acme/no-secret") || !strings.Contains(d, "found SECRET") {
		t.Errorf("the last audit decision: %q", d)
	}
	shot(t, ctx, "policies-interceptors")
	submit(t, ctx, "promote", chromedp.Search(row+`//button[@value="promote"]`))
	run(t, ctx, "demote button", chromedp.WaitVisible(chromedp.Search(row+`//button[@value="demote"]`)))
	if mode := bodyText(t, ctx); !strings.Contains(mode, "active (until the next reload)") {
		t.Errorf("after promotion the page says:\n%s", mode)
	}
	if _, err := icCall(t, cs, "echo", "a SECRET"); err == nil || !strings.Contains(err.Error(), `"acme/no-secret" refused`) {
		t.Fatalf("after promotion the call must be refused: %v", err)
	}
	if got, err := icCall(t, cs, "echo", "harmless"); err != nil || got != "echoed" {
		t.Errorf("a call it does not refuse: %q, %v", got, err)
	}

	if code, body := adminDo(t, "POST", adminURL+"/admin/interceptors/acme%2Fno-secret/promote", nil, nil); code != http.StatusConflict {
		t.Errorf("promote again: %d %v, want 409", code, body)
	}
	if code, body := adminDo(t, "POST", adminURL+"/admin/interceptors/nope/promote", nil, nil); code != http.StatusNotFound {
		t.Errorf("promote unknown: %d %v, want 404", code, body)
	}
	if code, body := adminDo(t, "POST", adminURL+"/admin/interceptors/acme%2Fno-secret/demote", nil, nil); code != http.StatusOK || body["was"] != "active" || body["mode"] != "audit" {
		t.Errorf("demote: %d %v", code, body)
	}
	if _, err := icCall(t, cs, "echo", "a SECRET"); err != nil {
		t.Errorf("after demotion the call must pass: %v", err)
	}
	waitFor(t, "the audit records", func() bool {
		b, _ := os.ReadFile(auditPath)
		return strings.Contains(string(b), `"identity":"ops","action":"interceptor.promote","target":"acme/no-secret"`) &&
			strings.Contains(string(b), `"identity":"ops","action":"interceptor.demote","target":"acme/no-secret"`)
	})
}
