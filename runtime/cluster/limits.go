package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/limits"
)

// Fleet-wide rate limits by leases.
//
// Every rate limit (client_rate, tool_rate, a tool rule's rate) is, per
// key, one token bucket shared by the fleet: its state (tokens, when they
// were counted, which replicas took some lately) is one value in the
// JetStream KV bucket "<fleet>_rates". A replica does not ask NATS per
// call: it takes a lease, a few tokens at once (a tenth of a second's
// worth, at least 1, at most the burst), with a compare-and-set of that
// value, and spends them locally. A lease lives one second; what was left
// of an expired lease is given back with the next take (the same
// compare-and-set). After a refusal the replica knows when the bucket
// has a token again and refuses locally until then, so a client hammering
// a replica costs about one KV round trip per token, not one per call.
//
// Why leases and not rate/live-members: dividing the rate by the number
// of replicas is exact only when the load balancer spreads a client evenly;
// a sticky or skewed balancer would hold a client to a third of its rate
// on three replicas. Leases are exact whatever the spread, cost a round
// trip per lease rather than per call, and need no membership protocol.
//
// Error bound: every admitted call spends a token taken from the shared
// bucket, so over any window of t seconds the fleet admits at most
// rps·t + burst + N·L calls (N replicas, lease L: tokens leased before the
// window and spent in it), and, when every replica has more demand than
// it gets, at least rps·t − N·L (leases held at the end of the window).
// With rps 20 (L = 2) and 3 replicas that is ±6 calls per window, ±10% over
// 3 s. Clock skew between replicas adds at most rps·skew tokens per
// refill; keep their clocks synchronized (NTP).
//
// NATS unreachable (or a KV operation failing or taking longer than
// kvTimeout, after which NATS is not asked for 100 ms, doubling with each
// failure in a row up to 10 s): each replica limits locally at rps/M and burst/M (at least
// 1), M being the number of replicas that took leases of that key in the
// last 30 s as last seen (for a key this replica never took: the members
// of the key it took last; before any: 1). A
// replica started while NATS is down therefore allows the full rate on its
// own until it has seen the fleet. When NATS returns, leases resume.

const (
	// leaseLife is how long a replica may spend a lease.
	leaseLife = time.Second
	// leaseShare is the part of a second's rate one lease takes.
	leaseShare = 0.1
	// memberWindow is how recently a replica must have taken a lease of a
	// key to count as one of its members.
	memberWindow = 30 * time.Second
	// kvTimeout bounds one KV operation on the call path.
	kvTimeout = 300 * time.Millisecond
	// breakerPause is how long limiters limit locally after a KV failure
	// (doubling with each failure in a row, up to 10 s).
	breakerPause = 100 * time.Millisecond
	// maxLeaseKeys caps the keys a Limiter tracks; past it expired leases
	// are dropped.
	maxLeaseKeys = 4096
	// casAttempts is how often a take retries a compare-and-set conflict.
	casAttempts = 6
)

// Limits are the fleet's shared rate limits: the KV bucket and what this
// replica has seen of the fleet. Create them with NewLimits before the
// node is open, Bind the node when it is; until then, and whenever NATS is
// unreachable, limiters fall back to local limiting. A nil *Limits gives
// local limiters only.
type Limits struct {
	log  *slog.Logger
	node atomic.Pointer[Node]
	// membersSeen is the members of the key taken last.
	membersSeen atomic.Int32
	degraded    atomic.Bool // logged once per fall back

	mu         sync.Mutex
	kv         jetstream.KeyValue
	failures   int         // KV failures in a row
	pauseUntil time.Time   // the breaker is open until then
	tripped    atomic.Bool // failures > 0
	ttl        time.Duration
}

// NewLimits returns fleet limits not yet bound to a node. ttl is how long
// an unused key's shared bucket is kept (a missing one is a full bucket):
// at least the time the slowest configured limit takes to refill.
func NewLimits(log *slog.Logger, ttl time.Duration) *Limits {
	l := &Limits{log: log, ttl: max(ttl, 10*time.Minute)}
	l.membersSeen.Store(1)
	return l
}

// Bind connects the limits to the fleet's node.
func (l *Limits) Bind(n *Node) {
	if l != nil {
		l.node.Store(n)
	}
}

// bucket opens (once) the KV bucket of the shared buckets; nil when NATS
// is unreachable or the breaker is open (after a failure).
func (l *Limits) bucket(ctx context.Context) jetstream.KeyValue {
	n := l.node.Load()
	if n == nil || !n.Connected() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Now().Before(l.pauseUntil) {
		return nil
	}
	if l.kv != nil {
		return l.kv
	}
	kv, err := openRatesBucket(ctx, n, l.ttl)
	if err != nil {
		l.pauseLocked()
		l.log.Warn("cluster: opening the shared rate limit bucket", "err", err)
		return nil
	}
	l.kv = kv
	return kv
}

// failed opens the breaker after a KV operation failed: for 100 ms after
// one failure, doubling with each failure in a row up to 10 s, limiters
// limit locally without asking NATS, so that a NATS that is connected but
// does not answer (no JetStream quorum) stalls few calls. An error other
// than a timeout drops the bucket handle: the bucket may be gone (NATS
// restarted without it) and is opened again after the pause.
func (l *Limits) failed(kv jetstream.KeyValue, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pauseLocked()
	if l.kv == kv && !errors.Is(err, context.DeadlineExceeded) {
		l.kv = nil
	}
}

func (l *Limits) pauseLocked() {
	l.failures = min(l.failures+1, 8)
	l.tripped.Store(true)
	l.pauseUntil = time.Now().Add(min(breakerPause<<(l.failures-1), 10*time.Second))
}

// succeeded closes the breaker.
func (l *Limits) succeeded() {
	if !l.tripped.Load() { // the common case takes no lock
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = 0
	l.tripped.Store(false)
}

// openRatesBucket creates or opens "<fleet>_rates": in memory (a lost
// bucket is a full bucket), replicated on three servers when the NATS
// cluster has them.
func openRatesBucket(ctx context.Context, n *Node, ttl time.Duration) (jetstream.KeyValue, error) {
	cfg := jetstream.KeyValueConfig{Bucket: n.Bucket("rates"), History: 1, TTL: ttl,
		Storage: jetstream.MemoryStorage, Replicas: 3, MaxValueSize: 4096}
	kv, err := n.JetStream().CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		cfg.Replicas = 1
		kv, err = n.JetStream().CreateOrUpdateKeyValue(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("opening bucket %q: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// Limiter is one shared rate limit: rps per key on average, bursts of
// burst, fleet-wide. Safe for concurrent use; a nil *Limiter allows
// everything.
type Limiter struct {
	l     *Limits
	name  string
	rps   float64
	burst int
	lease int

	fallbacks atomic.Int64 // calls limited locally for want of NATS

	mu     sync.Mutex
	leases map[string]*lease
	local  map[int]*limits.RateLimiter // fall back, by member count
}

// lease is what this replica holds of one key's shared bucket.
type lease struct {
	mu          sync.Mutex // held while taking, so one take per key at a time
	tokens      int
	expires     time.Time
	deniedUntil time.Time // the shared bucket is empty until then
	members     int       // replicas sharing the key, last seen
}

// Limiter returns the shared limit called name (the same on every replica
// of the fleet, e.g. "client"); nil when rps is not positive.
func (l *Limits) Limiter(name string, rps float64, burst int) *Limiter {
	if rps <= 0 || math.IsNaN(rps) || math.IsInf(rps, 0) {
		return nil
	}
	burst = max(burst, 1)
	size := min(max(int(rps*leaseShare), 1), burst)
	return &Limiter{l: l, name: name, rps: rps, burst: burst, lease: size,
		leases: map[string]*lease{}, local: map[int]*limits.RateLimiter{}}
}

// Allow takes one token of key's fleet-wide bucket. When there is none it
// returns false and the time until there will be one.
func (r *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if r == nil {
		return true, 0
	}
	ls := r.leaseOf(key)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := time.Now()
	if ls.tokens > 0 && now.Before(ls.expires) {
		ls.tokens--
		return true, 0
	}
	if now.Before(ls.deniedUntil) {
		return false, ls.deniedUntil.Sub(now)
	}
	back := 0
	if now.After(ls.expires) {
		back, ls.tokens = ls.tokens, 0 // expired: given back with this take
	}
	got, wait, err := r.take(key, back, now)
	if err != nil {
		ls.tokens += back // not given back: tried again with the next take
		r.fallbacks.Add(1)
		return r.fallback(key, ls.members)
	}
	r.l.recovered()
	ls.members = got.members
	if got.tokens == 0 {
		ls.deniedUntil = now.Add(wait)
		return false, wait
	}
	ls.tokens, ls.expires = got.tokens-1, now.Add(leaseLife)
	return true, 0
}

// Fallbacks counts the calls limited locally because the shared bucket
// could not be asked.
func (r *Limiter) Fallbacks() int64 {
	if r == nil {
		return 0
	}
	return r.fallbacks.Load()
}

// leaseOf returns key's lease, dropping expired ones when there are many.
func (r *Limiter) leaseOf(key string) *lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ls := r.leases[key]; ls != nil {
		return ls
	}
	if len(r.leases) >= maxLeaseKeys {
		now := time.Now()
		for k, ls := range r.leases {
			if ls.mu.TryLock() {
				if now.After(ls.expires) && now.After(ls.deniedUntil) {
					delete(r.leases, k)
				}
				ls.mu.Unlock()
			}
		}
	}
	ls := &lease{}
	if len(r.leases) < 4*maxLeaseKeys { // else untracked: still correct, one take per call
		r.leases[key] = ls
	}
	return ls
}

// fallback limits locally at rps/M, M the members last seen.
func (r *Limiter) fallback(key string, members int) (bool, time.Duration) {
	if members <= 0 {
		members = int(r.l.membersSeen.Load())
	}
	members = max(members, 1)
	r.l.degrade()
	r.mu.Lock()
	rl := r.local[members]
	if rl == nil {
		rl = limits.NewRateLimiter(r.rps/float64(members), max(r.burst/members, 1))
		r.local[members] = rl
	}
	r.mu.Unlock()
	return rl.Allow(key)
}

// degrade logs the first fall back to local limiting.
func (l *Limits) degrade() {
	if !l.degraded.Swap(true) {
		l.log.Warn("cluster: shared rate limits unreachable; limiting per replica at rate/members last seen", "members", l.membersSeen.Load())
	}
}

// recovered logs the return to shared limiting.
func (l *Limits) recovered() {
	if l.degraded.Load() && l.degraded.Swap(false) {
		l.log.Info("cluster: shared rate limits reachable again")
	}
}

// taken is the result of one take.
type taken struct {
	tokens  int
	members int
}

// take gives back `back` tokens and takes up to a lease from key's shared
// bucket with compare-and-set; when it has none, it says how long until
// it will. An error means NATS could not be asked.
func (r *Limiter) take(key string, back int, now time.Time) (taken, time.Duration, error) {
	if r.l == nil {
		return taken{}, 0, ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(context.Background(), kvTimeout)
	defer cancel()
	kv := r.l.bucket(ctx)
	if kv == nil {
		return taken{}, 0, ErrUnavailable
	}
	n := r.l.node.Load()
	k := r.kvKey(key)
	for range casAttempts {
		got, wait, err := r.takeOnce(ctx, kv, k, n.Replica(), back, time.Now())
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another replica was first: read again
		}
		if err != nil {
			r.l.failed(kv, err)
		} else {
			r.l.succeeded()
		}
		return got, wait, err
	}
	// Other replicas keep winning: the bucket is contended, not out of
	// reach. Refuse this call (not fall back, which would add tokens).
	return taken{}, time.Duration(float64(time.Second) / r.rps), nil
}

// kvKey names key's shared bucket: the limit's name and a keyed hash of
// the key (identities and tool names may hold anything, KV keys may not,
// and a KV key is a subject anyone on NATS sees: an identity hashed
// without a key would be a guess away). During a secret rotation,
// replicas sealing with different secrets keep separate buckets until
// they all seal with the new one.
func (r *Limiter) kvKey(key string) string {
	return Token(r.name) + "." + r.l.node.Load().Route(key)
}
