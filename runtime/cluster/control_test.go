package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
)

func openNode(t *testing.T, url, replica string) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := Open(ctx, testConfig(url), replica, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	waitFor(t, "connected", n.Connected)
	return n
}

func TestControlCompareAndSet(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	c := NewControl(openNode(t, s.ClientURL(), "a"))
	ctx := context.Background()
	if e, err := c.Get(ctx, "policy"); err != nil || e.Revision != 0 || e.Value != nil {
		t.Fatalf("missing record: %+v %v", e, err)
	}
	r1, err := c.Put(ctx, "policy", []byte("1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		prev uint64
	}{{"create over an existing record", 0}, {"update from a stale revision", r1 + 5}} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Put(ctx, "policy", []byte("x"), tc.prev); !errors.Is(err, ErrConflict) {
				t.Errorf("err = %v, want ErrConflict", err)
			}
		})
	}
	r2, err := c.Put(ctx, "policy", []byte("2"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("update: %d %v", r2, err)
	}
	if e, _ := c.Get(ctx, "policy"); e.Revision != r2 || string(e.Value) != "2" {
		t.Errorf("after update: %+v", e)
	}
	s.Shutdown()
	waitFor(t, "disconnected", func() bool { return !c.n.Connected() })
	if _, err := c.Put(ctx, "policy", []byte("3"), r2); !errors.Is(err, ErrUnavailable) {
		t.Errorf("write while NATS is down: %v, want ErrUnavailable", err)
	}
}

func TestControlBlobsAreCheckedOnRead(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	c := NewControl(openNode(t, s.ClientURL(), "a"))
	ctx := context.Background()
	mod := []byte("\x00asm module bytes")
	d, err := c.PutBlob(ctx, mod)
	if err != nil || d != Digest(mod) {
		t.Fatalf("PutBlob = %q %v", d, err)
	}
	if again, err := c.PutBlob(ctx, mod); err != nil || again != d {
		t.Fatalf("PutBlob again = %q %v", again, err)
	}
	if b, err := c.Blob(ctx, d, 1<<20); err != nil || string(b) != string(mod) {
		t.Fatalf("Blob = %q %v", b, err)
	}
	_, obj, _ := c.buckets(ctx)
	forged := "sha256:" + strings.Repeat("ab", 32)
	if _, err := obj.PutBytes(ctx, strings.Repeat("ab", 32), []byte("other bytes")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, digest string
		limit        int64
		want         error
	}{
		{"bytes not matching the name", forged, 1 << 20, ErrBadBlob},
		{"missing", "sha256:" + strings.Repeat("cd", 32), 1 << 20, ErrBadBlob},
		{"over the limit", d, 4, ErrBadBlob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Blob(ctx, tc.digest, tc.limit); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := c.Blob(ctx, "sha256:../../etc", 0); err == nil {
		t.Error("a malformed digest was looked up")
	}
}

// TestControlWatchResumes: a watcher delivers the current value, then
// changes, and after NATS restarts it delivers the changes made since.
func TestControlWatchResumes(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	n := openNode(t, s.ClientURL(), "a")
	c := NewControl(n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.Put(ctx, "policy", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	var wg sync.WaitGroup
	wg.Go(func() {
		c.Watch(ctx, "policy", func(e Entry) { mu.Lock(); seen = append(seen, string(e.Value)); mu.Unlock() }, nil)
	})
	has := func(v string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(strings.Join(seen, ","), v) }
	}
	waitFor(t, "the current value", has("v1"))
	e, _ := c.Get(ctx, "policy")
	if _, err := c.Put(ctx, "policy", []byte("v2"), e.Revision); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the update", has("v2"))
	s.Shutdown()
	waitFor(t, "disconnected", func() bool { return !n.Connected() })
	s.Restart(t)
	waitFor(t, "reconnected", n.Connected)
	other := NewControl(openNode(t, s.ClientURL(), "b"))
	e, _ = other.Get(ctx, "policy")
	if _, err := other.Put(ctx, "policy", []byte("v3"), e.Revision); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the change made after NATS came back", has("v3"))
	cancel()
	wg.Wait()
}

func TestMembersListSkipsBadRecords(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	ctx := context.Background()
	na, nb := openNode(t, s.ClientURL(), "b-replica"), openNode(t, s.ClientURL(), "a-replica")
	ma, mb := NewMembers(na), NewMembers(nb)
	now := time.Now().UTC()
	for _, m := range []struct {
		ms *Members
		r  string
	}{{ma, "b-replica"}, {mb, "a-replica"}} {
		if err := m.ms.Publish(ctx, Member{Replica: m.r, LastSeen: now, NATS: "connected", Generation: 4}); err != nil {
			t.Fatal(err)
		}
	}
	kv, _ := ma.bucket(ctx)
	kv.Put(ctx, Token("garbage"), []byte("{not json"))
	wrong, _ := json.Marshal(Member{Replica: "impostor", LastSeen: now})
	kv.Put(ctx, Token("someone-else"), wrong)
	list, err := ma.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Replica != "a-replica" || list[1].Replica != "b-replica" || list[0].Generation != 4 {
		t.Fatalf("members = %+v", list)
	}
	mb.Leave(ctx)
	if list, _ := ma.List(ctx); len(list) != 1 || list[0].Replica != "b-replica" {
		t.Fatalf("after a left: %+v", list)
	}
}

// TestControlSurvivesClusterMemberLoss: on a 3-server JetStream cluster
// the control buckets keep a copy on each server, so the record and the
// module bytes are read and written after one server dies.
func TestControlSurvivesClusterMemberLoss(t *testing.T) {
	t.Parallel()
	cl := natstest.StartCluster(t, 3)
	n := openNode(t, cl.URL(), "a")
	c := NewControl(n)
	ctx := context.Background()
	waitFor(t, "the cluster's servers known", func() bool { return n.replicas() == 3 })
	r1, err := c.Put(ctx, "policy", []byte("1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.PutBlob(ctx, []byte("module"))
	if err != nil {
		t.Fatal(err)
	}
	cl.Servers[0].Shutdown()
	waitFor(t, "a write after a server died", func() bool {
		_, err := c.Put(ctx, "policy", []byte("2"), r1)
		return err == nil
	})
	// Reads retry, as a replica's do, while the streams elect new leaders.
	waitFor(t, "the module after a server died", func() bool {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		b, err := c.Blob(rctx, d, 0)
		return err == nil && string(b) == "module"
	})
}
