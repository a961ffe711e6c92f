package cluster

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

const (
	oldSecret   = "old-fleet-secret-0123456789abcdef"
	newSecret   = "new-fleet-secret-0123456789abcdef"
	otherSecret = "someone-elses-secret-0123456789ab"
)

func mustKeys(t *testing.T, secrets ...string) *Keys {
	t.Helper()
	k, err := NewKeys("edge", secrets)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSealRotation: during a rotation ([new, old] on some replicas, [old]
// on others) what either seals opens on the other; a secret outside the
// list does not open, nor does a message moved to another subject, a
// record moved to another key, or another fleet's.
func TestSealRotation(t *testing.T) {
	t.Parallel()
	old, rotating, other := mustKeys(t, oldSecret), mustKeys(t, newSecret, oldSecret), mustKeys(t, otherSecret)
	otherFleet, _ := NewKeys("other", []string{oldSecret})
	for _, tc := range []struct {
		name       string
		seal, open *Keys
		ok         bool
	}{
		{"old seals, rotating opens", old, rotating, true},
		{"rotating seals (new), old-only does not open", rotating, old, false},
		{"rotating seals, rotating opens", rotating, mustKeys(t, newSecret, oldSecret), true},
		{"unknown secret", other, rotating, false},
		{"another fleet", otherFleet, old, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.seal.SealMessage("edge.cancel", []byte("m"))
			_, err := tc.open.OpenMessage("edge.cancel", msg)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrForged)) {
				t.Errorf("message: %v, want ok=%v", err, tc.ok)
			}
			rec := tc.seal.SealRecord("edge_control", "policy", time.Now(), []byte("r"))
			body, _, err := tc.open.OpenRecord("edge_control", "policy", rec)
			if (err == nil) != tc.ok || (err == nil && string(body) != "r") {
				t.Errorf("record: %q %v, want ok=%v", body, err, tc.ok)
			}
		})
	}
	k := mustKeys(t, oldSecret)
	if _, err := k.OpenMessage("edge.getopen", k.SealMessage("edge.cancel", []byte("m"))); !errors.Is(err, ErrForged) {
		t.Errorf("a message moved to another subject: %v", err)
	}
	if _, _, err := k.OpenRecord("edge_control", "pins", k.SealRecord("edge_control", "policy", time.Now(), nil)); !errors.Is(err, ErrForged) {
		t.Errorf("a record moved to another key: %v", err)
	}
	if rotating.Route("s") == old.Route("s") || rotating.Routes("s")[1] != old.Route("s") {
		t.Error("a rotating replica does not listen on the old secret's route")
	}
}

// TestSealReplay: a message opened once, or older than MaxMessageAge, is
// refused; a record older than one read before is refused, the same one
// again is not.
func TestSealReplay(t *testing.T) {
	t.Parallel()
	k := mustKeys(t, oldSecret)
	m := k.SealMessage("edge.cancel", []byte("m"))
	if _, err := k.OpenMessage("edge.cancel", m); err != nil {
		t.Fatal(err)
	}
	if _, err := k.OpenMessage("edge.cancel", m); !errors.Is(err, ErrReplayed) {
		t.Errorf("the same message again: %v", err)
	}
	stale := k.seal(kindMessage, time.Now().Add(-2*MaxMessageAge), []byte("m"), "edge.cancel")
	if _, err := k.OpenMessage("edge.cancel", stale); !errors.Is(err, ErrReplayed) {
		t.Errorf("an old message: %v", err)
	}
	var marks Watermarks
	t0 := time.Now()
	if err := marks.Accept("policy", t0); err != nil {
		t.Fatal(err)
	}
	if err := marks.Accept("policy", t0); err != nil {
		t.Errorf("the same record again: %v", err)
	}
	if err := marks.Accept("policy", t0.Add(-time.Millisecond)); !errors.Is(err, ErrReplayed) {
		t.Errorf("an older record: %v", err)
	}
	if next := k.Next(t0.Add(time.Hour)); !next.After(t0.Add(time.Hour)) {
		t.Errorf("Next after a record from a clock ahead: %v", next)
	}
}

// TestControlRotationAcrossNodes: on a real NATS, a control record written
// by a replica still sealing with the old secret is read by one that
// rotated; one written by a replica with an unknown secret is refused
// (counted, logged once).
func TestControlRotationAcrossNodes(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(name string, secrets ...string) (*Node, *Control, *strings.Builder) {
		cfg := testConfig(s.ClientURL())
		cfg.Secrets = secrets
		var logs strings.Builder
		n, err := Open(ctx, cfg, name, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(ctx) })
		waitFor(t, name+" connected", n.Connected)
		return n, NewControl(n), &logs
	}
	_, oldC, _ := open("old", oldSecret)
	rotN, rotC, rotLogs := open("rotating", newSecret, oldSecret)
	_, otherC, _ := open("other", otherSecret)

	rev, err := oldC.Put(ctx, "policy", []byte("from old"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := rotC.Get(ctx, "policy"); err != nil || string(e.Value) != "from old" || e.Refused != nil {
		t.Fatalf("rotating replica reading the old secret's record: %+v %v", e, err)
	}
	if _, err := otherC.Put(ctx, "policy", []byte("forged"), rev); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e, err := rotC.Get(ctx, "policy")
		if err != nil || e.Value != nil || !errors.Is(e.Refused, ErrForged) {
			t.Fatalf("record of an unknown secret: %+v %v", e, err)
		}
	}
	if got := strings.Count(rotLogs.String(), "refused a control record"); got != 1 || rotN.Refused() != 1 {
		t.Errorf("refusal logged %d times, counted %d; want once", got, rotN.Refused())
	}
}

// TestOpenRefusesAnonymousNATS: a replica does not start against a NATS
// that lets anyone in, unless cluster.allow_anonymous_nats says so; with
// a NATS that wants credentials it starts with them.
func TestOpenRefusesAnonymousNATS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	anon := natstest.Start(t)
	cfg := testConfig(anon.ClientURL())
	cfg.AllowAnonymousNATS = false
	if _, err := Open(ctx, cfg, "r1", log); err == nil || !strings.Contains(err.Error(), "cluster.allow_anonymous_nats") {
		t.Fatalf("anonymous NATS without allow_anonymous_nats: %v", err)
	}
	cfg.AllowAnonymousNATS = true
	n, err := Open(ctx, cfg, "r1", log)
	if err != nil {
		t.Fatalf("anonymous NATS with allow_anonymous_nats: %v", err)
	}
	n.Close(ctx)

	auth := natstest.StartAuth(t, "t")
	if _, err := nats.Connect(auth.ClientURL(), nats.NoReconnect()); err == nil {
		t.Fatal("the authenticated test server let a bare client in")
	}
	cfg = &config.Cluster{NatsURL: auth.ClientURL(), Name: "t", Secrets: []string{oldSecret}, NatsNkey: auth.SeedFile}
	n, err = Open(ctx, cfg, "r1", log)
	if err != nil {
		t.Fatalf("NATS with nkeys: %v", err)
	}
	defer n.Close(ctx)
	waitFor(t, "connected with the nkey", n.Connected)
	kv, err := n.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.Bucket("control")})
	if err != nil {
		t.Fatalf("JetStream with the fleet's permissions: %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

// FuzzOpenSealed: any bytes read from NATS open to an error or, for what
// a replica sealed, to the body it sealed; never a panic.
func FuzzOpenSealed(f *testing.F) {
	k, _ := NewKeys("edge", []string{oldSecret})
	f.Add(k.SealMessage("edge.cancel", []byte("m")))
	f.Add(k.SealRecord("edge_control", "policy", time.Now(), []byte("r")))
	f.Add([]byte("M\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = k.OpenMessage("edge.cancel", b)
		_, _, _ = k.OpenRecord("edge_control", "policy", b)
	})
}

// BenchmarkSealOpenMessage: what sealing costs a cluster message of a
// typical size (a forwarded tools/call), sealed by one replica and opened
// by another.
func BenchmarkSealOpenMessage(b *testing.B) {
	k, _ := NewKeys("edge", []string{oldSecret})
	body := []byte(`{"session":"` + strings.Repeat("x", 200) + `","request":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}},"timeoutMs":65000}`)
	b.ReportAllocs()
	for b.Loop() {
		m := k.SealMessage("edge.replica.r1.call", body)
		if _, err := k.OpenMessage("edge.replica.r1.call", m); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRefusedRecordLoggedOnce: a forged member record, listed again and
// again, is logged once; another forged value under the key is logged
// again.
func TestRefusedRecordLoggedOnce(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logs strings.Builder
	n, err := Open(ctx, testConfig(s.ClientURL()), "r1", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	waitFor(t, "connected", n.Connected)
	ms := NewMembers(n)
	if err := ms.Publish(ctx, Member{Replica: "r1", LastSeen: time.Now()}); err != nil {
		t.Fatal(err)
	}
	kv, _ := ms.bucket(ctx)
	forge := func(v string) {
		if _, err := kv.Put(ctx, Token("ghost"), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	forge(`{"replica":"ghost","last_seen":"2026-01-01T00:00:00Z","nats":"connected"}`)
	for range 3 {
		list, err := ms.List(ctx)
		if err != nil || len(list) != 1 || list[0].Replica != "r1" {
			t.Fatalf("members: %+v %v", list, err)
		}
	}
	forge(`{"replica":"ghost"}`)
	if _, err := ms.List(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logs.String(), "refused a record"); got != 2 || n.Refused() != 4 {
		t.Errorf("logged %d times (want 2), counted %d (want 4):\n%s", got, n.Refused(), logs.String())
	}
}

// TestOpenEntry: on a real NATS, a record read from the KV opens when it
// was stored just after it was sealed (or sealed by a clock ahead), and
// is refused as replayed when the server stored it more than
// MaxRecordLag after it was sealed (a genuine record put back later),
// even by a replica that never saw the key; an older record than one
// accepted is refused by the watermarks.
func TestOpenEntry(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openNode(t, s.ClientURL(), "r1")
	kv, err := n.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.Bucket("lag")})
	if err != nil {
		t.Fatal(err)
	}
	open := func(at time.Time, marks *Watermarks) error {
		if _, err := kv.Put(ctx, "k", n.keys.SealRecord(n.Bucket("lag"), "k", at, []byte("v"))); err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		_, err = n.OpenEntry("lag", e, marks)
		return err
	}
	now := time.Now()
	for _, c := range []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"just sealed", now, true},
		{"sealed by a clock ahead", now.Add(time.Minute), true},
		{"sealed within the lag", now.Add(-MaxRecordLag / 2), true},
		{"sealed a minute before it was stored", now.Add(-time.Minute), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := open(c.at, nil)
			if c.ok && err != nil || !c.ok && !errors.Is(err, ErrReplayed) {
				t.Fatalf("%v, want ok %v", err, c.ok)
			}
		})
	}
	var marks Watermarks
	if err := open(time.Now(), &marks); err != nil {
		t.Fatal(err)
	}
	if err := open(time.Now().Add(-time.Second), &marks); !errors.Is(err, ErrReplayed) {
		t.Fatalf("an older record after a newer one: %v", err)
	}
}
