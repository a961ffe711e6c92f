package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// callTool runs one tool_call through a single-module chain.
func callTool(t testing.TB, m *Module, onErr OnError, tool string) Decision {
	t.Helper()
	d, err := chainOf(t, onErr, m).ToolCall(context.Background(), CallInput{
		Client: Client{ID: "alice", Name: "claude"}, Server: "srv", Tool: tool, Arguments: []byte(`{"q":"x"}`),
	})
	if err != nil {
		t.Fatalf("ToolCall(%s): %v", tool, err)
	}
	return d
}

// expectRecovers checks that a module whose instance just failed answers
// the next call normally (a fresh instance replaced the broken one).
func expectRecovers(t *testing.T, m *Module) {
	t.Helper()
	if d := callTool(t, m, OnErrorDeny, "ok"); d.Action != Allow {
		t.Fatalf("call after failure: %+v", d)
	}
	waitFor(t, "pool refilled", 5*time.Second, func() bool { return m.Stats().Instances == int64(m.opts.PoolSize) })
}

func TestGoGuestInfiniteLoop(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1, Timeout: 50 * time.Millisecond})
	start := time.Now()
	d := callTool(t, m, OnErrorDeny, "loop")
	if d.Action != Deny || !strings.Contains(d.Reason, "exceeded its deadline") {
		t.Fatalf("decision %+v", d)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("deadline took %v to fire", el)
	}
	if d := callTool(t, m, OnErrorAllow, "loop"); d.Action != Allow {
		t.Fatalf("on_error allow: %+v", d)
	}
	if s := m.Stats(); s.Recycled != 2 || s.Failures != 2 {
		t.Fatalf("stats %+v", s)
	}
	expectRecovers(t, m)
}

func TestGoGuestMemoryBomb(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1, MemoryMB: 16})
	_, err := m.call(context.Background(), HookToolCall, []byte(`{"server":"s","tool":"bomb","arguments":{}}`))
	if !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("err = %v, want ErrMemoryLimit", err)
	}
	if len(testLog.find("out of memory", "module=gohostile", "stream=stderr")) == 0 {
		t.Fatal("the guest's out-of-memory message was not logged with its module name")
	}
	expectRecovers(t, m)
}

func TestGoGuestPanic(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1})
	d := callTool(t, m, OnErrorDeny, "panic")
	if d.Action != Deny || !strings.Contains(d.Reason, "trapped") {
		t.Fatalf("decision %+v", d)
	}
	if len(testLog.find("hostile module panics on purpose", "module=gohostile")) == 0 {
		t.Fatal("panic message not logged")
	}
	expectRecovers(t, m)
}

func TestGoGuestExit(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1})
	_, err := m.call(context.Background(), HookToolCall, []byte(`{"server":"s","tool":"exit"}`))
	if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "exit_code(3)") {
		t.Fatalf("err = %v", err)
	}
	expectRecovers(t, m)
}

func TestGuestLogIsCapped(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1})
	if d := callTool(t, m, OnErrorDeny, "chatty"); d.Action != Allow {
		t.Fatalf("decision %+v", d)
	}
	lines := testLog.find("chatty guest line", "module=gohostile")
	if len(lines) == 0 || len(lines) > guestLogBudget/18 {
		t.Fatalf("%d log lines for 1000 guest lines; want a budget-capped number", len(lines))
	}
	if len(testLog.find("policy module output dropped", "module=gohostile")) == 0 {
		t.Fatal("dropped output was not reported")
	}
}

func TestConfigureRejected(t *testing.T) {
	_, err := testEngine.Load(context.Background(), "picky", guestWasm(t, "gohostile"), ModuleOptions{Config: []byte(`{"reject":true}`)})
	if err == nil || !strings.Contains(err.Error(), "configure rejected the config: configuration rejected on purpose") {
		t.Fatalf("err = %v", err)
	}
}

func TestGuestErrorAndBadShape(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1})
	orig := textResult("secret")
	for _, tool := range []string{"fail", "badshape"} {
		for _, onErr := range []OnError{OnErrorDeny, OnErrorAllow} {
			res, err := chainOf(t, onErr, m).ToolResult(context.Background(), ResultInput{Server: "s", Tool: tool, Result: orig})
			if err != nil {
				t.Fatal(err)
			}
			if onErr == OnErrorAllow {
				if string(res) != string(orig) {
					t.Fatalf("%s/allow: result %s", tool, res)
				}
				continue
			}
			var r struct {
				Content []struct{ Text string }
				IsError bool
			}
			if err := json.Unmarshal(res, &r); err != nil || !r.IsError || len(r.Content) != 1 || !strings.Contains(r.Content[0].Text, `policy "gohostile" failed`) {
				t.Fatalf("%s/deny: result %s", tool, res)
			}
			if strings.Contains(string(res), "secret") {
				t.Fatal("fail-closed result leaked the original")
			}
		}
	}
	// A guest's error report leaves the instance in service; bad output
	// does not. Both count as failures.
	s := m.Stats()
	if s.Failures != 4 || s.Recycled != 0 {
		t.Fatalf("stats %+v", s)
	}
	if !strings.Contains(s.LastError, "content must be an array") {
		t.Fatalf("last error %q", s.LastError)
	}
}

func TestUnhealthyModuleFailsFastThenRecovers(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1, Timeout: 20 * time.Millisecond, FailureThreshold: 2})
	callTool(t, m, OnErrorDeny, "loop")
	callTool(t, m, OnErrorDeny, "loop")
	if m.Stats().Healthy {
		t.Fatal("module still healthy after two consecutive failures")
	}
	start := time.Now()
	_, err := m.call(context.Background(), HookToolCall, []byte(`{"tool":"ok"}`))
	if !errors.Is(err, ErrUnhealthy) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("err = %v after %v, want a fast ErrUnhealthy", err, time.Since(start))
	}
	waitFor(t, "trial call to succeed", 5*time.Second, func() bool {
		_, err := m.call(context.Background(), HookToolCall, []byte(`{"tool":"ok"}`))
		return err == nil
	})
	if s := m.Stats(); !s.Healthy || s.ConsecutiveFailures != 0 {
		t.Fatalf("stats after recovery %+v", s)
	}
}

func TestCallerCancellation(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1, Timeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	d, err := chainOf(t, OnErrorAllow, m).ToolCall(ctx, CallInput{Server: "s", Tool: "loop"})
	if !errors.Is(err, context.DeadlineExceeded) || d.Action != Deny {
		t.Fatalf("decision %+v, err %v; want deny and the context's error", d, err)
	}
	if s := m.Stats(); s.Failures != 0 {
		t.Fatalf("a caller's cancellation was counted against the module: %+v", s)
	}
	expectRecovers(t, m)
}

func TestClientIdentityReachesGuest(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1})
	if d := callTool(t, m, OnErrorDeny, "client"); d.Reason != "alice|claude|srv" {
		t.Fatalf("guest saw %q", d.Reason)
	}
}

func TestPoolBusy(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1, Timeout: 300 * time.Millisecond, MaxWait: 20 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		_, err := m.call(context.Background(), HookToolCall, []byte(`{"tool":"loop"}`))
		done <- err
	}()
	waitFor(t, "instance taken", 5*time.Second, func() bool { return len(m.free) == 0 })
	start := time.Now()
	_, err := m.call(context.Background(), HookToolCall, []byte(`{"tool":"ok"}`))
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("waited %v, MaxWait is 20ms", el)
	}
	if err := <-done; !errors.Is(err, ErrTimeout) {
		t.Fatalf("looping call: %v", err)
	}
}

func TestRecycleAfterCalls(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1, RecycleAfterCalls: 3})
	var got []string
	for range 7 {
		got = append(got, callTool(t, m, OnErrorDeny, "count").Reason)
		// The replacement starts in the background; wait for it so each
		// call lands on a known instance.
		waitFor(t, "instance back", 5*time.Second, func() bool { return len(m.free) == 1 })
	}
	if want := "1 2 3 1 2 3 1"; strings.Join(got, " ") != want {
		t.Fatalf("per-instance call counts %q, want %q", got, want)
	}
	if s := m.Stats(); s.Recycled != 2 {
		t.Fatalf("recycled %d, want 2", s.Recycled)
	}
}

func TestRecycleOnMemoryHighWater(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1, MemoryMB: 16, MaxInput: 16 << 20, MaxOutput: 16 << 20})
	big := fmt.Sprintf(`{"blob":%q}`, strings.Repeat("x", 5<<20))
	d, err := chainOf(t, OnErrorDeny, m).ToolCall(context.Background(), CallInput{Server: "s", Tool: "echo", Arguments: []byte(big)})
	if err != nil || d.Action != Allow || string(d.Arguments) != big {
		t.Fatalf("echo of a big argument: %v, %v, %d bytes", d.Action, err, len(d.Arguments))
	}
	if s := m.Stats(); s.Recycled != 1 || s.Failures != 0 {
		t.Fatalf("stats %+v: an instance past 3/4 of its memory cap must be replaced", s)
	}
}

func TestNoLeaks(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	engBefore := testEngine.Instances()
	m, err := testEngine.Load(context.Background(), "leaky", guestWasm(t, "gohostile"), ModuleOptions{PoolSize: 3, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := testEngine.Instances() - engBefore; got != 3 {
		t.Fatalf("%d instances after load, want 3", got)
	}
	c := chainOf(t, OnErrorAllow, m)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool := []string{"panic", "ok", "loop", "ok"}[i%4]
			if _, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: tool}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s.Instances != 0 {
		t.Fatalf("%d instances open after Close", s.Instances)
	}
	if got := testEngine.Instances(); got != engBefore {
		t.Fatalf("engine has %d instances, want %d", got, engBefore)
	}
	if _, err := m.call(context.Background(), HookToolCall, []byte(`{}`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
	waitFor(t, "goroutines to settle", 5*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines+1 })
}

// TestHammer drives one pooled module from many goroutines (run it with
// -race). Every call must get its own answer back, including while
// instances are being replaced after panics.
func TestHammer(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 4, MaxWait: 10 * time.Second, FailureThreshold: 1000})
	c := chainOf(t, OnErrorAllow, m)
	const workers, calls = 8, 150
	var wg sync.WaitGroup
	var panics atomic.Int64
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				tool := "echo"
				if i%50 == 49 {
					tool = "panic"
					panics.Add(1)
				}
				args := fmt.Sprintf(`{"worker":%d,"call":%d,"pad":%q}`, g, i, strings.Repeat("p", i*7))
				d, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: tool, Arguments: []byte(args)})
				if err != nil {
					t.Error(err)
					return
				}
				if tool == "echo" && string(d.Arguments) != args {
					t.Errorf("worker %d call %d got %s", g, i, d.Arguments)
					return
				}
				if tool == "panic" && (d.Action != Allow || d.Arguments != nil) {
					t.Errorf("panic with on_error allow: %+v", d)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := m.Stats()
	if s.Calls != workers*calls || s.Failures != uint64(panics.Load()) {
		t.Fatalf("stats %+v, %d panics", s, panics.Load())
	}
	waitFor(t, "pool refilled", 10*time.Second, func() bool { return m.Stats().Instances == 4 })
}

// TestGuestMemoryStaysFlat checks that a Go guest's heap does not creep up
// over many calls that make pointer-rich garbage (a parsed document per
// call). The SDK yields to the Go scheduler after every call so the guest's
// background GC workers get to run; without that, this guest's memory
// climbs to the cap.
func TestGuestMemoryStaysFlat(t *testing.T) {
	m := load(t, "gohostile", ModuleOptions{PoolSize: 1, MemoryMB: 16, RecycleAfterCalls: -1})
	c := chainOf(t, OnErrorDeny, m)
	var items []string
	for i := range 30 {
		items = append(items, fmt.Sprintf(`{"id":%d,"name":"item %d","tags":["a","b"]}`, i, i))
	}
	args := []byte(`{"items":[` + strings.Join(items, ",") + `]}`)
	const calls = 5000
	for i := range calls {
		d, err := c.ToolCall(context.Background(), CallInput{Server: "s", Tool: "parse", Arguments: args})
		if err != nil || len(d.Arguments) != len(args) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	s := m.Stats()
	if s.Recycled != 0 || s.PeakMemory > 12<<20 {
		t.Fatalf("guest memory grew: peak %d bytes, %d recycles", s.PeakMemory, s.Recycled)
	}
	t.Logf("peak guest memory after %d calls: %d KiB", calls, s.PeakMemory>>10)
}
