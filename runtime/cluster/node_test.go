package cluster

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

func testConfig(url string) *config.Cluster {
	return &config.Cluster{NatsURL: url, Name: "t", Secrets: []string{"0123456789abcdef0123456789abcdef"}, AllowAnonymousNATS: true}
}

// TestNodeSurvivesNATSRestart: a node started against a live server
// reports Connected, loses it when NATS goes, and has it back (with its
// JetStream usable) when NATS returns on the same address.
func TestNodeSurvivesNATSRestart(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openNode(t, s.ClientURL(), "r1")
	if got := n.Subject("sess", Token("a.b c")); got != "t.sess."+Token("a.b c") {
		t.Errorf("subject %q", got)
	}
	s.Shutdown()
	waitFor(t, "disconnected", func() bool { return !n.Connected() })
	s.Restart(t)
	waitFor(t, "reconnected", n.Connected)
	kv, err := n.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.Bucket("probe")})
	if err != nil {
		t.Fatalf("JetStream after reconnect: %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

// TestNodeStartsWithoutNATS: a replica starts while NATS is down and
// joins when it comes.
func TestNodeStartsWithoutNATS(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	url := s.ClientURL()
	s.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Open(ctx, testConfig(url), "r1", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Open with NATS down: %v", err)
	}
	defer n.Close(ctx)
	if n.Connected() {
		t.Fatal("connected with NATS down")
	}
	s.Restart(t)
	waitFor(t, "connected", n.Connected)
}

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"", "a", "a.b", "x > y*", "édge/1:8080"} {
		t.Run(id, func(t *testing.T) {
			tok := Token(id)
			for _, c := range tok {
				if c == '.' || c == '*' || c == '>' || c == ' ' {
					t.Fatalf("token %q has %q", tok, c)
				}
			}
			if back, err := FromToken(tok); err != nil || back != id {
				t.Fatalf("round trip %q → %q (%v)", id, back, err)
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after 15s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
