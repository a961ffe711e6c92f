package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// TestFleetSessionTTL: cluster.session_ttl sets the lifetime of the
// session tokens the fleet issues and of the records it keeps of them
// (revocations must last as long as the tokens they revoke).
func TestFleetSessionTTL(t *testing.T) {
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
	kv, err := f.gws[0].fleetSess.Load().bucket(ctx)
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
