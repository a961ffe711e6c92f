// Package limits bounds how much work clients can push through the
// gateway: a per-key request rate ([RateLimiter]) and a per-upstream cap on
// calls in flight with a bounded wait queue ([Concurrency]). A nil limiter of
// either kind imposes no limit.
package limits

import (
	"container/list"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const (
	// defaultMaxKeys caps how many keys a RateLimiter tracks; past it the
	// least recently used bucket is dropped.
	defaultMaxKeys = 65536
	// minIdle is how long an unused bucket is kept at least.
	minIdle = 10 * time.Minute
)

// Rate is a token bucket's settings, as a configuration states them: RPS
// tokens per second, Burst at most.
type Rate struct {
	RPS   float64 `json:"rps"`
	Burst int     `json:"burst,omitempty"`
}

// RateLimiter is a set of token buckets keyed by string, such as a client
// identity or an identity plus a tool name. Every key gets its own bucket
// that refills at a fixed rate per second up to a burst size.
//
// Memory is bounded: a bucket unused for longer than it takes to refill
// completely (and at least ten minutes) is dropped, since a fresh bucket
// behaves the same, and at most a fixed number of keys (65536) are kept,
// dropping the least recently used first. A RateLimiter is safe for
// concurrent use; a nil *RateLimiter allows everything.
type RateLimiter struct {
	limit   rate.Limit
	burst   int
	idle    time.Duration
	maxKeys int
	now     func() time.Time

	mu      sync.Mutex
	buckets map[string]*list.Element // of *bucket
	lru     *list.List               // front = most recently used
}

// bucket is one key's token bucket.
type bucket struct {
	key  string
	lim  *rate.Limiter
	last time.Time // last use
}

// NewRateLimiter returns a limiter that allows each key rps requests per
// second on average and bursts of up to burst requests. A non-positive rps
// means no limit and returns nil; a burst below 1 is raised to 1.
func NewRateLimiter(rps float64, burst int) *RateLimiter {
	if rps <= 0 || math.IsNaN(rps) {
		return nil
	}
	burst = max(burst, 1)
	idle := minIdle
	if refill := float64(burst) / rps; refill > idle.Seconds() {
		idle = time.Duration(math.Min(refill, math.MaxInt64/float64(time.Second)) * float64(time.Second))
	}
	return &RateLimiter{
		limit:   rate.Limit(rps),
		burst:   burst,
		idle:    idle,
		maxKeys: defaultMaxKeys,
		now:     time.Now,
		buckets: make(map[string]*list.Element),
		lru:     list.New(),
	}
}

// Allow takes one token from key's bucket. When the bucket is empty it
// takes nothing and returns false with the time until a token will be
// available; rounding that up to whole seconds for a Retry-After header is
// left to the caller.
func (l *RateLimiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	lim := l.limiter(key, now)
	r := lim.ReserveN(now, 1)
	if !r.OK() { // cannot happen with burst >= 1
		return false, 0
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// limiter returns key's bucket, creating it if needed, and drops idle and
// excess buckets.
func (l *RateLimiter) limiter(key string, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b *bucket
	if el, ok := l.buckets[key]; ok {
		b = el.Value.(*bucket)
		l.lru.MoveToFront(el)
	} else {
		b = &bucket{key: key, lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = l.lru.PushFront(b)
	}
	b.last = now
	// The list is ordered by last use, so idle buckets sit at the back.
	for el := l.lru.Back(); el != nil; el = l.lru.Back() {
		old := el.Value.(*bucket)
		if l.lru.Len() <= l.maxKeys && now.Sub(old.last) <= l.idle {
			break
		}
		l.lru.Remove(el)
		delete(l.buckets, old.key)
	}
	return b.lim
}

// len reports how many buckets are kept.
func (l *RateLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
