// Package budget accounts for the memory clients can make the gateway
// hold on their behalf after a request has been answered: the events a
// streamable HTTP session keeps for resumption, the upstream requests
// parked for a 2026-07-28 client's input_required retry, and the like,
// and fixed-size items such as open streams ([Account.Hold]).
//
// A [Pool] is the process total; each client identity draws on it through
// an [Account] with a share of its own, so that one identity cannot take
// the whole pool. Stores charge an account before they keep bytes and
// credit it when they let them go; a charge over the identity's share or
// the total is refused, and the store decides what to give up (the oldest
// resumable events) or refuses the new work with an error. Charging and
// crediting are a few atomic additions, with no lock.
package budget

import (
	"sync"
	"sync/atomic"
)

// Store names what a charge is for; each has its own used, dropped and
// refused figures in [Pool.Stats].
type Store int

// The stores that charge a pool.
const (
	// Resumption is the events streamable HTTP sessions keep for clients
	// resuming a stream with Last-Event-ID.
	Resumption Store = iota
	// InputRounds is the upstream requests parked until a 2026-07-28
	// client retries its call (input_required).
	InputRounds
	// Tasks is the gateway's records of the tasks clients created
	// upstream, with the arguments result policies need.
	Tasks
	// PerClientSessions is the upstream sessions opened for a client
	// identity on a "session": "per_client" server, a fixed estimate each.
	PerClientSessions
	// Streams is the open downstream streams that queue messages for a
	// client (streamable HTTP GET streams, legacy SSE, WebSocket), a fixed
	// estimate each.
	Streams
	numStores
)

var storeNames = [numStores]string{"resumption", "input_rounds", "tasks", "per_client_sessions", "streams"}

// String returns the store's name, as metrics and the status label it.
func (s Store) String() string {
	if s < 0 || s >= numStores {
		return "unknown"
	}
	return storeNames[s]
}

// storeStats are the figures of one store.
type storeStats struct {
	used, dropped, refused atomic.Int64
}

// Pool is the process-wide budget of client-held memory. The nil *Pool
// is unlimited: its accounts grant every charge and count nothing.
type Pool struct {
	total, share int64
	used         atomic.Int64
	stores       [numStores]storeStats

	mu       sync.Mutex
	accounts map[string]*Account
}

// New returns a pool of total bytes in which one identity may hold at most
// share; share <= 0 or over total means total. total <= 0 returns nil, the
// unlimited pool.
func New(total, share int64) *Pool {
	if total <= 0 {
		return nil
	}
	if share <= 0 || share > total {
		share = total
	}
	return &Pool{total: total, share: share, accounts: make(map[string]*Account)}
}

// Account is what one identity holds of a pool. It is shared by every
// holder that acquired it for that identity and lives until the last of
// them releases it. The nil *Account grants everything.
type Account struct {
	pool     *Pool
	identity string
	limit    int64
	used     atomic.Int64
	refs     int // guarded by pool.mu

	mu         sync.Mutex
	reclaimers []Reclaimer // oldest registered first
}

// Reclaimer is a holder of an account that can give back what it holds,
// oldest first, when another holder of the account needs room.
type Reclaimer interface {
	// Reclaim drops the holder's oldest items, crediting the account at
	// least need bytes when it holds that much, and returns the bytes it
	// credited; 0 when it cannot now (busy, or holding nothing). It is
	// called from another holder's goroutine, which may hold that
	// holder's own locks: it must not wait for a lock.
	Reclaim(need int64) int64
}

// Acquire returns the account of identity, made when none is held, whose
// limit is the pool's per-identity share, or the whole total when shared
// is false (one identity stands for every client, as when authentication
// is off). Each Acquire needs one Release.
func (p *Pool) Acquire(identity string, shared bool) *Account {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.accounts[identity]
	if a == nil {
		a = &Account{pool: p, identity: identity, limit: p.share}
		if !shared {
			a.limit = p.total
		}
		p.accounts[identity] = a
	}
	a.refs++
	return a
}

// Release gives back one Acquire of a; the account is forgotten when the
// last one is released (its holders have credited what they charged).
func (a *Account) Release() {
	if a == nil {
		return
	}
	p := a.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if a.refs--; a.refs == 0 && p.accounts[a.identity] == a {
		delete(p.accounts, a.identity)
	}
}

// Register adds r to the holders Reclaim may ask, after those registered
// before it; Unregister removes it.
func (a *Account) Register(r Reclaimer) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.reclaimers = append(a.reclaimers, r)
	a.mu.Unlock()
}

// Unregister removes r from the holders Reclaim may ask.
func (a *Account) Unregister(r Reclaimer) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, o := range a.reclaimers {
		if o == r {
			a.reclaimers = append(a.reclaimers[:i], a.reclaimers[i+1:]...)
			return
		}
	}
}

// Reclaim asks the holders registered before self (the older ones), oldest
// first, to give back need bytes, and returns what they credited.
func (a *Account) Reclaim(need int64, self Reclaimer) int64 {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	var older []Reclaimer
	for _, r := range a.reclaimers {
		if r == self {
			break
		}
		older = append(older, r)
	}
	a.mu.Unlock()
	var got int64
	for _, r := range older {
		if got >= need {
			break
		}
		got += r.Reclaim(need - got)
	}
	return got
}

// Hold charges n bytes for store s, one fixed-size item such as an open
// stream, and returns the func that credits them and releases a once
// (safe to call more than once); when they do not fit it counts the
// refusal, releases a and returns nil. Hold takes over a's Acquire.
func (a *Account) Hold(s Store, n int64) (release func()) {
	if !a.Charge(s, n) {
		a.Refused(s)
		a.Release()
		return nil
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			a.Credit(s, n)
			a.Release()
		})
	}
}

// Identity returns the identity the account is for.
func (a *Account) Identity() string {
	if a == nil {
		return ""
	}
	return a.identity
}

// Charge takes n bytes for store s and reports whether they fit both the
// identity's share and the pool's total; when they do not, nothing is
// taken.
func (a *Account) Charge(s Store, n int64) bool {
	if a == nil || n <= 0 {
		return true
	}
	if a.used.Add(n) > a.limit {
		a.used.Add(-n)
		return false
	}
	p := a.pool
	if p.used.Add(n) > p.total {
		p.used.Add(-n)
		a.used.Add(-n)
		return false
	}
	p.stores[s].used.Add(n)
	return true
}

// Credit gives back n bytes charged for store s.
func (a *Account) Credit(s Store, n int64) {
	if a == nil || n <= 0 {
		return
	}
	a.used.Add(-n)
	a.pool.used.Add(-n)
	a.pool.stores[s].used.Add(-n)
}

// Dropped counts n items of store s given up to make room (the oldest
// resumable events).
func (a *Account) Dropped(s Store, n int) {
	if a != nil && n > 0 {
		a.pool.stores[s].dropped.Add(int64(n))
	}
}

// Refused counts one charge of store s that was refused and not retried:
// new work refused, or an item not kept.
func (a *Account) Refused(s Store) {
	if a != nil {
		a.pool.stores[s].refused.Add(1)
	}
}

// Used returns the bytes the account holds.
func (a *Account) Used() int64 {
	if a == nil {
		return 0
	}
	return a.used.Load()
}

// Limit returns the most the account may hold, 0 when unlimited.
func (a *Account) Limit() int64 {
	if a == nil {
		return 0
	}
	return a.limit
}

// StoreStats are one store's figures.
type StoreStats struct {
	Store   string `json:"store"`
	Used    int64  `json:"used_bytes"`
	Dropped int64  `json:"dropped"`
	Refused int64  `json:"refused"`
}

// Stats are a pool's figures, as /status shows them.
type Stats struct {
	Limit       int64        `json:"limit_bytes"`
	PerIdentity int64        `json:"per_identity_bytes"`
	Used        int64        `json:"used_bytes"`
	Identities  int          `json:"identities"`
	Stores      []StoreStats `json:"stores"`
}

// Stats returns the pool's current figures; nil for the unlimited pool.
func (p *Pool) Stats() *Stats {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	n := len(p.accounts)
	p.mu.Unlock()
	st := &Stats{Limit: p.total, PerIdentity: p.share, Used: p.used.Load(), Identities: n}
	for i := range p.stores {
		s := &p.stores[i]
		st.Stores = append(st.Stores, StoreStats{Store: Store(i).String(), Used: s.used.Load(),
			Dropped: s.dropped.Load(), Refused: s.refused.Load()})
	}
	return st
}
