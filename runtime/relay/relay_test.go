package relay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// client answers each request it is sent with answer (nil: not at all),
// on its own goroutine, and records cancellations.
type client struct {
	out       *Out
	answer    func(id int64) *jsonrpc.Response
	sendErr   error
	mu        sync.Mutex
	sent      []int64
	cancelled []int64
}

func (c *client) Send(ctx context.Context, rel jsonrpc.ID, id int64, method string, params json.RawMessage) error {
	if c.sendErr != nil {
		return c.sendErr
	}
	c.mu.Lock()
	c.sent = append(c.sent, id)
	c.mu.Unlock()
	if r := c.answer(id); r != nil {
		go c.out.Answer(id, r)
	}
	return nil
}

func (c *client) Cancelled(ctx context.Context, rel jsonrpc.ID, id int64) {
	c.mu.Lock()
	c.cancelled = append(c.cancelled, id)
	c.mu.Unlock()
}

func TestAsk(t *testing.T) {
	never := func(int64) *jsonrpc.Response { return nil }
	for _, tc := range []struct {
		name      string
		answer    func(id int64) *jsonrpc.Response
		sendErr   error
		cancel    bool
		close     bool
		want      string // result, or error message
		cancelled bool
	}{
		{"result", func(id int64) *jsonrpc.Response { return &jsonrpc.Response{Result: json.RawMessage(`{"ok":1}`)} }, nil, false, false, `{"ok":1}`, false},
		{"error", func(id int64) *jsonrpc.Response {
			return &jsonrpc.Response{Error: &jsonrpc.Error{Code: 7, Message: "declined"}}
		}, nil, false, false, "declined", false},
		{"send fails", never, errors.New("broken pipe"), false, false, "edge-mcp: forwarding to the client: broken pipe", false},
		{"cancelled", never, nil, true, false, "edge-mcp: request cancelled", true},
		{"client gone", never, nil, false, true, "edge-mcp: the downstream client disconnected", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Out{}
			c := &client{out: o, answer: tc.answer, sendErr: tc.sendErr}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel || tc.close {
				go func() {
					time.Sleep(20 * time.Millisecond)
					if tc.cancel {
						cancel()
					} else {
						o.Close()
					}
				}()
			}
			res, rerr := o.Ask(ctx, c, jsonrpc.ID{}, "roots/list", nil)
			got := string(res)
			if rerr != nil {
				got = rerr.Message
			}
			if got != tc.want || (len(c.cancelled) == 1) != tc.cancelled {
				t.Fatalf("Ask = %q, cancelled %v; want %q, cancelled %v", got, c.cancelled, tc.want, tc.cancelled)
			}
			o.mu.Lock()
			left := len(o.waiting)
			o.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d requests still waiting", left)
			}
		})
	}
	o := &Out{}
	o.Close()
	if _, rerr := o.Ask(context.Background(), &client{out: o, answer: never}, jsonrpc.ID{}, "roots/list", nil); rerr == nil {
		t.Fatal("Ask after Close was sent")
	}
}

func TestServed(t *testing.T) {
	var s Served
	ended := make(chan error, 1)
	id, _ := jsonrpc.MakeID("r1")
	s.Serve(context.Background(), id, func(ctx context.Context) {
		<-ctx.Done()
		ended <- ctx.Err()
	})
	other, _ := jsonrpc.MakeID("r2")
	s.Cancel(other) // not served: nothing happens
	select {
	case <-ended:
		t.Fatal("cancelling another id ended the request")
	case <-time.After(20 * time.Millisecond):
	}
	s.Cancel(id)
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("ended with %v", err)
	}
}

type call struct {
	sess  string // "": none
	start time.Time
}

func TestNewest(t *testing.T) {
	t0 := time.Now()
	a1, a2 := &call{"a", t0}, &call{"a", t0.Add(time.Second)}
	b := &call{"b", t0}
	orphan := &call{"", t0.Add(time.Hour)}
	of := func(c *call) (string, time.Time, bool) { return c.sess, c.start, c.sess != "" }
	for _, tc := range []struct {
		name     string
		calls    map[int64]*call
		want     *call
		sessions int
	}{
		{"none", nil, nil, 0},
		{"only orphans", map[int64]*call{1: orphan}, nil, 0},
		{"newest of one session", map[int64]*call{1: a1, 2: a2, 3: orphan}, a2, 1},
		{"two sessions", map[int64]*call{1: a1, 2: b}, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n := Newest(tc.calls, of)
			if got != tc.want || n != tc.sessions {
				t.Fatalf("Newest = %v, %d; want %v, %d", got, n, tc.want, tc.sessions)
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perClient bool
		want      []string
	}{
		{"shared", false, []string{"this sampling request", `(2 client sessions have calls in flight to it)`, `set "session": "per_client" for server "up"`}},
		{"per client", true, []string{"this sampling request", "the gateway's own session"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rerr, attrs := Refusal("sampling/createMessage", "up", Unrelated(2, 0), tc.perClient)
			for _, w := range tc.want {
				if !strings.Contains(rerr.Message, w) {
					t.Errorf("%q lacks %q", rerr.Message, w)
				}
			}
			if hasFix := len(attrs) == 6; hasFix == tc.perClient {
				t.Errorf("log attributes %v: a fix only when not per_client", attrs)
			}
		})
	}
	for n, want := range map[int]string{0: "no client session is connected", 1: "", 3: "no client call is in flight to it and 3 client sessions are connected"} {
		if got := Unrelated(0, n); got != want {
			t.Errorf("Unrelated(0, %d) = %q, want %q", n, got, want)
		}
	}
}

// TestSubscriptions: the first subscriber and the last one are told; a
// session that goes is forgotten everywhere.
func TestSubscriptions(t *testing.T) {
	var subs Subscriptions[string]
	if subs.Subscribed("a", "file:///x") || len(subs.Subscribers("file:///x")) != 0 || subs.Unsubscribe("a", "file:///x") {
		t.Fatal("the zero value has subscriptions")
	}
	if !subs.Subscribe("a", "file:///x") || subs.Subscribe("b", "file:///x") || subs.Subscribe("a", "file:///x") || !subs.Subscribe("a", "file:///y") {
		t.Fatal("Subscribe: only each URI's first subscriber is first")
	}
	if got := subs.Subscribers("file:///x"); len(got) != 2 || !subs.Subscribed("b", "file:///x") {
		t.Fatalf("subscribers of x: %v", got)
	}
	if subs.Unsubscribe("a", "file:///x") || subs.Unsubscribe("a", "file:///x") {
		t.Fatal("Unsubscribe: a was not x's last subscriber, and is not one any more")
	}
	got := subs.Forget("b")
	if len(got) != 1 || got[0] != "file:///x" || subs.Subscribed("b", "file:///x") {
		t.Fatalf("Forget(b) = %v, want x, whose last subscriber it was", got)
	}
	if !subs.Unsubscribe("a", "file:///y") {
		t.Fatal("a was y's last subscriber")
	}
}
