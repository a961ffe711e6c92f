package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestClusterKeepsKVWhenOneMemberDies: a replicated KV bucket on a
// 3-member cluster still takes writes and serves reads after one member
// is shut down; the helper the fleet's fault tests rely on.
func TestClusterKeepsKVWhenOneMemberDies(t *testing.T) {
	c := StartCluster(t, 3)
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	c.Servers[0].Shutdown()
	var last error
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		// One attempt at a time: a put sent while the client reconnects
		// or the stream elects a new leader may never be acknowledged.
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		_, last = kv.Put(actx, "k", []byte("2"))
		acancel()
		if last == nil {
			break
		}
	}
	if last != nil {
		t.Fatalf("put after losing a member: %v", last)
	}
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "2" {
		t.Fatalf("get: %v %v", e, err)
	}
}
