package gateway

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkersNeverLimitConcurrency: jobs that block all run at once (a
// forwarded call may hold its worker for the whole upstream call), and idle
// workers exit.
func TestWorkersNeverLimitConcurrency(t *testing.T) {
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
	waitFor(t, "all blocking jobs to run at once", func() bool { return running.Load() == n })
	close(release)
	wg.Wait()
	// Reused: a second wave runs on the same (still idle) workers.
	var done atomic.Int32
	for range n {
		w.submit(func() { done.Add(1) })
	}
	waitFor(t, "the second wave", func() bool { return done.Load() == n })
}
