package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// sessionQuota is a stateful validator counting a session's tools/call
// requests in the host's session state, slowly enough (a sleep between
// its read and its answer) that concurrent calls overlap, and refusing
// those past max. last is the count the latest invocation found.
func sessionQuota(max int, last *atomic.Int64) intercept.Interceptor {
	return &intercept.Func{Desc: intercept.Descriptor{Name: "acme/quota", Type: intercept.Validation, SessionState: true,
		Hooks: []intercept.Hook{{Events: []string{"tools/call"}, Phase: intercept.Request}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			var st struct{ N int }
			if err := json.Unmarshal(inv.Context.InterceptorState, &st); err != nil {
				return nil, err
			}
			last.Store(int64(st.N))
			time.Sleep(5 * time.Millisecond)
			if st.N >= max {
				return intercept.Deny(fmt.Sprintf("call %d of this session: at most %d", st.N+1, max)), nil
			}
			res := intercept.Pass()
			res.State = fmt.Appendf(nil, `{"n":%d}`, st.N+1)
			return res, nil
		}}
}

// TestInterceptorsFleetConcurrentState: N concurrent calls of one session
// through a round-robin proxy over three replicas of a fleet, each
// counted by a stateful interceptor in the fleet's session state, count
// N: two replicas updating the state at once do not lose either update
// (compare-and-set on the KV revision, the update run again on the newer
// state).
func TestInterceptorsFleetConcurrentState(t *testing.T) {
	t.Parallel()
	var last atomic.Int64
	ics := serveInterceptors(t, sessionQuota(1000, &last))
	// The twelfth call waits for eleven read-invoke-write turns across
	// replicas: the default 2 s deadline was too short for that under
	// -race on a loaded machine (two calls fail-closed in a CI
	// simulation). What is under test is the count, not the wait.
	f := startFleet(t, 3, fmt.Sprintf(`{"mcpServers": {"a": {"url": %q, "prefix": "a"}},
	  "interceptorServers": {"acme": {"url": %q}}, "interceptors": [{"server": "acme", "timeout_ms": 20000}]}`, keyServer(t, "a"), ics))
	cs := connect(t, f.url, nil)
	const n = 12
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := icCall(t, cs, "a_echo", "x"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := icCall(t, cs, "a_echo", "x"); err != nil {
		t.Fatal(err)
	}
	if got := last.Load(); got != n {
		t.Fatalf("after %d concurrent calls the session's count is %d", n, got)
	}
}

// TestInterceptorsFleetStateReplay: someone with write access to the
// fleet's NATS puts genuine sealed records of the interceptor state
// bucket back where they do not belong, to make a quota forget calls:
// an older record of the same key (refused by the replica that saw the
// newer one), a record written a minute ago (refused by a replica that
// never saw the key: the NATS server stored it long after it was sealed)
// and a record moved from another session's key (refused everywhere).
// Each call then fails closed, naming the refusal, and is counted.
func TestInterceptorsFleetStateReplay(t *testing.T) {
	t.Parallel()
	var last atomic.Int64
	ics := serveInterceptors(t, sessionQuota(3, &last))
	f := startFleet(t, 3, fmt.Sprintf(`{"mcpServers": {"a": {"url": %q, "prefix": "a"}},
	  "interceptorServers": {"acme": {"url": %q}}, "interceptors": [{"server": "acme"}]}`, keyServer(t, "a"), ics))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(f.nats.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var kv jetstream.KeyValue // made by the first call
	keys := func() map[string]bool {
		ks, _ := kv.Keys(ctx)
		out := map[string]bool{}
		for _, k := range ks {
			out[k] = true
		}
		return out
	}
	get := func(key string) []byte {
		e, err := kv.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return e.Value()
	}
	put := func(key string, v []byte) {
		if _, err := kv.Put(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	only := func(i int) { // the proxy sends everything to replica i
		f.mu.Lock()
		defer f.mu.Unlock()
		for j := range f.gws {
			f.down[j] = j != i
		}
	}
	refusedBy := func(i int, cs *mcp.ClientSession, want string) {
		t.Helper()
		before := f.gws[i].fleet.Node().Refused()
		_, err := icCall(t, cs, "a_echo", "x")
		if err == nil || !strings.Contains(err.Error(), `interceptor "acme/quota" refused tools/call (request)`) || !strings.Contains(err.Error(), want) {
			t.Fatalf("replica %d: %v, want the quota's call refused: %s", i, err, want)
		}
		if f.gws[i].fleet.Node().Refused() == before {
			t.Fatalf("replica %d did not count the refused record", i)
		}
	}

	only(0)
	s1 := connect(t, f.url, nil)
	if _, err := icCall(t, s1, "a_echo", "x"); err != nil {
		t.Fatal(err)
	}
	if kv, err = js.KeyValue(ctx, "tf_icstate"); err != nil {
		t.Fatal(err)
	}
	var k1 string
	for k := range keys() {
		k1 = k
	}
	first := get(k1)
	if _, err := icCall(t, s1, "a_echo", "x"); err != nil || last.Load() != 1 {
		t.Fatalf("second call: %v, count %d", err, last.Load())
	}
	put(k1, first) // back to one call
	refusedBy(0, s1, "interceptor state in NATS refused: replayed or stale: written at")

	only(1)
	s2 := connect(t, f.url, nil)
	if _, err := icCall(t, s2, "a_echo", "x"); err != nil {
		t.Fatal(err)
	}
	var k2 string
	for k := range keys() {
		if k != k1 {
			k2 = k
		}
	}
	n := f.gws[1].fleet.Node()
	put(k2, n.Keys().SealRecord(n.Bucket("icstate"), k2, time.Now().Add(-time.Minute), []byte(`{"n":0}`)))
	only(2) // a replica that never read k2
	refusedBy(2, s2, "after it was sealed")

	put(k2, get(k1)) // another key's record
	refusedBy(2, s2, "not sealed by this fleet")
}
