package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleVirtualCatalogueInBrowser: with two virtual servers over
// real upstreams, the overview links to each; the catalogue switched to
// one lists exactly what its sessions list (its names, the catalogue's
// name beside a renamed tool, the overridden description and schema),
// searchable and paginated within the view; a tool it does not select
// is not there, and the renamed tool is under its new name only in its
// own server's view.
func TestConsoleVirtualCatalogueInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	_, many := hostileUpstream(t, 150)
	mcpURL, adminURL, g := adminGateway(t, fmt.Sprintf(`{"mcpServers": {"calc": {"url": %q}, "vault": {"url": %q, "prefix": "vault"}, "many": {"url": %q}},
		"admin": {"tokens": {"ops": %q}},
		"virtual_servers": {
			"triage": {"path": "/mcp/triage", "tools": ["add", "vault_*", "tool*"],
				"overrides": {"add": {"name": "sum", "description": "Sums <i>two</i> numbers.", "arguments": {"b": {"hidden": true}}}}},
			"mini": {"path": "/mcp/mini", "title": "Mini", "tools": ["echo"], "prompts": ["greet"]}}}`,
		consoleUpstream(t), vaultServer(t, "vault", make(chan string, 8)), many, adminToken), t.TempDir())
	waitFor(t, "the upstreams' tools", func() bool {
		var names []string
		for _, o := range (consoleSource{g}).Tools() {
			names = append(names, o.Name)
		}
		return slices.Contains(names, "add") && slices.Contains(names, "vault_record") && slices.Contains(names, "tool0149")
	})

	// The console's view of each virtual server is what its sessions list.
	for _, vs := range []string{"triage", "mini"} {
		listed := toolNames(t, connect(t, mcpURL+"/"+vs, nil))
		offers, ok := consoleSource{g}.VirtualOffers(vs, "tools")
		var shown []string
		for _, o := range offers {
			shown = append(shown, o.Name)
		}
		if !ok || !slices.Equal(shown, listed) {
			t.Errorf("%s: the console shows %v, its sessions list %v", vs, shown, listed)
		}
	}

	login(t, ctx, adminURL)
	run(t, ctx, "triage from the overview", chromedp.Click(chromedp.Search(`//section[@aria-labelledby="virt"]//a[text()="triage"]`)),
		chromedp.WaitVisible(chromedp.ID("views")))
	body := bodyText(t, ctx)
	for _, want := range []string{"Tools of the virtual server triage", "sum", "Sums <i>two</i> numbers.", "vault_record", "tool0000", "page 1 of 2"} {
		if !strings.Contains(body, want) {
			t.Errorf("triage's catalogue lacks %q:\n%s", want, body)
		}
	}
	if got := value(t, ctx, "catalogue name of sum", chromedp.Evaluate[string](
		`document.evaluate('//tr[td/a/code[text()="sum"]]/td[@class="catalogue-name"]', document, null, XPathResult.STRING_TYPE, null).stringValue`)); got != "add (overridden)" {
		t.Errorf("sum's catalogue name: %q", got)
	}
	names := func() []string {
		return value(t, ctx, "names", chromedp.Evaluate[[]string](`[...document.querySelectorAll("tbody td:nth-child(2) code")].map(c => c.textContent)`))
	}
	if n := names(); slices.Contains(n, "add") || slices.Contains(n, "echo") || slices.Contains(n, "greet") {
		t.Errorf("triage shows a tool it does not select, or add under its catalogue name: %v", n)
	}
	shot(t, ctx, "catalogue-virtual")

	run(t, ctx, "next page of triage", chromedp.Click(chromedp.CSS(`a[rel="next"]`)), chromedp.WaitVisible(chromedp.CSS(`a[rel="prev"]`)))
	if n := names(); len(n) == 0 || slices.ContainsFunc(n, func(s string) bool { return !strings.HasPrefix(s, "tool") }) || !strings.Contains(bodyText(t, ctx), "page 2 of 2") {
		t.Errorf("triage's second page: %v", n)
	}
	run(t, ctx, "search triage", chromedp.SetValue(chromedp.ID("q"), "record"), chromedp.Click(chromedp.Search(`//button[text()="Search"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "matching")]`)))
	if n := names(); !slices.Equal(n, []string{"vault_record"}) {
		t.Errorf("triage searched for record: %v", n)
	}

	run(t, ctx, "sum's definition", chromedp.Navigate(adminURL+"/ui/catalogue?vs=triage"), chromedp.Click(chromedp.Search(`//a[code[text()="sum"]]`)),
		chromedp.WaitVisible(chromedp.ID("definition")))
	def := value(t, ctx, "definition", chromedp.Evaluate[string](`document.getElementById("definition").textContent`))
	var d struct {
		Name, Description string
		InputSchema       struct {
			Properties map[string]any `json:"properties"`
		} `json:"inputSchema"`
	}
	if err := json.Unmarshal([]byte(def), &d); err != nil || d.Name != "sum" || d.Description != "Sums <i>two</i> numbers." ||
		d.InputSchema.Properties["a"] == nil || d.InputSchema.Properties["b"] != nil {
		t.Errorf("sum's definition in triage (%v), want renamed, described, b hidden:\n%s", err, def)
	}

	run(t, ctx, "switch to mini", chromedp.Navigate(adminURL+"/ui/catalogue"), chromedp.Click(chromedp.Search(`//nav[@id="views"]/a[text()="mini "]`)),
		chromedp.WaitVisible(chromedp.Search(`//h2[contains(., "virtual server mini")]`)))
	if n := names(); !slices.Equal(n, []string{"echo"}) {
		t.Errorf("mini's tools: %v, want echo alone", n)
	}
	run(t, ctx, "mini's prompts", chromedp.Click(chromedp.Search(`//nav[@aria-label="Kinds"]/a[text()="Prompts"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h2[contains(., "Prompts of the virtual server mini")]`)))
	if n := names(); !slices.Equal(n, []string{"greet"}) {
		t.Errorf("mini's prompts: %v", n)
	}
	run(t, ctx, "every upstream", chromedp.Click(chromedp.Search(`//nav[@id="views"]/a[text()="Every upstream"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h2[text()="Prompts"]`)), chromedp.Navigate(adminURL+"/ui/catalogue?q=a"), chromedp.WaitVisible(chromedp.CSS("tbody")))
	if n := names(); !slices.Contains(n, "add") || slices.Contains(n, "sum") {
		t.Errorf("the whole catalogue: %v, want add and no sum", n)
	}
	run(t, ctx, "no such server", chromedp.Navigate(adminURL+"/ui/catalogue?vs=nope"), chromedp.WaitVisible(chromedp.CSS("main")))
	if body := bodyText(t, ctx); !strings.Contains(body, `there is no virtual server "nope"`) {
		t.Errorf("an unknown virtual server: %s", body)
	}
}
