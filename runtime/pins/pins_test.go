package pins

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// outside is the fleet of a gateway outside a fleet: it decides nothing.
type outside struct{}

func (outside) ApplyPinDecision(server, tool, fp string) bool { return false }
func (outside) DecidePin(ctx context.Context, server, tool, decision string) (bool, error) {
	return false, nil
}

type tool struct {
	name string
	def  json.RawMessage
}

func def(t *tool) (string, json.RawMessage) { return t.name, t.def }

func tools(descs ...string) []tool {
	var out []tool
	for i, d := range descs {
		name := string(rune('a' + i))
		out = append(out, tool{name, json.RawMessage(`{"name":"` + name + `","description":"` + d + `"}`)})
	}
	return out
}

func names(ts []tool) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.name)
	}
	return strings.Join(out, ",")
}

type gate struct {
	*Gate
	logs    *strings.Builder
	changed *atomic.Int32
	flag    *atomic.Bool
}

func newGate(t *testing.T) gate {
	t.Helper()
	store, err := pinning.Open(filepath.Join(t.TempDir(), "pins.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := gate{logs: &strings.Builder{}, changed: &atomic.Int32{}, flag: &atomic.Bool{}}
	g.Gate = New(store, outside{}, func() bool { return !g.flag.Load() }, func() { g.changed.Add(1) },
		slog.New(slog.NewTextHandler(g.logs, nil)))
	return g
}

// TestFilter: a changed definition is withheld (or flagged), logged once,
// pending until approved; a rejected one stays withheld even when only
// flagged, until the upstream serves yet another definition.
func TestFilter(t *testing.T) {
	g := newGate(t)
	if got := names(Filter(g.Gate, "up", tools("one", "two", "three"), def)); got != "a,b,c" {
		t.Fatalf("first sight kept %q, want every tool", got)
	}
	changed := tools("one", "TWO", "three")
	for range 2 {
		if got := names(Filter(g.Gate, "up", changed, def)); got != "a,c" {
			t.Fatalf("kept %q, want b withheld", got)
		}
	}
	if n := strings.Count(g.logs.String(), "tool definition changed since it was pinned; withheld"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, g.logs)
	}
	if p := g.Pending(); len(p) != 1 || p[0].Tool != "b" || !p[0].Withheld {
		t.Fatalf("pending %+v, want b withheld", p)
	}
	g.flag.Store(true)
	if got := names(Filter(g.Gate, "up", changed, def)); got != "a,b,c" {
		t.Fatalf("flag mode kept %q, want b flagged, kept", got)
	}
	if err := g.Reject(context.Background(), "up", "b"); err != nil {
		t.Fatal(err)
	}
	if got := names(Filter(g.Gate, "up", changed, def)); got != "a,c" || g.changed.Load() != 1 || len(g.Pending()) != 0 {
		t.Fatalf("after rejection kept %q, %d changes told, pending %v; want b withheld, told once, nothing pending", got, g.changed.Load(), g.Pending())
	}
	again := tools("one", "TWO again", "three")
	if got := names(Filter(g.Gate, "up", again, def)); got != "a,b,c" || len(g.Pending()) != 1 {
		t.Fatalf("another definition: kept %q, pending %v; want it flagged and pending", got, g.Pending())
	}
	g.flag.Store(false)
	if err := g.Approve(context.Background(), "up", "b"); err != nil {
		t.Fatal(err)
	}
	if got := names(Filter(g.Gate, "up", again, def)); got != "a,b,c" || len(g.Pending()) != 0 || g.changed.Load() != 2 {
		t.Fatalf("after approval kept %q, pending %v", got, g.Pending())
	}
}

// TestDecisions: what the admin API and the fleet are answered.
func TestDecisions(t *testing.T) {
	off := New(nil, outside{}, func() bool { return true }, func() {}, slog.New(slog.DiscardHandler))
	ts := tools("one")
	if got := Filter(off, "up", ts, def); len(got) != 1 {
		t.Fatal("pinning off withheld a tool")
	}
	var ae *admin.Error
	if err := off.Approve(context.Background(), "up", "a"); !errors.As(err, &ae) || ae.Code != "pinning_off" {
		t.Fatalf("Approve with pinning off: %v", err)
	}
	g := newGate(t)
	for _, err := range []error{g.Approve(context.Background(), "up", "a"), g.Reject(context.Background(), "up", "a")} {
		if !errors.As(err, &ae) || ae.Code != "not_pending" {
			t.Fatalf("a decision about nothing pending: %v", err)
		}
	}
	Filter(g.Gate, "up", tools("one"), def)
	Filter(g.Gate, "up", tools("ONE"), def)
	p := g.FleetPending()
	if len(p) != 1 || !g.FleetReject("up", "a", p[0].NewFingerprint) || g.FleetReject("up", "a", p[0].NewFingerprint) {
		t.Fatal("another replica's rejection: applied once")
	}
	if !g.Rejected("up", "a", p[0].NewFingerprint) || !g.FleetApprove("up", "a") || g.Rejected("up", "a", p[0].NewFingerprint) {
		t.Fatal("another replica's approval does not clear the rejection")
	}
}
