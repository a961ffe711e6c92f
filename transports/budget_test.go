package transports_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/transports"
)

func TestByteBudgetHammer(t *testing.T) {
	t.Parallel()
	const max = 1 << 20
	b := transports.NewByteBudget(max)
	var held atomic.Int64 // what the goroutines hold, by their own count
	var wg sync.WaitGroup
	var granted, refused atomic.Int64
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 500 {
				n := r.Int64N(max / 4)
				var ok bool
				if r.IntN(2) == 0 {
					ok = b.TryAcquire(n)
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(2000))*time.Microsecond)
					err := b.Acquire(ctx, n)
					cancel()
					if err != nil && !errors.Is(err, transports.ErrOverBudget) {
						t.Errorf("Acquire: %v does not wrap ErrOverBudget", err)
					}
					ok = err == nil
				}
				if !ok {
					refused.Add(1)
					continue
				}
				granted.Add(1)
				if h := held.Add(n); h > max {
					t.Errorf("%d bytes held, over the budget of %d", h, max)
				}
				if u := b.InUse(); u > max {
					t.Errorf("InUse %d over the budget of %d", u, max)
				}
				if r.IntN(4) == 0 {
					time.Sleep(time.Duration(r.IntN(100)) * time.Microsecond)
				}
				held.Add(-n)
				b.Release(n)
			}
		}()
	}
	wg.Wait()
	if u := b.InUse(); u != 0 {
		t.Fatalf("InUse = %d after every grant was released", u)
	}
	if granted.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("granted %d, refused %d: the hammer did not contend", granted.Load(), refused.Load())
	}
}

func TestByteBudgetAcquire(t *testing.T) {
	t.Parallel()
	b := transports.NewByteBudget(100)
	if b.Max() != 100 {
		t.Fatalf("Max = %d", b.Max())
	}
	if err := b.Acquire(context.Background(), 101); !errors.Is(err, transports.ErrOverBudget) {
		t.Fatalf("Acquire over the whole budget: %v", err)
	}
	if !b.TryAcquire(60) || b.TryAcquire(60) {
		t.Fatal("TryAcquire does not follow the budget")
	}
	// A waiter is granted when bytes are released.
	done := make(chan error, 1)
	go func() { done <- b.Acquire(context.Background(), 60) }()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Acquire returned %v before bytes were released", err)
	default:
	}
	b.Release(60)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter was not woken by Release")
	}
	// A waiter gives up when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(ctx, 60); !errors.Is(err, transports.ErrOverBudget) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its context: %v", err)
	}
	b.Release(60)
	if b.InUse() != 0 {
		t.Fatalf("InUse = %d", b.InUse())
	}
	// The nil budget grants everything.
	var none *transports.ByteBudget
	if !none.TryAcquire(1<<62) || none.Acquire(context.Background(), 1<<62) != nil || none.InUse() != 0 {
		t.Fatal("the nil budget is not unlimited")
	}
	none.Release(5)
	if transports.NewByteBudget(0) != nil {
		t.Fatal("NewByteBudget(0) is not the unlimited budget")
	}
}
