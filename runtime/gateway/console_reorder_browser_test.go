package gateway

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsolePolicyReorderInBrowser: three enforcing attachments each
// rewrite the argument text of record (v1, v2, v3), so the upstream
// receives the last one's: moving one down, moving one to a position,
// and detaching one change the order on the page, in GET /admin/policies
// and in effect; a position out of range is refused and changes nothing;
// every change is in the audit log.
func TestConsolePolicyReorderInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	received := make(chan string, 64)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	mcpURL, adminURL, _ := adminGateway(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q}}, "admin": {"tokens": {"ops": %q}}, "audit": {"path": %q}}`,
		vaultServer(t, "vault", received), adminToken, auditPath), t.TempDir())
	cs := connect(t, mcpURL, nil)
	waitFor(t, "the tools", func() bool { return slices.Contains(toolNames(t, cs), "record") })
	for n, name := range []string{"one", "two", "three"} {
		if code, body := adminDo(t, "PUT", adminURL+"/admin/modules/"+name, versionedModule(n+1), nil); code != http.StatusCreated {
			t.Fatalf("uploading %s: %d %v", name, code, body)
		}
	}
	login(t, ctx, adminURL)
	run(t, ctx, "policies", chromedp.Navigate(adminURL+"/ui/policies"), chromedp.WaitVisible(chromedp.ID("att-name")))
	for _, name := range []string{"one", "two", "three"} {
		run(t, ctx, "attach "+name, chromedp.SetValue(chromedp.ID("att-name"), name), chromedp.SetValue(chromedp.ID("att-module"), name),
			chromedp.SetValue(chromedp.ID("att-tools"), "record"), chromedp.SetValue(chromedp.ID("att-mode"), "enforce"),
			chromedp.Click(chromedp.Search(`//button[text()="Attach"]`)),
			chromedp.WaitVisible(chromedp.Search(`//section[@aria-labelledby="chain"]//td[text()="`+name+`"]`)))
	}
	// check reads the order on the page and from the admin API, and what
	// the upstream receives: the last attachment's rewrite.
	check := func(what string, order []string, wantText string) {
		t.Helper()
		page := value(t, ctx, what+": the page's order", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('section[aria-labelledby="chain"] tbody tr td:nth-child(2)')].map(td => td.textContent)`))
		if !slices.Equal(page, order) {
			t.Errorf("%s: the page lists %v, want %v", what, page, order)
		}
		_, body := adminDo(t, "GET", adminURL+"/admin/policies", nil, nil)
		var api []string
		for _, p := range body["policies"].([]any) {
			api = append(api, p.(map[string]any)["name"].(string))
		}
		if !slices.Equal(api, order) {
			t.Errorf("%s: GET /admin/policies lists %v, want %v", what, api, order)
		}
		callText(t, cs, "record", map[string]any{"text": "original"})
		select {
		case got := <-received:
			if got != wantText {
				t.Errorf("%s: the upstream received %q, want %q (the chain's last rewrite)", what, got, wantText)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the upstream received nothing", what)
		}
	}
	check("attached", []string{"one", "two", "three"}, "v3")

	submit(t, ctx, "move two down", chromedp.CSS(`button[aria-label="Move two down"]`))
	check("two moved down", []string{"one", "three", "two"}, "v2")
	if n := value(t, ctx, "down buttons", chromedp.Evaluate[int](`document.querySelectorAll('button[aria-label="Move two down"]').length`)); n != 0 {
		t.Errorf("the last attachment offers Move down")
	}

	run(t, ctx, "position of one", chromedp.SetValue(chromedp.ID("pos-0"), "3"))
	submit(t, ctx, "move one to 3", chromedp.CSS(`button[aria-label="Move one to the position given"]`))
	check("one moved to 3", []string{"three", "two", "one"}, "v1")

	run(t, ctx, "position out of range", chromedp.SetValue(chromedp.ID("pos-2"), "9"))
	submit(t, ctx, "move one to 9", chromedp.CSS(`button[aria-label="Move one to the position given"]`))
	if body := bodyText(t, ctx); !strings.Contains(body, `position "9": a number from 1 to 3`) {
		t.Errorf("a position out of range: %s", body)
	}
	run(t, ctx, "back to the policies", chromedp.Navigate(adminURL+"/ui/policies"), chromedp.WaitVisible(chromedp.ID("att-name")))
	check("after the refused move", []string{"three", "two", "one"}, "v1")

	run(t, ctx, "position of one", chromedp.SetValue(chromedp.ID("pos-2"), "1"))
	submit(t, ctx, "move one to 1", chromedp.CSS(`button[aria-label="Move one to the position given"]`))
	check("one moved to the top", []string{"one", "three", "two"}, "v2")

	submit(t, ctx, "detach two", chromedp.Search(`//button[text()="Detach two"]`))
	check("two detached", []string{"one", "three"}, "v3")
	shot(t, ctx, "policies-reorder")

	waitFor(t, "the audit records", func() bool {
		b, _ := os.ReadFile(auditPath)
		s := string(b)
		return strings.Contains(s, `"identity":"ops","action":"policy.down","target":"two","detail":"from the console"`) &&
			strings.Contains(s, `"identity":"ops","action":"policy.move","target":"one","detail":"from the console"`) &&
			strings.Contains(s, `"identity":"ops","action":"policy.move.rejected","target":"one"`) &&
			strings.Contains(s, `"identity":"ops","action":"policy.detach","target":"two","detail":"from the console"`)
	})
}
