package fleet

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// racedStore is the fleet's control store on a real NATS with one
// interleaving put in: while poll reads the record, this replica writes
// and applies it (an admin upload's Put, then appliedLocked), as a loaded
// CI run had it.
type racedStore struct {
	*cluster.Control
	during func()
}

func (s racedStore) Get(ctx context.Context, key string) (cluster.Entry, error) {
	e, err := s.Control.Get(ctx, key)
	if s.during != nil {
		s.during()
	}
	return e, err
}

// TestPollDuringOwnWrite: a record this replica writes while poll's read
// is under way is newer than what the read saw; poll must not take the
// empty read for a record that vanished (it would forget the revision and
// seed the record again, and the admin change that wrote it would then
// fail its compare-and-set with "another replica changed the fleet's
// policies meanwhile").
func TestPollDuringOwnWrite(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := cluster.Open(ctx, &config.Cluster{NatsURL: ns.ClientURL(), Name: "t",
		Secrets: []string{"0123456789abcdef0123456789abcdef"}, AllowAnonymousNATS: true}, "a", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close(context.Background())
	real := cluster.NewControl(node)
	fc := &Control{log: slog.New(slog.DiscardHandler), node: node}
	fc.ctl = racedStore{Control: real, during: func() {
		rev, err := real.Put(ctx, fleetPolicyKey, []byte(`{}`), 0)
		if err != nil {
			t.Errorf("writing the record: %v", err)
			return
		}
		fc.rev.Store(rev)
	}}
	if gone := fc.poll(ctx); gone {
		t.Fatal("poll reported the record gone while this replica wrote it")
	}
	if got := fc.rev.Load(); got == 0 {
		t.Fatal("poll forgot the revision this replica applied during its read")
	}
	// That a record which did vanish is still reported (and seeded again):
	// runtime/gateway's TestFleetControlRecordWiped.

}
