package policy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// Hand-assembled hostile modules: valid ABI 1.0 policies (one tool_call
// hook that allows) with one hostile part.
var (
	// spin loops forever.
	spin = []byte{w.OpLoop, w.OpBlockTypeVoid, w.OpBr, 0, w.OpEnd}
	// growForever grows memory one page at a time, ignoring failures.
	growForever = w.Seq([]byte{w.OpLoop, w.OpBlockTypeVoid}, w.I32Const(1),
		[]byte{w.OpMemoryGrow, 0, w.OpDrop, w.OpBr, 0, w.OpEnd})
	// growUntilRefused grows memory one page at a time until memory.grow
	// fails (returns -1), then traps.
	growUntilRefused = w.Seq([]byte{w.OpLoop, w.OpBlockTypeVoid}, w.I32Const(1),
		[]byte{w.OpMemoryGrow, 0}, w.I32Const(1), []byte{w.OpI32Add, w.OpBrIf, 0, w.OpEnd, w.OpUnreachable})
	allowAll = w.Packed(0, 0)
)

func hostileWasm(variant string) []byte {
	hook := allowAll
	switch variant {
	case "grow-forever":
		hook = w.Seq(growForever, allowAll)
	case "grow-until-refused":
		hook = growUntilRefused
	}
	a := w.PolicyModule(1<<16, map[string][]byte{"edge_hook_tool_call": hook})
	switch variant {
	case "start-loop":
		a.Funcs = append(a.Funcs, w.Func{Body: spin})
		a.Start, a.HasStart = uint32(len(a.Funcs)-1), true
	case "initialize-loop":
		a.Funcs = append(a.Funcs, w.Func{Body: spin, Export: "_initialize"})
	case "configure-loop":
		a.Funcs = append(a.Funcs, w.Func{Params: w.SigI32I32, Results: w.SigI64, Body: w.Seq(spin, allowAll), Export: "edge_configure"})
	}
	return a.Bytes()
}

// engines returns the shared metered engine and a fresh one that enforces
// deadlines with wazero's CloseOnContextDone.
func engines(t *testing.T) map[string]*Engine {
	t.Helper()
	ctx := context.Background()
	e, err := NewEngine(ctx, EngineConfig{CloseOnContextDone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(ctx) })
	return map[string]*Engine{"metered": testEngine, "closeOnContextDone": e}
}

// within runs f on a goroutine and fails the test if it has not returned
// after limit (a generous bound for a loaded machine; without the fixes
// these calls took seconds or never returned).
func within[T any](t *testing.T, limit time.Duration, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	start := time.Now()
	go func() { done <- f() }()
	select {
	case v := <-done:
		t.Logf("%s returned after %v", what, time.Since(start).Round(time.Millisecond))
		return v
	case <-time.After(limit):
		t.Fatalf("%s still running after %v", what, limit)
		panic("unreachable")
	}
}

func TestHostileStartTimesOut(t *testing.T) {
	for engName, eng := range engines(t) {
		for _, variant := range []string{"start-loop", "initialize-loop", "configure-loop"} {
			t.Run(engName+"/"+variant, func(t *testing.T) {
				err := within(t, 3*time.Second, "Load", func() error {
					m, err := eng.Load(context.Background(), variant, hostileWasm(variant), ModuleOptions{PoolSize: 1, InitTimeout: 100 * time.Millisecond})
					if err == nil {
						m.Close()
					}
					return err
				})
				var le *LoadError
				if !errors.As(err, &le) || le.Kind != ErrInitTimeout || !errors.Is(err, ErrInitTimeout) {
					t.Fatalf("err = %v (%#v), want a *LoadError of kind ErrInitTimeout", err, le)
				}
				t.Log(err)
			})
		}
	}
}

// TestCloseStopsStuckGuests: closing a module stops its calls and its
// instance starts in flight, and closing the engine stops loads in flight,
// however long their deadlines.
func TestCloseStopsStuckGuests(t *testing.T) {
	for engName, eng := range engines(t) {
		t.Run(engName+"/module", func(t *testing.T) {
			m, err := eng.Load(context.Background(), "spinner", hostileWasm("grow-forever"), ModuleOptions{PoolSize: 1, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := m.call(context.Background(), HookToolCall, []byte(`{}`))
				errc <- err
			}()
			waitFor(t, "the call to take the instance", 5*time.Second, func() bool { return len(m.free) == 0 })
			time.Sleep(20 * time.Millisecond)
			within(t, 3*time.Second, "Module.Close", func() error { return m.Close() })
			if err := <-errc; !errors.Is(err, ErrClosed) {
				t.Fatalf("stuck call ended with %v, want ErrClosed", err)
			}
			if s := m.Stats(); s.Instances != 0 || s.Memory != 0 {
				t.Fatalf("after Close: %d instances, %d bytes of memory", s.Instances, s.Memory)
			}
		})
	}
	t.Run("engine", func(t *testing.T) {
		ctx := context.Background()
		for _, cood := range []bool{false, true} {
			e, err := NewEngine(ctx, EngineConfig{CloseOnContextDone: cood})
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := e.Load(ctx, "stuck", hostileWasm("start-loop"), ModuleOptions{PoolSize: 1, InitTimeout: time.Minute})
				errc <- err
			}()
			time.Sleep(200 * time.Millisecond) // compiled and spinning in its start function
			within(t, 3*time.Second, "Engine.Close", func() error { return e.Close(ctx) })
			err = within(t, 3*time.Second, "the stuck Load", func() error { return <-errc })
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("CloseOnContextDone=%v: Load ended with %v, want ErrClosed", cood, err)
			}
		}
	})
}

// TestHostileGrowLoopMeetsDeadline: a guest growing its memory page by
// page is stopped at its deadline like any other loop, and its memory
// never passes the module's limit.
func TestHostileGrowLoopMeetsDeadline(t *testing.T) {
	for engName, eng := range engines(t) {
		t.Run(engName, func(t *testing.T) {
			m, err := eng.Load(context.Background(), "grower", hostileWasm("grow-forever"), ModuleOptions{PoolSize: 1, MemoryMB: 256, Timeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			err = within(t, 2*time.Second, "a 50 ms call", func() error {
				_, err := m.call(context.Background(), HookToolCall, []byte(`{}`))
				return err
			})
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			if s := m.Stats(); s.MemoryHighWater > 256<<20 {
				t.Fatalf("memory high water %d bytes, limit %d", s.MemoryHighWater, 256<<20)
			}
		})
	}
}

// TestMemoryLimitCoversThePool: memory_mb bounds the module's instances
// together. Four instances growing at once share 16 MiB; each call fails
// with ErrMemoryLimit when the module's memory runs out.
func TestMemoryLimitCoversThePool(t *testing.T) {
	const limit = 16 << 20
	m, err := testEngine.Load(context.Background(), "hogs", hostileWasm("grow-until-refused"),
		// InitTimeout: the background refills checked below start under
		// whatever load the suite puts on the machine (a loaded CI run
		// took over the default 1 s, and a refill that times out leaves
		// its slot to the next call).
		ModuleOptions{PoolSize: 4, MemoryMB: limit >> 20, Timeout: 5 * time.Second, MaxWait: 10 * time.Second, InitTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.call(context.Background(), HookToolCall, []byte(`{}`))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrMemoryLimit) {
			t.Errorf("call %d: %v, want ErrMemoryLimit", i, err)
		}
	}
	s := m.Stats()
	if s.MemoryHighWater > limit || s.MemoryHighWater < limit-4*65536 {
		t.Fatalf("memory high water %d bytes; want the whole %d and no more", s.MemoryHighWater, limit)
	}
	for deadline := time.Now().Add(10 * time.Second); m.Stats().Instances != 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool not refilled: %d instances after 10 s; refills that failed: %q",
				m.Stats().Instances, testLog.find("module=hogs", "restart failed"))
		}
	}
	if s := m.Stats(); s.Memory != 4*65536 {
		t.Fatalf("4 fresh instances hold %d bytes, want 4 pages", s.Memory)
	}
}
