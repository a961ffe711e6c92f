package gateway

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestWorkersNeverLimitConcurrency: jobs that block all run at once (a
// forwarded call may hold its worker for the whole upstream call), and idle
// workers exit. It runs in a synctest bubble, in bubble time: a worker
// still blocked when the bubble ends is a deadlock, and fails the test.
func TestWorkersNeverLimitConcurrency(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers(20 * time.Millisecond)
		const n = 50
		var running atomic.Int32
		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(n)
		for range n {
			w.submit(func() {
				running.Add(1)
				<-release
				wg.Done()
			})
		}
		synctest.Wait()
		if got := running.Load(); got != n {
			t.Fatalf("%d of %d blocking jobs run at once", got, n)
		}
		close(release)
		wg.Wait()
		// Reused: a second wave runs on the same (still idle) workers.
		var done atomic.Int32
		for range n {
			w.submit(func() { done.Add(1) })
		}
		synctest.Wait()
		if got := done.Load(); got != n {
			t.Fatalf("second wave: %d of %d jobs ran", got, n)
		}
		// Idle for 20 ms, every worker exits.
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
	})
}
