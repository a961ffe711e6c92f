package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// rememberer is a stateless validator keeping its memory in the host's
// session state: a response's "secret" values are remembered, a request
// carrying one is refused. It holds nothing itself, as a recycled
// instance or another replica would not.
func rememberer() Interceptor {
	d := desc("acme/remember", Validation, "tools/call")
	d.SessionState = true
	return &Func{Desc: d, Fn: func(_ context.Context, inv *Invocation) (*Result, error) {
		var st struct {
			Seen []string `json:"seen"`
		}
		if inv.Context != nil && inv.Context.InterceptorState != nil {
			if err := json.Unmarshal(inv.Context.InterceptorState, &st); err != nil {
				return nil, err
			}
		}
		var p struct{ Secret, Pad string }
		_ = json.Unmarshal(inv.Payload, &p)
		if inv.Phase == Response {
			if p.Secret == "" {
				return Pass(), nil
			}
			st.Seen = append(st.Seen, p.Secret+p.Pad)
			res := Pass()
			res.State, _ = json.Marshal(st)
			return res, nil
		}
		if slices.Contains(st.Seen, p.Secret) {
			return Deny("secret " + p.Secret + " was read earlier in this session"), nil
		}
		return Pass(), nil
	}}
}

// TestSessionState: a SessionStore shared by two chains (two replicas, or
// an instance recycled between calls) keeps an interceptor's state per
// session: what one chain remembered refuses a request on the other; a
// different session, or a chain without a store, has no state; a state
// over MaxState is the interceptor's failure and is not kept; the memory
// store is bounded.
func TestSessionState(t *testing.T) {
	store := &MemoryStore{MaxSessions: 2}
	newChain := func(st SessionStore) *Chain {
		c, err := NewChain(Options{State: st}, Member{Interceptor: rememberer()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b, none := newChain(store), newChain(store), newChain(nil)
	run := func(c *Chain, session string, ph Phase, payload string) error {
		_, err := c.Run(context.Background(), Event{Event: "tools/call", Phase: ph, Payload: json.RawMessage(payload), Context: &Context{SessionID: session}})
		return err
	}
	if err := run(a, "s1", Response, `{"secret":"K1"}`); err != nil {
		t.Fatal(err)
	}
	var r *Refusal
	if err := run(b, "s1", Request, `{"secret":"K1"}`); !errors.As(err, &r) || !strings.Contains(err.Error(), "K1 was read earlier") {
		t.Fatalf("the other chain, same session: %v, want the refusal", err)
	}
	if err := run(b, "s2", Request, `{"secret":"K1"}`); err != nil {
		t.Fatalf("another session: %v", err)
	}
	if err := run(none, "s1", Request, `{"secret":"K1"}`); err != nil {
		t.Fatalf("a chain without a store: %v", err)
	}
	big := `{"secret":"K2","pad":"` + strings.Repeat("x", MaxState) + `"}`
	if err := run(a, "s1", Response, big); !errors.As(err, &r) || !strings.Contains(err.Error(), "session state") {
		t.Fatalf("oversized state: %v, want a failure naming the session state", err)
	}
	if err := run(b, "s1", Request, `{"secret":"K1"}`); err == nil {
		t.Fatal("the oversized update replaced the state")
	}
	for _, s := range []string{"s2", "s3"} {
		if err := run(a, s, Response, `{"secret":"K3"}`); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.Sessions(); n != 2 {
		t.Fatalf("store holds %d sessions, want its bound 2", n)
	}
	if err := run(b, "s1", Request, `{"secret":"K1"}`); err != nil {
		t.Fatalf("the least recently used session was not forgotten: %v", err)
	}
}

// TestResultStateWire: a result's state travels as the SEP's
// contextUpdates.interceptorState, top level or in the reference SDK's
// nested shape, and a descriptor's sessionState survives the wire.
func TestResultStateWire(t *testing.T) {
	res := Pass()
	res.State = json.RawMessage(`{"n":1}`)
	b, _ := json.Marshal(res)
	for _, in := range []string{string(b), `{"validation":{"valid":true},"contextUpdates":{"interceptorState":{"n":1}}}`} {
		got, err := ParseResult([]byte(in), Validation)
		if err != nil || string(got.State) != `{"n":1}` {
			t.Fatalf("%s: state %s, %v", in, got.State, err)
		}
	}
	d := desc("a", Validation, "*")
	d.SessionState = true
	db, _ := json.Marshal(d)
	back, err := ParseDescriptor(db)
	if err != nil || !back.SessionState || !strings.Contains(string(db), `"sessionState":true`) {
		t.Fatalf("%s -> %+v %v", db, back, err)
	}
}

// counter is a stateful validator counting its invocations per session
// in the host's session state, slowly enough (a sleep between its read
// and its answer) that concurrent calls overlap.
func counter() Interceptor {
	d := desc("acme/count", Validation, "tools/call")
	d.SessionState = true
	return &Func{Desc: d, Fn: func(ctx context.Context, inv *Invocation) (*Result, error) {
		var st struct{ N int }
		if err := json.Unmarshal(inv.Context.InterceptorState, &st); err != nil {
			return nil, err
		}
		time.Sleep(time.Millisecond)
		res := Pass()
		res.State = fmt.Appendf(nil, `{"n":%d}`, st.N+1)
		return res, nil
	}}
}

// TestSessionStateConcurrent: N concurrent calls of one session through
// a counting stateful interceptor count N (each read-invoke-write is
// atomic per session and interceptor), and two sessions count apart.
func TestSessionStateConcurrent(t *testing.T) {
	store := &MemoryStore{}
	c, err := NewChain(Options{State: store}, Member{Interceptor: counter()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			_, err := c.Run(context.Background(), Event{Event: "tools/call", Phase: Request, Payload: json.RawMessage(`{}`),
				Context: &Context{SessionID: fmt.Sprint("s", i%2)}})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"s0", "s1"} {
		if got := string(store.Load(s, "acme/count")); got != fmt.Sprintf(`{"n":%d}`, n) {
			t.Errorf("session %s counted %s after %d concurrent calls, want %d", s, got, n, n)
		}
	}
	if h := store.locks.held(); h != 0 {
		t.Errorf("%d locks left after the calls", h)
	}
}

// TestSessionStateWaitBounded: a call waiting for another update of the
// same state waits at most the interceptor's deadline (then it fails as
// a timeout, fail-closed), while another session's call goes through
// meanwhile.
func TestSessionStateWaitBounded(t *testing.T) {
	store := &MemoryStore{}
	c, err := NewChain(Options{State: store, Timeout: 100 * time.Millisecond}, Member{Interceptor: counter()})
	if err != nil {
		t.Fatal(err)
	}
	run := func(session string) error {
		_, err := c.Run(context.Background(), Event{Event: "tools/call", Phase: Request, Payload: json.RawMessage(`{}`), Context: &Context{SessionID: session}})
		return err
	}
	unlock, err := store.locks.Lock(context.Background(), "held\x00acme/count", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := run("other"); err != nil {
		t.Fatalf("another session waited for the held one: %v", err)
	}
	var r *Refusal
	if err := run("held"); !errors.As(err, &r) || !errors.Is(r.Failure, ErrTimeout) || !strings.Contains(err.Error(), "another call's update") {
		t.Fatalf("a call of the held session: %v, want a timeout waiting for the update before it", err)
	}
	unlock()
	if err := run("held"); err != nil {
		t.Fatalf("after the update before it ended: %v", err)
	}
	if got := string(store.Load("held", "acme/count")); got != `{"n":1}` {
		t.Fatalf("state %s, want one call counted", got)
	}
}
