package gateway

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// TestFleetSessionTTL: cluster.session_ttl sets the lifetime of the
// session tokens the fleet issues and of the records it keeps of them
// (revocations must last as long as the tokens they revoke).
func TestFleetSessionTTL(t *testing.T) {
	t.Parallel()
	f := startFleetWith(t, 2, serversJSON(`"up": {"url": "http://127.0.0.1:1/mcp"}`), `"session_ttl": 120`)
	sid := f.initRaw(t)
	s, err := cluster.NewSealer("tf", []string{testFleetSecret})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Open(sid)
	if err != nil {
		t.Fatalf("the session id is not a token of the fleet: %v", err)
	}
	if got := c.Expires - c.Issued; got != 120 {
		t.Errorf("token lifetime %d s, want 120", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := f.gws[0].fleet.Sessions().Bucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 120*time.Second {
		t.Errorf("session records bucket TTL %v, want 2m0s", st.TTL())
	}
}

// TestFleetSessionTTLOnItsReplica: the replica that issued a session (and
// one that adopted it) refuses it once its token expired, as every other
// replica does: cluster.session_ttl held only elsewhere (200 after 598 s
// with a 60 s TTL on the replica that created the session). The replicas'
// clocks are moved past the TTL instead of waiting for it.
func TestFleetSessionTTLOnItsReplica(t *testing.T) {
	t.Parallel()
	f := startFleetWith(t, 2, serversJSON(`"up": {"url": "http://127.0.0.1:1/mcp"}`), `"session_ttl": 60`)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for i := range f.gws {
		t.Run(fmt.Sprintf("session on r%d", i), func(t *testing.T) {
			direct := &testFleet{url: f.srvs[i].URL + "/mcp"}
			sid := direct.initRaw(t)
			other := &testFleet{url: f.srvs[1-i].URL + "/mcp"}
			if code, body := other.raw(t, "POST", sid, list); code != http.StatusOK {
				t.Fatalf("the other replica refused a fresh session: %d %s", code, body)
			}
			for _, r := range []*testFleet{direct, other} {
				if code, body := r.raw(t, "POST", sid, list); code != http.StatusOK {
					t.Fatalf("fresh session at %s: %d %s", r.url, code, body)
				}
			}
			// 61 s later on the session's own replica, and on the one that
			// adopted it.
			for _, gw := range f.gws {
				gw.skew.Store(int64(61 * time.Second))
			}
			defer func() {
				for _, gw := range f.gws {
					gw.skew.Store(0)
				}
			}()
			if code, body := direct.raw(t, "POST", sid, list); code != http.StatusNotFound {
				t.Errorf("r%d, which issued the session: %d after its TTL, want 404: %s", i, code, body)
			}
			if code, body := direct.raw(t, "POST", sid, list); code != http.StatusNotFound {
				t.Errorf("r%d, again: %d, want 404: %s", i, code, body)
			}
			if code, body := other.raw(t, "POST", sid, list); code != http.StatusNotFound {
				t.Errorf("r%d, which adopted the session: %d after its TTL, want 404: %s", 1-i, code, body)
			}
		})
	}
}
