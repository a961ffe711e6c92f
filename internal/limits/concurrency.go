package limits

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

var (
	// ErrQueueFull reports that an Acquire found every slot taken and the
	// wait queue full.
	ErrQueueFull = errors.New("too many calls waiting")
)

// Concurrency admits at most a fixed number of calls at a time, for
// example to one upstream server, and lets a bounded number of further
// calls wait in first-in, first-out order. It is safe for concurrent use; a
// nil *Concurrency admits everything at once.
type Concurrency struct {
	limit, queue int

	mu       sync.Mutex
	inFlight int
	waiters  list.List // of *waiter, oldest first
}

// waiter is a queued Acquire. ready is closed when a release hands it its
// slot.
type waiter struct {
	ready chan struct{}
}

// NewConcurrency returns a Concurrency admitting limit calls at once with
// up to queue more waiting. A non-positive limit means no limit and returns
// nil; a negative queue is treated as 0 (no waiting).
func NewConcurrency(limit, queue int) *Concurrency {
	if limit <= 0 {
		return nil
	}
	return &Concurrency{limit: limit, queue: max(queue, 0)}
}

// Acquire takes a slot, waiting in line when all are taken. It returns
// ErrQueueFull at once when the queue is full, and ctx.Err() when ctx ends
// first (including before the call). On success the caller must call
// release exactly once when the call is done; further calls do nothing.
func (c *Concurrency) Acquire(ctx context.Context) (release func(), err error) {
	if c == nil {
		return func() {}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.inFlight < c.limit && c.waiters.Len() == 0 {
		c.inFlight++
		c.mu.Unlock()
		return c.releaser(), nil
	}
	if c.waiters.Len() >= c.queue {
		c.mu.Unlock()
		return nil, ErrQueueFull
	}
	w := &waiter{ready: make(chan struct{})}
	el := c.waiters.PushBack(w)
	c.mu.Unlock()

	select {
	case <-w.ready:
		return c.releaser(), nil
	case <-ctx.Done():
	}
	c.mu.Lock()
	select {
	case <-w.ready:
		// A release handed over the slot just as ctx ended: pass it on.
		c.mu.Unlock()
		c.release()
	default:
		c.waiters.Remove(el)
		c.mu.Unlock()
	}
	return nil, ctx.Err()
}

// releaser returns a release function that works once.
func (c *Concurrency) releaser() func() {
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			c.release()
		}
	}
}

// release frees a slot, handing it straight to the oldest waiter if any.
func (c *Concurrency) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.waiters.Front(); el != nil {
		c.waiters.Remove(el)
		close(el.Value.(*waiter).ready) // the slot stays in flight
		return
	}
	c.inFlight--
}

// InFlight reports how many calls hold a slot.
func (c *Concurrency) InFlight() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}

// Waiting reports how many calls are queued for a slot.
func (c *Concurrency) Waiting() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiters.Len()
}
