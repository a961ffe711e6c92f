package policy

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// memBudget is the linear memory one Module may hold across all its
// instances: ModuleOptions.MemoryMB in bytes. Every instance's memory is
// allocated by a guestMemory charged to the budget, so a pool of N
// instances holds MemoryMB in total, not N times MemoryMB.
type memBudget struct {
	limit uint64
	used  atomic.Uint64
	peak  atomic.Uint64
}

// reserve charges n bytes to the budget, or reports false when they do
// not fit.
func (b *memBudget) reserve(n uint64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit || used+n < used {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			for {
				peak := b.peak.Load()
				if used+n <= peak || b.peak.CompareAndSwap(peak, used+n) {
					return true
				}
			}
		}
	}
}

func (b *memBudget) give(n uint64) { b.used.Add(-n) }

// guestMemory allocates one instance's linear memory against its module's
// budget (wazero's experimental.MemoryAllocator hook). It is created per
// instantiation with the initial pages already reserved (prepaid), because
// wazero cannot fail the initial allocation gracefully. A growth the
// budget cannot cover is refused: memory.grow returns -1 to the guest,
// which typically fails the call, and refused records it so that the
// failure is reported as ErrMemoryLimit.
type guestMemory struct {
	budget *memBudget

	mu      sync.Mutex // Free may come from another goroutine (runtime close)
	buf     []byte
	prepaid uint64 // reserved before instantiation, not yet allocated
	max     uint64
	freed   bool
	refused atomic.Bool
}

var (
	_ experimental.MemoryAllocator = (*guestMemory)(nil)
	_ experimental.LinearMemory    = (*guestMemory)(nil)
)

// Allocate implements experimental.MemoryAllocator: an instance has one
// memory, so the allocator is its own linear memory.
func (g *guestMemory) Allocate(_, max uint64) experimental.LinearMemory {
	g.max = max
	return g
}

// Reallocate implements experimental.LinearMemory. It returns nil (the
// grow fails) when the module's budget has no room for the new pages.
func (g *guestMemory) Reallocate(size uint64) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	have := uint64(len(g.buf))
	if g.freed || size > g.max {
		return nil
	}
	if size <= have {
		return g.buf[:size]
	}
	need := size - have
	fromPrepaid := min(need, g.prepaid)
	if !g.budget.reserve(need - fromPrepaid) {
		g.refused.Store(true)
		return nil
	}
	g.prepaid -= fromPrepaid
	if size <= uint64(cap(g.buf)) {
		g.buf = g.buf[:size]
		return g.buf
	}
	// Double the capacity, within the instance's maximum and the module's
	// budget: growing page by page must not copy the memory at each page
	// (nor leave a trail of garbage copies), and capacity beyond the
	// budget could never be used.
	capacity := min(max(size, 2*uint64(cap(g.buf))), g.max, g.budget.limit)
	buf := make([]byte, size, max(size, capacity))
	copy(buf, g.buf)
	g.buf = buf
	return g.buf
}

// Free implements experimental.LinearMemory: the instance was closed, its
// pages go back to the budget. Wazero keeps its own reference to the
// buffer until the instance is garbage, so dropping ours is safe. Free is
// idempotent, and also returns a prepayment that instantiation never used.
func (g *guestMemory) Free() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		return
	}
	g.freed = true
	g.budget.give(uint64(len(g.buf)) + g.prepaid)
	g.buf, g.prepaid = nil, 0
}
