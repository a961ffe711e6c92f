package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// TestHostileFleetNATS: a party on the fleet's NATS without the fleet's
// secret (on an anonymous NATS, and holding the replicas' own NATS
// credentials) tries each attack of issue #24. Every one is refused and
// logged once by the replica it targets, and what it could snoop carries
// no session id.
func TestHostileFleetNATS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (fleetNATS, []nats.Option)
	}{
		{"anonymous NATS", func(t *testing.T) (fleetNATS, []nats.Option) {
			return fleetNATS{url: natstest.Start(t).ClientURL()}, nil
		}},
		{"NATS credentials without the secret", func(t *testing.T) (fleetNATS, []nats.Option) {
			ns := natstest.StartAuth(t, "t")
			o, err := nats.NkeyOptionFromSeed(ns.SeedFile)
			if err != nil {
				t.Fatal(err)
			}
			return fleetNATS{url: ns.ClientURL(), nkey: ns.SeedFile}, []nats.Option{o}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case has its NATS server and replicas
			hostileFleet(t, tc.start)
		})
	}
}

func hostileFleet(t *testing.T, start func(t *testing.T) (fleetNATS, []nats.Option)) {
	ns, creds := start(t)
	received := make(chan string, 4)
	up := vaultServer(t, "vault", received)
	a := startReplicaOn(t, ns, "a", up, t.TempDir(), "")
	b := startReplicaOn(t, ns, "b", up, t.TempDir(), "")
	redact := w.Example(t, "redact-secrets")
	uploadAndAttach(t, a, redact)
	waitFor(t, "guard on b", func() bool { return activeDigest(t, b, "guard") == digestOf(redact) })

	evil, err := nats.Connect(ns.url, creds...)
	if err != nil {
		t.Fatal(err)
	}
	defer evil.Close()
	var snoopMu sync.Mutex
	var snooped strings.Builder
	var announced []byte // a GET stream's announcement, as sealed by a
	snoop, err := evil.Subscribe("t.>", func(m *nats.Msg) {
		snoopMu.Lock()
		fmt.Fprintf(&snooped, "%s %s\n", m.Subject, m.Data)
		if m.Subject == "t.getopen" && announced == nil {
			announced = m.Data
		}
		snoopMu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer snoop.Unsubscribe()
	if err := evil.Flush(); err != nil {
		t.Fatal(err)
	}

	elicited := make(chan string, 4)
	cs := connect(t, a.mcp, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		elicited <- r.Params.Message
		return &mcp.ElicitResult{Action: "decline"}, nil
	}})
	sid := cs.ID()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	fs := a.g.fleet.Sessions()
	waitFor(t, "a to hold the GET stream", func() bool { return fs.Streams() > 0 })

	// What crossed NATS so far (the GET stream's announcement, the
	// session's records) says nothing of the session.
	if err := b.g.fleet.Node().Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	snoopMu.Lock()
	txt := snooped.String()
	snoopMu.Unlock()
	if !strings.Contains(txt, "t.getopen") {
		t.Errorf("the GET stream's announcement was not seen:\n%.2000s", txt)
	}
	if strings.Contains(txt, sid) || strings.Contains(txt, cluster.Token(sid)) {
		t.Errorf("a session id crossed NATS in clear:\n%.2000s", txt)
	}

	// refusedOnce runs attack and checks that r logged one refusal of it.
	refusedOnce := func(t *testing.T, r *replica, logged string, attack func()) {
		t.Helper()
		before := strings.Count(r.logs.String(), logged)
		attack()
		waitFor(t, r.name+" to log the refusal", func() bool { return strings.Count(r.logs.String(), logged) > before })
		time.Sleep(300 * time.Millisecond)
		if n := strings.Count(r.logs.String(), logged) - before; n != 1 {
			t.Errorf("%s logged %q %d times, want once", r.name, logged, n)
		}
	}
	// noAnswer sends a request that must get none: the replica refuses it
	// before anything else.
	noAnswer := func(t *testing.T, subj string, body any) {
		t.Helper()
		b, _ := json.Marshal(body)
		m, err := evil.Request(subj, b, time.Second)
		if err == nil {
			t.Errorf("%s: answered %q", subj, m.Data)
		} else if !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("%s: %v, want no answer (timeout)", subj, err)
		}
	}
	aTok := cluster.Token("a")

	t.Run("tools/call as the session's identity", func(t *testing.T) {
		refusedOnce(t, a, "refused a forwarded request from NATS", func() {
			noAnswer(t, "t.replica."+aTok+".call", map[string]any{"session": sid, "timeoutMs": 1000,
				"request": json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"record","arguments":{"text":"forged"}}}`)})
		})
		select {
		case got := <-received:
			t.Fatalf("the forged call ran upstream: %q", got)
		default:
		}
	})
	t.Run("a forged answer to a request the client never saw", func(t *testing.T) {
		refusedOnce(t, a, "refused a client's answer from NATS", func() {
			noAnswer(t, "t.replica."+aTok+".answer", map[string]any{"session": sid,
				"response": json.RawMessage(`{"jsonrpc":"2.0","id":"1@` + aTok + `","result":{"action":"accept","content":{}}}`)})
		})
	})
	t.Run("an elicitation written into the GET stream", func(t *testing.T) {
		elicit := json.RawMessage(`{"jsonrpc":"2.0","id":"9@` + aTok + `","method":"elicitation/create","params":{"mode":"url","message":"log in again","url":"https://evil.example/login","elicitationId":"e1"}}`)
		refusedOnce(t, a, "refused a message for a session's GET stream from NATS", func() {
			// The subject the replica listens on (an attacker on NATS sees
			// it when replicas hand messages over).
			noAnswer(t, "t.sess."+a.g.fleet.Node().Route(sid)+".out", elicit)
		})
		select {
		case msg := <-elicited:
			t.Fatalf("the client was asked %q", msg)
		case <-time.After(300 * time.Millisecond):
		}
	})
	t.Run("a cancellation", func(t *testing.T) {
		refusedOnce(t, a, "refused a cancellation from NATS", func() {
			b, _ := json.Marshal(map[string]any{"session": sid, "params": map[string]any{"requestId": 1}})
			if err := evil.Publish("t.cancel", b); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("a sealed message replayed", func(t *testing.T) {
		snoopMu.Lock()
		replay := announced
		snoopMu.Unlock()
		for _, r := range []*replica{a, b} {
			refusedOnce(t, r, "refused a GET stream announcement from NATS: stale or replayed", func() {
				if err := evil.Publish("t.getopen", replay); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	t.Run("a policy record that detaches the redaction", func(t *testing.T) {
		js, _ := jetstream.New(evil)
		kv, err := js.KeyValue(ctx, "t_control")
		if err != nil {
			t.Fatal(err)
		}
		revA, revB := a.g.fleet.Control().Revision(), b.g.fleet.Control().Revision()
		before := strings.Count(a.logs.String(), "refused a control record") + strings.Count(b.logs.String(), "refused a control record")
		if _, err := kv.Put(ctx, "policy", []byte(`{"format":1,"modules":{},"attachments":[]}`)); err != nil {
			t.Fatal(err)
		}
		for _, r := range []*replica{a, b} {
			waitFor(t, r.name+" to refuse the record", func() bool { return strings.Contains(r.logs.String(), "refused a control record") })
		}
		time.Sleep(2500 * time.Millisecond) // two polls of the record
		after := strings.Count(a.logs.String(), "refused a control record") + strings.Count(b.logs.String(), "refused a control record")
		if after-before != 2 {
			t.Errorf("%d refusals logged by the two replicas, want one each", after-before)
		}
		if a.g.fleet.Control().Revision() != revA || b.g.fleet.Control().Revision() != revB {
			t.Errorf("revisions moved: a %d→%d, b %d→%d", revA, a.g.fleet.Control().Revision(), revB, b.g.fleet.Control().Revision())
		}
		for _, r := range []*replica{a, b} {
			if txt := leakThrough(t, r); !strings.Contains(txt, "[MASKED]") {
				t.Errorf("%s after the forged record: %q", r.name, txt)
			}
		}
	})
	t.Run("purging a deleted session's record", func(t *testing.T) {
		js, _ := jetstream.New(evil)
		kv, err := js.KeyValue(ctx, "t_sessions")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("DELETE", a.mcp, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		key := fleet.RecordKey(sid)
		waitFor(t, "b to see the session deleted", func() bool { return b.g.fleet.Sessions().Revoked(sid) })
		if err := kv.Purge(ctx, key); err != nil {
			t.Fatal(err)
		}
		// And a record saying it is alive, unsealed.
		if _, err := kv.Put(ctx, key, []byte(`{"id":`+fmt.Sprintf("%q", sid)+`}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		for _, r := range []*replica{a, b} {
			if code := postPing(t, r.mcp, sid); code != http.StatusNotFound {
				t.Errorf("%s: a ping on the deleted session after its record was purged: %d, want 404", r.name, code)
			}
		}
	})
}

// postPing posts a ping with session id sid to url and returns the status.
func postPing(t *testing.T, url, sid string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestFleetAuditsRemoteAdminChanges: an admin change made through one
// replica is audited by the others when they activate it, with the admin
// identity and the replica it was made on.
func TestFleetAuditsRemoteAdminChanges(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	up := vaultServer(t, "vault", make(chan string, 1))
	fleet := startControlFleet(t, ns.ClientURL(), up, 2)
	a, b := fleet[0], fleet[1]
	redact := w.Example(t, "redact-secrets")
	uploadAndAttach(t, a, redact)
	waitFor(t, "guard on b", func() bool { return activeDigest(t, b, "guard") == digestOf(redact) })
	for _, action := range []string{"module.upload", "policy.attach"} {
		waitFor(t, "b to audit "+action, func() bool {
			for _, line := range strings.Split(b.logs.String(), "\n") {
				if strings.Contains(line, "msg=audit") && strings.Contains(line, "action="+action) &&
					strings.Contains(line, "identity=ops") && strings.Contains(line, `made on replica \"a\"`) {
					return true
				}
			}
			return false
		})
	}
	if strings.Contains(a.logs.String(), "through the fleet") {
		t.Error("a audited its own change as one from the fleet")
	}
}

// TestFleetSecretRotation: in the middle of a rotation (a seals with the
// old secret and opens the new, b the other way round) each replica takes
// what the other seals: policy records, session tokens, session records;
// a third replica with a secret of neither is refused by both.
func TestFleetSecretRotation(t *testing.T) {
	t.Parallel()
	const oldS, newS, otherS = "old-fleet-secret-0123456789abcdef", "new-fleet-secret-0123456789abcdef", "other-secret-0123456789abcdef0123"
	ns := natstest.Start(t)
	up := vaultServer(t, "vault", make(chan string, 1))
	a := startReplicaOn(t, fleetNATS{url: ns.ClientURL(), secrets: []string{oldS, newS}}, "a", up, t.TempDir(), "")
	b := startReplicaOn(t, fleetNATS{url: ns.ClientURL(), secrets: []string{newS, oldS}}, "b", up, t.TempDir(), "")
	redact := w.Example(t, "redact-secrets")
	uploadAndAttach(t, a, redact) // sealed with old
	waitFor(t, "guard on b", func() bool { return activeDigest(t, b, "guard") == digestOf(redact) })
	if code, body := adminDo(t, "DELETE", b.admin+"/admin/policies/guard", nil, nil); code != http.StatusOK { // sealed with new
		t.Fatalf("detach through b: %d %v", code, body)
	}
	waitFor(t, "the detach on a", func() bool { return activeDigest(t, a, "guard") == "" })

	cs := connect(t, a.mcp, nil) // a token sealed with old
	sid := cs.ID()
	if code := postPing(t, b.mcp, sid); code != http.StatusOK {
		t.Fatalf("b adopting a's session: %d", code)
	}
	req, _ := http.NewRequest("DELETE", b.mcp, nil) // a record sealed with new
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	waitFor(t, "a to see the session deleted", func() bool { return a.g.fleet.Sessions().Revoked(sid) })

	stranger := startReplicaOn(t, fleetNATS{url: ns.ClientURL(), secrets: []string{otherS}}, "stranger", up, t.TempDir(), "")
	before := a.g.fleet.Node().Refused() + b.g.fleet.Node().Refused()
	e, err := cluster.NewControl(stranger.g.fleet.Node()).Get(context.Background(), "policy") // refused by the stranger: not its fleet's
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.NewControl(stranger.g.fleet.Node()).Put(context.Background(), "policy", []byte(`{"format":1,"modules":{},"attachments":[]}`), e.Revision); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a and b to refuse the stranger's record", func() bool { return a.g.fleet.Node().Refused()+b.g.fleet.Node().Refused() >= before+2 })
	time.Sleep(1500 * time.Millisecond)
	if a.g.fleet.Control().Failed() != nil || b.g.fleet.Control().Failed() != nil {
		t.Error("the stranger's record reached activation")
	}
	if postPing(t, a.mcp, sid) != http.StatusNotFound || postPing(t, b.mcp, sid) != http.StatusNotFound {
		t.Error("the deleted session is served again")
	}
}

// TestFleetRefusesAnonymousNATS: a gateway whose fleet's NATS lets anyone
// in does not start, and says which key lets it; with the key, or with a
// NATS that wants credentials (and the replica's nkey), it does.
func TestFleetRefusesAnonymousNATS(t *testing.T) {
	t.Parallel()
	anon, auth := natstest.Start(t), natstest.StartAuth(t, "t")
	for _, tc := range []struct {
		name, cluster, wantErr string
	}{
		{"anonymous NATS", fmt.Sprintf(`"nats_url": %q`, anon.ClientURL()), "cluster.allow_anonymous_nats: the NATS server at " + anon.ClientURL()},
		{"anonymous NATS, allowed", fmt.Sprintf(`"nats_url": %q, "allow_anonymous_nats": true`, anon.ClientURL()), ""},
		{"NATS with nkeys", fmt.Sprintf(`"nats_url": %q, "nats_nkey": %q`, auth.ClientURL(), auth.SeedFile), ""},
		{"NATS unreachable: checked when it comes", `"nats_url": "nats://127.0.0.1:1"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("fleet.json", []byte(fmt.Sprintf(`{"mcpServers": {}, "cluster": {%s, "name": "t", "secret": %q}}`, tc.cluster, fleetSecret)))
			if err != nil {
				t.Fatal(err)
			}
			g, err := New(cfg, Options{Logger: testLogger(t)})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				g.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New: %v, want %q", err, tc.wantErr)
			}
		})
	}
}
