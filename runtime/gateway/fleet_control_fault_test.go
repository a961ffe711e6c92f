package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// cutter is a TCP relay in front of NATS that a test can cut and
// restore: one replica loses NATS while the others keep it.
type cutter struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{t: t, target: target, addr: ln.Addr().String(), ln: ln}
	go c.serve(ln)
	t.Cleanup(c.cut)
	return c
}

func (c *cutter) url() string { return "nats://" + c.addr }

func (c *cutter) serve(ln net.Listener) {
	for {
		down, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", c.target)
		if err != nil {
			down.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, down, up)
		c.mu.Unlock()
		go func() { io.Copy(up, down); up.Close() }()
		go func() { io.Copy(down, up); down.Close() }()
	}
}

// cut closes the listener and every relayed connection.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln != nil {
		c.ln.Close()
		c.ln = nil
	}
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// restore listens again on the same address.
func (c *cutter) restore() {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.ln = ln
	c.mu.Unlock()
	go c.serve(ln)
}

func leakThrough(t *testing.T, r *replica) string {
	t.Helper()
	txt, _ := callText(t, connect(t, r.mcp, nil), "leak", nil)
	return txt
}

func TestFleetControlNATSDown(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	up := vaultServer(t, "vault", make(chan string, 1))
	fleet := startControlFleet(t, ns.ClientURL(), up, 2)
	a, b := fleet[0], fleet[1]
	redact := w.Example(t, "redact-secrets")
	uploadAndAttach(t, a, redact)
	waitFor(t, "guard on b", func() bool { return activeDigest(t, b, "guard") == digestOf(redact) })
	// b's member list is refreshed every few beats: wait until it has seen
	// a, so that what it shows while NATS is down is the whole fleet.
	waitFor(t, "b to list both members", func() bool {
		_, st := getJSON(t, strings.TrimSuffix(b.mcp, "/mcp")+"/status")
		f, _ := st["fleet"].(map[string]any)
		m, _ := f["members"].([]any)
		return len(m) == 2
	})

	ns.Shutdown()
	waitFor(t, "both replicas to see NATS gone", func() bool { return !a.g.fleet.Node().Connected() && !b.g.fleet.Node().Connected() })
	for _, req := range []struct{ method, path, body string }{
		{"PUT", "/admin/modules/other", string(versionedModule(3))},
		{"POST", "/admin/policies", `{"name":"g2","module":"guard","tools":["*"]}`},
		{"DELETE", "/admin/policies/guard", ""},
		{"POST", "/admin/modules/guard/rollback", ""},
	} {
		code, body := adminDo(t, req.method, a.admin+req.path, []byte(req.body), nil)
		if code != http.StatusServiceUnavailable || body["error"] != "fleet_unavailable" || !strings.Contains(body["reason"].(string), "NATS is unreachable") {
			t.Errorf("%s %s while NATS is down: %d %v", req.method, req.path, code, body)
		}
	}
	if txt := leakThrough(t, b); !strings.Contains(txt, "[MASKED]") {
		t.Errorf("b while NATS is down: leak = %q", txt)
	}
	base := strings.TrimSuffix(b.mcp, "/mcp")
	if code, body := getJSON(t, base+"/readyz"); code != 200 || body["status"] != "degraded" || !strings.Contains(body["reason"].(string), "NATS") {
		t.Errorf("/readyz while NATS is down: %d %v", code, body)
	}
	_, st := getJSON(t, base+"/status")
	if f := st["fleet"].(map[string]any); f["nats"] != "disconnected" || f["degraded"] == nil || len(f["members"].([]any)) != 2 {
		t.Errorf("/status fleet while NATS is down: %v", f)
	}

	ns.Restart(t)
	waitFor(t, "both replicas back on NATS", func() bool { return a.g.fleet.Node().Connected() && b.g.fleet.Node().Connected() })
	if code, body := getJSON(t, base+"/readyz"); code != 200 || body["status"] != "ready" {
		t.Errorf("/readyz after NATS came back: %d %v", code, body)
	}
	var code int
	waitFor(t, "an admin write to go through again", func() bool {
		code, _ = adminDo(t, "DELETE", a.admin+"/admin/policies/guard", nil, nil)
		return code == http.StatusOK
	})
	waitFor(t, "the detach on b", func() bool { return len(attachedPolicies(t, b)) == 0 })
	if txt := leakThrough(t, b); !strings.Contains(txt, secretKey) {
		t.Errorf("b after the detach: leak = %q", txt)
	}
}

// TestFleetControlReconcilesAfterPartition: b loses NATS while a keeps
// it; a change made on a meanwhile reaches b when b is back.
func TestFleetControlReconcilesAfterPartition(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	up := vaultServer(t, "vault", make(chan string, 1))
	relay := newCutter(t, strings.TrimPrefix(ns.ClientURL(), "nats://"))
	a := startReplica(t, ns.ClientURL(), "a", up, t.TempDir(), "")
	b := startReplica(t, relay.url(), "b", up, t.TempDir(), "")
	redact := w.Example(t, "redact-secrets")
	uploadAndAttach(t, a, redact)
	waitFor(t, "guard on b", func() bool { return activeDigest(t, b, "guard") == digestOf(redact) })

	relay.cut()
	waitFor(t, "b to lose NATS", func() bool { return !b.g.fleet.Node().Connected() })
	v2 := versionedModule(2)
	if code, body := adminDo(t, "PUT", a.admin+"/admin/modules/guard", v2, nil); code != http.StatusCreated {
		t.Fatalf("upload through a during b's outage: %d %v", code, body)
	}
	if code, body := adminDo(t, "PUT", b.admin+"/admin/modules/guard", v2, nil); code != http.StatusServiceUnavailable {
		t.Errorf("upload through b during its outage: %d %v", code, body)
	}
	if txt := leakThrough(t, b); !strings.Contains(txt, "[MASKED]") {
		t.Errorf("b during its outage serves what it has: leak = %q", txt)
	}

	relay.restore()
	waitFor(t, "b to activate the version uploaded during its outage", func() bool { return activeDigest(t, b, "guard") == digestOf(v2) })
	if txt := leakThrough(t, b); txt != "r2" {
		t.Errorf("b after its outage: leak = %q", txt)
	}
}

// TestFleetControlRefusesGarbage: records written into the control bucket
// by something else than a replica are refused and logged; the replicas
// keep serving, and the next admin change writes over the garbage.
func TestFleetControlRefusesGarbage(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	up := vaultServer(t, "vault", make(chan string, 1))
	fleet := startControlFleet(t, ns.ClientURL(), up, 2)
	a, b := fleet[0], fleet[1]
	redact := w.Example(t, "redact-secrets")
	uploadAndAttach(t, a, redact)
	waitFor(t, "guard on b", func() bool { return activeDigest(t, b, "guard") == digestOf(redact) })

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "t_control")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(ctx, "t_modules")
	if err != nil {
		t.Fatal(err)
	}
	// An object named after a digest its bytes do not have.
	forged := strings.Repeat("ab", 32)
	if _, err := obj.PutBytes(ctx, forged, []byte("not the module you are looking for")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, value, logged string }{
		{"not JSON", `{"format":1,"modules":`, "unexpected EOF"},
		{"unknown format", `{"format":7,"modules":{}}`, "format 7"},
		{"bad module name", `{"format":1,"modules":{"../etc":{"active":{"digest":"sha256:` + forged + `","size":3}}}}`, "invalid module name"},
		{"bad digest", `{"format":1,"modules":{"m":{"active":{"digest":"sha256:XYZ","size":3}}}}`, "not sha256"},
		{"invalid attachment", `{"format":1,"modules":{},"attachments":[{"name":"x"}]}`, "attachments[0]"},
		{"digest mismatch", `{"format":1,"modules":{"m":{"active":{"digest":"sha256:` + forged + `","size":34}}},"attachments":[]}`, "not matching their digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Sealed with the fleet's keys: what a replica with the secret
			// but a bug, or another build, might write.
			sealed := a.g.fleet.Node().Keys().SealRecord("t_control", "policy", time.Now(), []byte(tc.value))
			rev, err := kv.Put(ctx, "policy", sealed)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range fleet {
				waitFor(t, r.name+" to refuse revision", func() bool {
					f := r.g.fleet.Control().Failed()
					return f != nil && f.Generation == rev
				})
				if f := r.g.fleet.Control().Failed(); !strings.Contains(f.Error, tc.logged) {
					t.Errorf("%s refused %s with %q", r.name, tc.name, f.Error)
				}
				if !strings.Contains(r.logs.String(), "revision="+strconv.FormatUint(rev, 10)) {
					t.Errorf("%s did not log the refusal of revision %d", r.name, rev)
				}
			}
			if txt := leakThrough(t, b); !strings.Contains(txt, "[MASKED]") {
				t.Errorf("b after garbage: leak = %q", txt)
			}
		})
	}
	// The next admin change repairs the record from what a serves.
	if code, body := adminDo(t, "DELETE", a.admin+"/admin/policies/guard", nil, nil); code != http.StatusOK {
		t.Fatalf("detach over the garbage: %d %v", code, body)
	}
	waitFor(t, "b to detach", func() bool { return len(attachedPolicies(t, b)) == 0 })
}

// TestFleetControlRecordWiped: the control bucket disappears (deleted, or
// a NATS that lost its store); the replicas keep serving, one writes its
// state again, and changes flow as before.
func TestFleetControlRecordWiped(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	up := vaultServer(t, "vault", make(chan string, 1))
	fleet := startControlFleet(t, ns.ClientURL(), up, 2)
	a, b := fleet[0], fleet[1]
	redact := w.Example(t, "redact-secrets")
	uploadAndAttach(t, a, redact)
	waitFor(t, "guard on b", func() bool { return activeDigest(t, b, "guard") == digestOf(redact) })

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, del := range []func() error{
		func() error { return js.DeleteKeyValue(ctx, "t_control") },
		func() error { return js.DeleteObjectStore(ctx, "t_modules") },
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the record written again", func() bool {
		kv, err := js.KeyValue(ctx, "t_control")
		if err != nil {
			return false
		}
		_, err = kv.Get(ctx, "policy")
		return err == nil
	})
	if txt := leakThrough(t, b); !strings.Contains(txt, "[MASKED]") {
		t.Errorf("b after the wipe: leak = %q", txt)
	}
	v2 := versionedModule(2)
	waitFor(t, "an upload through b to go through", func() bool {
		code, _ := adminDo(t, "PUT", b.admin+"/admin/modules/guard", v2, nil)
		return code == http.StatusCreated
	})
	waitFor(t, "v2 on a", func() bool { return activeDigest(t, a, "guard") == digestOf(v2) })
	// The module bytes are back in the object store for a newcomer.
	c := startReplica(t, ns.ClientURL(), "c", up, t.TempDir(), "")
	waitFor(t, "v2 on a newcomer", func() bool { return activeDigest(t, c, "guard") == digestOf(v2) })
}
