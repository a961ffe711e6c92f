// Package perclient keeps the per-client links of one upstream server
// configured with "session": "per_client": one entry per downstream
// session (K), opened on its first request, within the limits on how many
// may be open in all and per identity. It knows nothing of links (L) but
// that the gateway opens each once and closes it itself.
//
// Lifetime: Start lets entries be added in the upstream's run; Stop refuses
// new ones and waits until every entry added has been given back with Done.
// A Set is safe for concurrent use; its zero value is stopped.
package perclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrTooMany is the error for a session beyond the limits.
var ErrTooMany = errors.New("too many client sessions")

// ErrStopped is the error of Add outside the upstream's run.
var ErrStopped = errors.New("per-client links stopped")

// Set is the per-client links of one upstream.
type Set[K comparable, L any] struct {
	mu     sync.Mutex
	ctx    context.Context // the upstream's run; nil before it starts and after it stops
	links  map[K]*Entry[L]
	closed bool
	wg     sync.WaitGroup // one per entry added, done by Done
}

// Entry is one session's link, or the attempt to open it.
type Entry[L any] struct {
	ready chan struct{} // closed once link or err is set
	link  L
	err   error
	owner string // the identity of the session holding it
	// release credits the session's charge to its identity's client
	// memory; called once, by Done.
	release func()
}

// Ready is closed once Opened has been called.
func (e *Entry[L]) Ready() <-chan struct{} { return e.ready }

// Link is what Opened was given; only after Ready is closed.
func (e *Entry[L]) Link() (L, error) { return e.link, e.err }

// Opened sets the entry's link, or why it could not be opened, and tells
// those waiting on Ready. Called once, by whoever Add asked to open it.
func (e *Entry[L]) Opened(l L, err error) {
	e.link, e.err = l, err
	close(e.ready)
}

// Owner is the session that asks Add for an entry; Add calls it with
// the Set locked.
type Owner interface {
	// Identity is the session's identity, and whether it is one
	// authenticated identity, held to perOwner links.
	Identity() (name string, counted bool)
	// Hold charges one link to the identity's client memory and returns
	// how to credit it back, or an error (wrapping ErrTooMany) when over
	// budget.
	Hold() (release func(), err error)
}

// Add returns k's entry, adding it when k has none and the limits allow
// (limit entries in all, perOwner of them for o's identity when counted); then
// opener is the context to open the link in, and the caller must open it
// (Entry.Opened) and, once the link is closed or failed to open, call Done.
func (c *Set[K, L]) Add(k K, o Owner, limit, perOwner int) (e *Entry[L], opener context.Context, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil || c.closed {
		return nil, nil, ErrStopped
	}
	if e = c.links[k]; e != nil {
		return e, nil, nil
	}
	if len(c.links) >= limit {
		return nil, nil, fmt.Errorf("%w: %d of %d (max_client_sessions) are open; try again when one ends", ErrTooMany, len(c.links), limit)
	}
	name, counted := o.Identity()
	if counted {
		mine := 0
		for _, x := range c.links {
			if x.owner == name {
				mine++
			}
		}
		if mine >= perOwner {
			return nil, nil, fmt.Errorf("%w: identity %q holds %d of its %d (max_client_sessions_per_identity); try again when one ends",
				ErrTooMany, name, mine, perOwner)
		}
	}
	release, err := o.Hold()
	if err != nil {
		return nil, nil, err
	}
	if c.links == nil {
		c.links = make(map[K]*Entry[L])
	}
	e = &Entry[L]{ready: make(chan struct{}), owner: name, release: release}
	c.links[k] = e
	c.wg.Add(1)
	return e, c.ctx, nil
}

// Forget removes k's entry if it is still e.
func (c *Set[K, L]) Forget(k K, e *Entry[L]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.links[k] == e {
		delete(c.links, k)
	}
}

// Done credits e's charge back and lets Stop return once every entry is
// done; called once per entry Add added, after its link is closed.
func (c *Set[K, L]) Done(e *Entry[L]) {
	e.release()
	c.wg.Done()
}

// Start lets entries be added in ctx, the upstream's run.
func (c *Set[K, L]) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ctx, c.closed = ctx, false
}

// Stop refuses new entries and waits until every entry is done (its link
// closes itself when ctx, the upstream's run, has ended).
func (c *Set[K, L]) Stop() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
}

// Count returns the number of entries open or opening.
func (c *Set[K, L]) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.links)
}

// Open returns k's link when it is open (false when there is none, it is
// still opening, or it failed to open).
func (c *Set[K, L]) Open(k K) (l L, ok bool) {
	c.mu.Lock()
	e := c.links[k]
	c.mu.Unlock()
	if e == nil {
		return l, false
	}
	select {
	case <-e.ready:
		return e.link, e.err == nil
	default:
		return l, false
	}
}

// OpenLinks returns the links open now.
func (c *Set[K, L]) OpenLinks() []L {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []L
	for _, e := range c.links {
		select {
		case <-e.ready:
			if e.err == nil {
				out = append(out, e.link)
			}
		default: // still opening
		}
	}
	return out
}
