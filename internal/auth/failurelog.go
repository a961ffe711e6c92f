package auth

import (
	"net"
	"sync"
	"time"
)

// failureLogInterval is how often a failed authentication from one client
// address is logged; the failures in between are counted and reported with
// the next line.
const failureLogInterval = time.Minute

// maxFailureAddrs bounds the addresses remembered; past it, entries older
// than the interval are dropped, then (if still full) all of them.
const maxFailureAddrs = 4096

// failureLimiter decides which failed authentications are logged: at most
// one per client address per interval, so that a client hammering the
// gateway with bad credentials costs one log line a minute, not one per
// attempt. Safe for concurrent use.
type failureLimiter struct {
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	addrs map[string]*failureEntry
}

type failureEntry struct {
	logged     time.Time
	suppressed int
}

func newFailureLimiter(every time.Duration, now func() time.Time) *failureLimiter {
	return &failureLimiter{every: every, now: now, addrs: make(map[string]*failureEntry)}
}

// allow reports whether a failure from remote (host:port) is to be logged
// now, and how many failures from that address were left unlogged since the
// last line.
func (l *failureLimiter) allow(remote string) (log bool, suppressed int) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.addrs[host]
	if e == nil {
		l.makeRoom(now)
		l.addrs[host] = &failureEntry{logged: now}
		return true, 0
	}
	if now.Sub(e.logged) < l.every {
		e.suppressed++
		return false, 0
	}
	suppressed, e.logged, e.suppressed = e.suppressed, now, 0
	return true, suppressed
}

// makeRoom keeps the map bounded. Called with mu held.
func (l *failureLimiter) makeRoom(now time.Time) {
	if len(l.addrs) < maxFailureAddrs {
		return
	}
	for h, e := range l.addrs {
		if now.Sub(e.logged) >= l.every {
			delete(l.addrs, h)
		}
	}
	if len(l.addrs) >= maxFailureAddrs {
		clear(l.addrs)
	}
}
