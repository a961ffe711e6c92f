package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// TestSoakShort runs a shortened soak against the edge-mcp binary: three
// cycles of the upstream SIGKILLed and started again 2 s later (the
// gateway's reconnect_wait, so the calls of an outage's first moments
// fail and the outage shows), 1.3 s apart, four clients calling ten
// times a second, two uploads of an unattached module and three config
// reloads during the load. At least 88% of the calls are served, every
// call is answered, no answer bypasses the redaction policy, no outage
// the clients see lasts much longer than the upstream was down, and RSS
// comes back to within 24 MiB of where it was before. The full scenario
// (go tool task soak) runs the same code for 150 s.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20 s scenario")
	}
	wasm := filepath.Join(t.TempDir(), "redact-secrets.wasm")
	if err := os.WriteFile(wasm, wasmtest.Example(t, "redact-secrets"), 0o600); err != nil {
		t.Fatal(err)
	}
	sc := scenario{
		Duration: 12 * time.Second, EdgeMCP: testenv.EdgeMCPBinary(t), EchoServer: testenv.EchoServer(t), Wasm: wasm,
		Clients: 4, Rate: 10, KillEvery: 3300 * time.Millisecond, Down: 2 * time.Second,
		UploadEvery: 4 * time.Second, ReloadEvery: 3500 * time.Millisecond, Warm: time.Second, Settle: 4 * time.Second,
	}
	var log strings.Builder
	rep, err := sc.run(t.Context(), &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var out strings.Builder
	rep.print(&out)
	t.Logf("\n%s%s", log.String(), out.String())
	if rep.ServedShare() < 0.88 {
		t.Errorf("%.1f%% of the calls served; want at least 88%%", 100*rep.ServedShare())
	}
	if rep.Unanswered != 0 || rep.Unredacted != 0 {
		t.Errorf("%d calls unanswered, %d unredacted; want none", rep.Unanswered, rep.Unredacted)
	}
	if len(rep.UpstreamDown) < 3 {
		t.Errorf("the upstream went down %d times; want 3", len(rep.UpstreamDown))
	}
	for _, o := range rep.Outages {
		if o > sc.Down+2*time.Second {
			t.Errorf("an outage of %s seen by the clients, for an upstream down %s", o.Round(time.Millisecond), sc.Down)
		}
	}
	if rep.RSSAfter > rep.RSSBefore+24 {
		t.Errorf("RSS %.1f MiB after the scenario, %.1f before; want at most 24 MiB more", rep.RSSAfter, rep.RSSBefore)
	}
}
