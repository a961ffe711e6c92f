package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// TestConsoleFleetInBrowser: three replicas on an in-process NATS; the
// fleet page of replica a lists each with its NATS state, generation,
// policy digest and last heartbeat. Replica b stopped cleanly is gone
// from the page at once; replica c cut off from NATS (a replica that
// died: no goodbye) is marked stale, then dropped within the member
// expiry.
func TestConsoleFleetInBrowser(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	reps := startControlFleet(t, ns.ClientURL(), vaultServer(t, "vault", make(chan string, 8)), 3)
	ctx := browser(t) // after the fleet: its 60 s are the page's
	a, b, c := reps[0], reps[1], reps[2]
	login(t, ctx, a.admin)
	// row reads member id's cells on a reloaded page ("" when absent).
	row := func(id string) string {
		t.Helper()
		run(t, ctx, "fleet page", chromedp.Navigate(a.admin+"/ui/fleet"), chromedp.WaitVisible(chromedp.CSS("dl.facts")))
		return value(t, ctx, "row "+id, chromedp.Evaluate[string](`(document.getElementById("member-`+id+`") || {innerText: ""}).innerText`))
	}
	waitFor(t, "three members on a's fleet page", func() bool { return row("a") != "" && row("b") != "" && row("c") != "" })
	st := a.g.fleet.Status(t.Context())
	for _, id := range []string{"a", "b", "c"} {
		r := row(id)
		for _, want := range []string{"connected", st.PolicyDigest[:19], " ago"} {
			if !strings.Contains(r, want) {
				t.Errorf("member %s's row lacks %q: %q", id, want, r)
			}
		}
		if strings.Contains(r, "stale") {
			t.Errorf("member %s is stale while beating: %q", id, r)
		}
	}
	facts := value(t, ctx, "facts", chromedp.Evaluate[string](`document.querySelector("dl.facts").innerText`))
	for _, want := range []string{"This replica\na", "NATS\nconnected", "Policy digest\n" + st.PolicyDigest} {
		if !strings.Contains(facts, want) {
			t.Errorf("the page's facts lack %q:\n%s", want, facts)
		}
	}
	shot(t, ctx, "fleet")

	b.stop()
	waitFor(t, "b gone from a's page after a clean stop", func() bool { return row("b") == "" })

	cutAt := time.Now()
	c.g.fleet.Node().Conn().Close() // c dies to the fleet: no heartbeat, no goodbye
	waitForWithin(t, cluster.MemberTTL, "c marked stale", func() bool { time.Sleep(100 * time.Millisecond); return strings.Contains(row("c"), "stale") })
	if d := time.Since(cutAt); d > cluster.MemberTTL {
		t.Errorf("c marked stale %v after its last heartbeat; its record expires after %v", d, cluster.MemberTTL)
	}
	shot(t, ctx, "fleet-stale")
	waitForWithin(t, cluster.MemberTTL+10*time.Second, "c dropped from a's page", func() bool { time.Sleep(100 * time.Millisecond); return row("c") == "" })
	if d := time.Since(cutAt); d > cluster.MemberTTL+5*time.Second {
		t.Errorf("c dropped %v after its last heartbeat; the member expiry is %v", d, cluster.MemberTTL)
	}
	if r := row("a"); !strings.Contains(r, "connected") || strings.Contains(r, "stale") {
		t.Errorf("a's own row: %q", r)
	}
}
