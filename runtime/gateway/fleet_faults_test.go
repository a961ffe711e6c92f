package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
)

// opsCaller calls continuously until stopped, as two clients: sessionless
// 2026-07-28 calls through the round-robin front (any replica serves
// them), and a 2025 session held on one replica (sticky: sessions are that
// replica's until sealed session tokens land). Every call must succeed.
type opsCaller struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	calls    int
	failures []string
}

// startOpsCaller starts calling front and the sticky session cs.
func startOpsCaller(t *testing.T, front string, cs *mcp.ClientSession) *opsCaller {
	c := &opsCaller{stop: make(chan struct{})}
	c.wg.Go(func() { c.loop(func(i int) error { return c.modern(front, i) }) })
	c.wg.Go(func() { c.loop(func(i int) error { return c.sticky(cs, i) }) })
	t.Cleanup(c.halt)
	return c
}

func (c *opsCaller) loop(call func(i int) error) {
	for i := 0; ; i++ {
		select {
		case <-c.stop:
			return
		default:
		}
		err := call(i)
		c.mu.Lock()
		c.calls++
		if err != nil {
			c.failures = append(c.failures, err.Error())
		}
		c.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
}

// opsClient bounds every call: a gateway that hangs fails the test.
var opsClient = &http.Client{Timeout: 10 * time.Second}

func (c *opsCaller) modern(front string, i int) error {
	text := fmt.Sprint("m", i)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"},"_meta":` + modernMeta("2026-07-28") + `}}`
	req, _ := http.NewRequest(http.MethodPost, front, strings.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"} {
		req.Header.Set(k, v)
	}
	resp, err := opsClient.Do(req)
	if err != nil {
		return fmt.Errorf("call %s: %w", text, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "echo: "+text) {
		return fmt.Errorf("call %s: %d %s", text, resp.StatusCode, b)
	}
	return nil
}

func (c *opsCaller) sticky(cs *mcp.ClientSession, i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	text := fmt.Sprint("s", i)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return fmt.Errorf("session call %s: %w", text, err)
	}
	if got := textOf(res); got != "echo: "+text {
		return fmt.Errorf("session call %s: %q", text, got)
	}
	return nil
}

// halt stops calling (idempotent).
func (c *opsCaller) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

// check fails the test on any failed call, and when fewer than min calls
// were made; while calling it first waits up to 30 s for min calls (a
// loaded machine makes fewer in a given time).
func (c *opsCaller) check(t *testing.T, what string, min int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c.mu.Lock()
		n := c.calls
		c.mu.Unlock()
		select {
		case <-c.stop:
		default:
			if n < min {
				continue
			}
		}
		break
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("%s: %d calls", what, c.calls)
	if len(c.failures) > 0 {
		t.Fatalf("%s: %d of %d calls failed, first: %s", what, len(c.failures), c.calls, c.failures[0])
	}
	if c.calls < min {
		t.Fatalf("%s: only %d calls", what, c.calls)
	}
	c.calls = 0
}

// opsLimits configure a shared limit high enough never to refuse these
// callers, so that every call asks the fleet's rate bucket.
const opsLimits = `"limits": {"client_rate": {"rps": 5000, "burst": 5000}},`

// TestFleetSurvivesNATSServerLoss: replicas connected to all three servers
// of a JetStream cluster; one server killed while clients call
// continuously: no call fails.
func TestFleetSurvivesNATSServerLoss(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	servers := fmt.Sprintf(`"up": {"url": %q}`, modernUpstream(t))
	front, reps := startOpsFleet(t, 3, c.URL(), servers, opsLimits)
	for _, r := range reps {
		waitFor(t, "replica on NATS", r.g.fleet.Node().Connected)
	}
	cs := connect(t, reps[0].url, nil)
	caller := startOpsCaller(t, front, cs)
	caller.check(t, "before", 10)
	c.Servers[0].Shutdown()
	time.Sleep(3 * time.Second)
	caller.check(t, "one NATS server killed", 10)
	caller.halt()
	caller.check(t, "one NATS server killed", 0)
	for i, r := range reps {
		if !r.g.fleet.Node().Connected() {
			t.Errorf("replica %d not on NATS after losing one of three servers", i)
		}
	}
}

// TestFleetServesWithoutNATS: the fleet's only NATS server shut down,
// calls keep being served (sessionless through the round-robin front and
// a sticky session), the shared rate bucket's unreadable values are
// refused, and when NATS returns the replicas share the limits again.
func TestFleetServesWithoutNATS(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	servers := fmt.Sprintf(`"up": {"url": %q}`, modernUpstream(t))
	front, reps := startOpsFleet(t, 3, s.ClientURL(), servers, opsLimits)
	cs := connect(t, reps[0].url, nil)
	caller := startOpsCaller(t, front, cs)
	caller.check(t, "NATS up", 10)

	kv := opsRatesBucket(t, s.ClientURL())
	poisonRates(t, kv)
	time.Sleep(1500 * time.Millisecond) // leases expire: the next takes read the poison
	caller.check(t, "bad values in the rate bucket", 10)

	s.Shutdown()
	for _, r := range reps {
		waitFor(t, "replica off NATS", func() bool { return !r.g.fleet.Node().Connected() })
	}
	time.Sleep(2 * time.Second)
	caller.check(t, "NATS down", 10)

	s.Restart(t)
	for _, r := range reps {
		waitFor(t, "replica back on NATS", r.g.fleet.Node().Connected)
	}
	kv = opsRatesBucket(t, s.ClientURL())
	waitFor(t, "the shared rate bucket in use again", func() bool {
		keys, err := kv.ListKeys(context.Background())
		if err != nil {
			return false
		}
		for range keys.Keys() {
			return true
		}
		return false
	})
	caller.check(t, "NATS back", 10)
	caller.halt()
	caller.check(t, "NATS back", 0)
}

// opsRatesBucket opens the fleet's shared rate bucket with its own
// connection, waiting for the replicas to have created it.
func opsRatesBucket(t *testing.T, url string) jetstream.KeyValue {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	var kv jetstream.KeyValue
	waitFor(t, "the rate bucket", func() bool {
		kv, err = js.KeyValue(context.Background(), "ops_rates")
		return err == nil
	})
	return kv
}

// poisonRates overwrites every shared rate bucket with bytes that do not
// decode.
func poisonRates(t *testing.T, kv jetstream.KeyValue) {
	t.Helper()
	keys, err := kv.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k := range keys.Keys() {
		if _, err := kv.Put(context.Background(), k, []byte("\x00not a bucket{")); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no shared rate bucket to poison")
	}
}
