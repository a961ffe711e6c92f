package gateway

import (
	"sync"
	"time"
)

// workers runs blocking jobs (an upstream write can take a whole HTTP round
// trip) on long-lived goroutines. A job goes to an idle worker when there is
// one and to a new worker otherwise, so there is no limit on concurrent
// jobs; a worker idle for a while exits. Reusing goroutines keeps their
// grown stacks: a fresh goroutine per call would grow its stack inside
// net/http on every call.
type workers struct {
	jobs chan func()
	idle time.Duration
	stop chan struct{} // closed by close: idle workers exit at once
	once sync.Once
}

func newWorkers(idle time.Duration) *workers {
	return &workers{jobs: make(chan func()), idle: idle, stop: make(chan struct{})}
}

// close makes idle workers exit; workers busy with a job exit after it.
func (w *workers) close() { w.once.Do(func() { close(w.stop) }) }

// submit runs job on an idle worker, or on a new one.
func (w *workers) submit(job func()) {
	select {
	case w.jobs <- job:
	default:
		go w.work(job)
	}
}

func (w *workers) work(job func()) {
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		job()
		t.Reset(w.idle)
		select {
		case job = <-w.jobs:
		case <-t.C:
			return
		case <-w.stop:
			return
		}
	}
}
