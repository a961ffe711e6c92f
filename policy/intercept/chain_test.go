package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func desc(name string, t Type, events ...string) Descriptor {
	return Descriptor{Name: name, Type: t, Hooks: []Hook{{Events: events, Phase: Request}, {Events: events, Phase: Response}}}
}

// validator is a Go validator refusing payloads that contain deny.
func validator(name, deny string, events ...string) *Func {
	return &Func{Desc: desc(name, Validation, events...), Fn: func(_ context.Context, inv *Invocation) (*Result, error) {
		if deny != "" && strings.Contains(string(inv.Payload), deny) {
			return Deny(name + " saw " + deny), nil
		}
		return Pass(), nil
	}}
}

// replacer is a Go mutator replacing old with new in the payload's text.
func replacer(name, old, new string, events ...string) *Func {
	return &Func{Desc: desc(name, Mutation, events...), Fn: func(_ context.Context, inv *Invocation) (*Result, error) {
		s := string(inv.Payload)
		if !strings.Contains(s, old) {
			return Keep(), nil
		}
		return Replace(json.RawMessage(strings.ReplaceAll(s, old, new))), nil
	}}
}

func failing(name string, t Type, err error) *Func {
	return &Func{Desc: desc(name, t, "*"), Fn: func(context.Context, *Invocation) (*Result, error) { return nil, err }}
}

func ptr[T any](v T) *T { return &v }

// checked gives ev a Check that wants "n" a number (the gateway's is a
// tool's inputSchema).
func checked(ev Event) Event {
	ev.Check = func(p json.RawMessage) error {
		var v struct{ N json.RawMessage }
		if err := json.Unmarshal(p, &v); err != nil || kind(v.N) != "number" {
			return errors.New(`"n" must be a number`)
		}
		return nil
	}
	return ev
}

func TestChain(t *testing.T) {
	call := func(payload string) Event {
		return Event{Event: "tools/call", Phase: Request, Payload: json.RawMessage(payload)}
	}
	resp := func(payload string) Event {
		return Event{Event: "tools/call", Phase: Response, Payload: json.RawMessage(payload)}
	}
	tests := []struct {
		name    string
		members []Member
		ev      Event
		refuser string // "" = allowed
		reason  string // substring of the error
		payload string // final payload when allowed
		shadows int
	}{
		{name: "no interceptors", ev: call(`{"a":1}`), payload: `{"a":1}`},
		{name: "validator passes", members: []Member{{Interceptor: validator("v", "x", "tools/call")}}, ev: call(`{"a":1}`), payload: `{"a":1}`},
		{name: "validator refuses", members: []Member{{Interceptor: validator("v", "secret", "tools/call")}}, ev: call(`{"a":"secret"}`), refuser: "v", reason: "v saw secret"},
		{name: "other event not hooked", members: []Member{{Interceptor: validator("v", "secret", "prompts/get")}}, ev: call(`{"a":"secret"}`), payload: `{"a":"secret"}`},
		{name: "namespace wildcard", members: []Member{{Interceptor: validator("v", "secret", "tools/*")}}, ev: call(`{"a":"secret"}`), refuser: "v"},
		{name: "request: mutate then validate", members: []Member{
			{Interceptor: validator("v", "secret", "tools/call")},
			{Interceptor: replacer("m", "secret", "[r]", "tools/call")},
		}, ev: call(`{"a":"secret"}`), payload: `{"a":"[r]"}`},
		{name: "response: validate then mutate", members: []Member{
			{Interceptor: validator("v", "secret", "tools/call")},
			{Interceptor: replacer("m", "secret", "[r]", "tools/call")},
		}, ev: resp(`{"a":"secret"}`), refuser: "v"},
		{name: "mutators by priority then name", members: []Member{
			{Interceptor: replacer("b", "x", "b", "*")},
			{Interceptor: replacer("a", "x", "a", "*")},
			{Interceptor: replacer("c", "x", "c", "*"), Priority: &Priority{Request: -5}},
		}, ev: call(`{"a":"x"}`), payload: `{"a":"c"}`},
		{name: "audit validator never blocks", members: []Member{{Interceptor: validator("v", "secret", "*"), Mode: Audit}}, ev: call(`{"a":"secret"}`), payload: `{"a":"secret"}`},
		{name: "audit mutator is shadowed", members: []Member{{Interceptor: replacer("m", "secret", "[r]", "*"), Mode: Audit}}, ev: call(`{"a":"secret"}`), payload: `{"a":"secret"}`, shadows: 1},
		{name: "failure is fail-closed by default", members: []Member{{Interceptor: failing("f", Validation, errors.New("boom"))}}, ev: call(`{}`), refuser: "f", reason: "boom (fail-closed)"},
		{name: "fail-open failure is skipped", members: []Member{{Interceptor: failing("f", Validation, errors.New("boom")), FailOpen: ptr(true)}}, ev: call(`{}`), payload: `{}`},
		{name: "audit failure never blocks", members: []Member{{Interceptor: failing("f", Mutation, errors.New("boom")), Mode: Audit}}, ev: call(`{}`), payload: `{}`},
		{name: "mutator failure halts before validation", members: []Member{
			{Interceptor: failing("f", Mutation, errors.New("boom"))},
			{Interceptor: validator("v", "", "*")},
		}, ev: call(`{}`), refuser: "f"},
		{name: "mutator of the wrong shape", members: []Member{{Interceptor: replacer("m", `{"a"`, `{"arguments":[1],"a"`, "*")}}, ev: call(`{"a":1}`), refuser: "m", reason: `"arguments" is a JSON array, want object`},
		{name: "mutator of the wrong shape, fail-open", members: []Member{{Interceptor: replacer("m", `{"a"`, `["a"`, "*"), FailOpen: ptr(true)}}, ev: call(`{"a":1}`), payload: `{"a":1}`},
		{name: "mutated payload the event's check refuses", members: []Member{
			{Interceptor: replacer("a", "1", "2", "*")},
			{Interceptor: replacer("b", "2", `"two"`, "*")},
		}, ev: checked(call(`{"n":1}`)), refuser: "b", reason: `"n" must be a number`},
		{name: "mutated payload the event's check refuses, fail-open", members: []Member{
			{Interceptor: replacer("a", "1", "2", "*")},
			{Interceptor: replacer("b", "2", `"two"`, "*"), FailOpen: ptr(true)},
		}, ev: checked(call(`{"n":1}`)), payload: `{"n":2}`},
		{name: "several refuse: first by name, others named", members: []Member{
			{Interceptor: validator("z", "s", "*")},
			{Interceptor: validator("y", "s", "*")},
		}, ev: call(`{"s":1}`), refuser: "y", reason: `also refused by "z"`},
		{name: "warning does not block", members: []Member{{Interceptor: &Func{Desc: desc("w", Validation, "*"), Fn: func(context.Context, *Invocation) (*Result, error) {
			return &Result{Valid: false, Severity: Warn, Messages: []Message{{Message: "hm", Severity: Warn}}}, nil
		}}}}, ev: call(`{}`), payload: `{}`},
		{name: "panic is a failure", members: []Member{{Interceptor: &Func{Desc: desc("p", Validation, "*"), Fn: func(context.Context, *Invocation) (*Result, error) { panic("oops") }}}}, ev: call(`{}`), refuser: "p", reason: "panicked: oops"},
		{name: "nil result is a failure", members: []Member{{Interceptor: &Func{Desc: desc("n", Validation, "*"), Fn: func(context.Context, *Invocation) (*Result, error) { return nil, nil }}}}, ev: call(`{}`), refuser: "n", reason: "bad result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewChain(Options{}, tt.members...)
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Run(context.Background(), tt.ev)
			if tt.refuser != "" {
				var r *Refusal
				if !errors.As(err, &r) || r.Interceptor != tt.refuser {
					t.Fatalf("err = %v, want a refusal by %q", err, tt.refuser)
				}
				if !strings.Contains(err.Error(), tt.reason) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.refuser)) {
					t.Fatalf("err = %q, want it to name %q and say %q", err, tt.refuser, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want allowed", err)
			}
			if string(out.Payload) != tt.payload {
				t.Fatalf("payload = %s, want %s", out.Payload, tt.payload)
			}
			if len(out.Shadows) != tt.shadows {
				t.Fatalf("shadows = %d, want %d", len(out.Shadows), tt.shadows)
			}
		})
	}
}

// TestChainDeadline: an interceptor that hangs past its deadline (and
// ignores its context) fails with ErrTimeout and the chain answers.
func TestChainDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	hang := &Func{Desc: desc("hang", Validation, "*"), Fn: func(context.Context, *Invocation) (*Result, error) {
		<-release
		return Pass(), nil
	}}
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("failOpen=%v", open), func(t *testing.T) {
			c, err := NewChain(Options{}, Member{Interceptor: hang, Timeout: 20 * time.Millisecond, FailOpen: &open})
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Run(context.Background(), Event{Event: "x/y", Phase: Request, Payload: json.RawMessage(`{}`)})
			if open {
				if err != nil || len(out.Failures) != 1 || !errors.Is(out.Failures[0], ErrTimeout) {
					t.Fatalf("err = %v, failures = %v; want allowed with one timeout", err, out.Failures)
				}
				return
			}
			var r *Refusal
			if !errors.As(err, &r) || r.Failure == nil || !errors.Is(r.Failure, ErrTimeout) {
				t.Fatalf("err = %v, want a fail-closed timeout refusal", err)
			}
			if got := c.Counters("hang").Failures.Load(); got != 1 {
				t.Fatalf("failures = %d, want 1", got)
			}
		})
	}
}

// TestValidatorsRunConcurrently: four validators each wait until all four
// have started; run in sequence they would deadlock into their deadline.
func TestValidatorsRunConcurrently(t *testing.T) {
	var started sync.WaitGroup
	started.Add(4)
	var members []Member
	for i := range 4 {
		members = append(members, Member{Timeout: 10 * time.Second, Interceptor: &Func{Desc: desc(fmt.Sprint("v", i), Validation, "*"), Fn: func(ctx context.Context, _ *Invocation) (*Result, error) {
			started.Done()
			started.Wait()
			return Pass(), nil
		}}})
	}
	c, err := NewChain(Options{}, members...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Run(context.Background(), Event{Event: "tools/call", Phase: Request, Payload: json.RawMessage(`{}`)})
	if err != nil || len(out.Results) != 4 {
		t.Fatalf("err = %v, results = %d", err, len(out.Results))
	}
}

func TestNewChainRejects(t *testing.T) {
	tests := []struct {
		name    string
		members []Member
		want    string
	}{
		{"duplicate", []Member{{Interceptor: validator("a", "", "*")}, {Interceptor: validator("a", "", "*")}}, "twice"},
		{"nil", []Member{{}}, "no interceptor"},
		{"bad type", []Member{{Interceptor: &Func{Desc: Descriptor{Name: "x", Type: "other"}}}}, "want validation or mutation"},
		{"no name", []Member{{Interceptor: &Func{Desc: Descriptor{Type: Validation}}}}, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewChain(Options{}, tt.members...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestChainHammer runs many events concurrently through one chain with a
// stateful mutator and validators, under the race detector.
func TestChainHammer(t *testing.T) {
	var n atomic.Int64
	counter := &Func{Desc: desc("count", Mutation, "*"), Fn: func(_ context.Context, inv *Invocation) (*Result, error) {
		n.Add(1)
		return Replace(json.RawMessage(strings.Replace(string(inv.Payload), "x", "y", 1))), nil
	}}
	c, err := NewChain(Options{},
		Member{Interceptor: counter},
		Member{Interceptor: validator("v1", "x", "*")},
		Member{Interceptor: validator("v2", "forbidden", "*")},
		Member{Interceptor: failing("f", Validation, errors.New("boom")), FailOpen: ptr(true)},
	)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, per = 16, 200
	var wg sync.WaitGroup
	var refused atomic.Int64
	for g := range goroutines {
		wg.Go(func() {
			for i := range per {
				payload := fmt.Sprintf(`{"g":%d,"i":%d,"s":"x"}`, g, i)
				if i%10 == 0 {
					payload = `{"s":"forbidden"}`
				}
				out, err := c.Run(context.Background(), Event{Event: "tools/call", Phase: Request, Payload: json.RawMessage(payload)})
				if err != nil {
					refused.Add(1)
					continue
				}
				if strings.Contains(string(out.Payload), `"x"`) {
					t.Errorf("payload %s still has x", out.Payload)
				}
			}
		})
	}
	wg.Wait()
	if got, want := refused.Load(), int64(goroutines*per/10); got != want {
		t.Fatalf("refused %d, want %d", got, want)
	}
	if got := n.Load(); got != goroutines*per {
		t.Fatalf("mutator ran %d times, want %d", got, goroutines*per)
	}
	if got := c.Counters("f").Failures.Load(); got != goroutines*per {
		t.Fatalf("failures %d, want %d", got, goroutines*per)
	}
}

func TestMatchEvent(t *testing.T) {
	tests := []struct {
		pattern, event string
		ph             Phase
		want           bool
	}{
		{"tools/call", "tools/call", Request, true},
		{"tools/call", "tools/list", Request, false},
		{"*", "anything/at-all", Response, true},
		{"*/request", "tools/call", Request, true},
		{"*/request", "tools/call", Response, false},
		{"*/response", "tools/call", Response, true},
		{"tools/*", "tools/call", Request, true},
		{"tools/*", "toolsx/call", Request, false},
		{"tools/*", "tools", Request, false},
		{"resources/*", "resources/read", Response, true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.event, func(t *testing.T) {
			if got := MatchEvent(tt.pattern, tt.event, tt.ph); got != tt.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}

// TestChainHooks: Hooks says whether any member hooks an event, in
// either phase, through wildcards too; a nil chain hooks nothing.
func TestChainHooks(t *testing.T) {
	var none *Chain
	if none.Hooks("tools/list") {
		t.Fatal("a nil chain hooks tools/list")
	}
	c, err := NewChain(Options{}, Member{Interceptor: validator("v", "", "resources/*")}, Member{Interceptor: validator("w", "", "tools/call")})
	if err != nil {
		t.Fatal(err)
	}
	for ev, want := range map[string]bool{"resources/templates/list": true, "resources/subscribe": true, "tools/call": true, "tools/list": false, "prompts/list": false} {
		if got := c.Hooks(ev); got != want {
			t.Errorf("Hooks(%q) = %v, want %v", ev, got, want)
		}
	}
}

// TestCountersP50: the median of the last invocations, the oldest
// forgotten past 256; 0 before the first.
func TestCountersP50(t *testing.T) {
	var c Counters
	if c.P50() != 0 {
		t.Fatal("P50 before any invocation")
	}
	for _, ms := range []int{5, 1, 3, 2, 4} {
		c.observe(time.Duration(ms) * time.Millisecond)
	}
	if got := c.P50(); got != 3*time.Millisecond {
		t.Fatalf("P50 = %v, want 3ms", got)
	}
	for range latencySamples {
		c.observe(time.Microsecond)
	}
	if got := c.P50(); got != time.Microsecond {
		t.Fatalf("P50 = %v after 256 newer samples, want 1µs", got)
	}
}

// TestObserve: Options.Observe is told every invocation's duration by
// interceptor name, failures included, and the member's P50 still counts.
func TestObserve(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	c, err := NewChain(Options{Observe: func(name string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if d > 0 {
			seen[name]++
		}
	}}, Member{Interceptor: validator("v", "", "tools/call")}, Member{Interceptor: failing("f", Validation, errors.New("down")), FailOpen: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Run(context.Background(), Event{Event: "tools/call", Phase: Request, Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if seen["v"] != 3 || seen["f"] != 3 {
		t.Fatalf("observed %v, want 3 each", seen)
	}
	if c.Counters("v").P50() <= 0 {
		t.Fatal("no P50")
	}
}
