package gateway

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// TestFleetSessionRecordsConcurrentWrites has two replicas change the
// records of the same sessions at the same moment, one revoking (a DELETE)
// and the other setting a log level and taking the per-client sessions
// over: every record must keep both changes. With a read-then-write (no
// compare and set) one replica's write overwrote the other's, and a
// revoked session could come back.
func TestFleetSessionRecordsConcurrentWrites(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 2, serversJSON(`"up": {"url": "http://127.0.0.1:1/mcp"}`))
	a, b := f.gws[0].fleet.Sessions(), f.gws[1].fleet.Sessions()
	const sessions = 40
	for i := range sessions {
		id := fmt.Sprintf("session-%d", i)
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; a.Put(fleet.SessionRecord{ID: id, Revoked: true}) }()
		go func() { defer wg.Done(); <-start; b.Put(fleet.SessionRecord{ID: id, Level: "debug", Owner: "r1"}) }()
		close(start)
		wg.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range sessions {
		id := fmt.Sprintf("session-%d", i)
		got := a.Record(ctx, id)
		if !got.Revoked || got.Level != "debug" || got.Owner != "r1" {
			t.Errorf("record of %s = %+v, want revoked, level debug, owner r1", id, got)
		}
	}
}
