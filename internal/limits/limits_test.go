package limits

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestRateLimiterBurstThenDeny runs in a synctest bubble: the limiter's
// clock (time.Now) is the bubble's, so the waits take no real time and the
// retry-after is exact.
func TestRateLimiterBurstThenDeny(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rps = 5.0
		l := NewRateLimiter(rps, 3)
		for i := 0; i < 3; i++ {
			if ok, d := l.Allow("alice"); !ok || d != 0 {
				t.Fatalf("request %d within burst: Allow() = %v, %v", i, ok, d)
			}
		}
		ok, d := l.Allow("alice")
		if ok {
			t.Fatal("request past the burst allowed")
		}
		// One token takes 1/rps = 200ms to come back.
		if d != time.Second/rps {
			t.Errorf("retryAfter = %v, want %v", d, time.Second/rps)
		}
		// A denied request takes no token: denials do not push retryAfter out.
		time.Sleep(50 * time.Millisecond)
		if _, d2 := l.Allow("alice"); d2 != d-50*time.Millisecond {
			t.Errorf("second denial 50ms later: retryAfter %v, want %v", d2, d-50*time.Millisecond)
		}
		// Other keys have their own buckets.
		if ok, _ := l.Allow("bob"); !ok {
			t.Error("bob denied because of alice")
		}

		time.Sleep(d - 50*time.Millisecond - time.Millisecond)
		if ok, _ := l.Allow("alice"); ok {
			t.Error("allowed a millisecond before retryAfter")
		}
		time.Sleep(time.Millisecond)
		if ok, _ := l.Allow("alice"); !ok {
			t.Error("not allowed after waiting retryAfter")
		}
		if ok, _ := l.Allow("alice"); ok {
			t.Error("only one token should have come back")
		}
	})
}

func TestRateLimiterRecoversFullBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewRateLimiter(20, 4) // refills 4 tokens in 200ms
		for i := 0; i < 4; i++ {
			l.Allow("k")
		}
		if ok, _ := l.Allow("k"); ok {
			t.Fatal("allowed past burst")
		}
		time.Sleep(200 * time.Millisecond)
		for i := 0; i < 4; i++ {
			if ok, d := l.Allow("k"); !ok {
				t.Fatalf("request %d after refill denied (retry %v)", i, d)
			}
		}
		if ok, _ := l.Allow("k"); ok {
			t.Error("bucket holds more than the burst")
		}
	})
}

func TestRateLimiterNilAndUnlimited(t *testing.T) {
	var l *RateLimiter
	for i := 0; i < 1000; i++ {
		if ok, d := l.Allow("x"); !ok || d != 0 {
			t.Fatalf("nil limiter: Allow() = %v, %v", ok, d)
		}
	}
	if NewRateLimiter(0, 10) != nil || NewRateLimiter(-1, 10) != nil {
		t.Error("non-positive rate should mean no limiter")
	}
	if l := NewRateLimiter(1, 0); l.burst != 1 {
		t.Errorf("burst 0 raised to %d, want 1", l.burst)
	}
}

// fakeClock lets eviction be tested without waiting minutes.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestRateLimiterEvictsIdle(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := NewRateLimiter(1, 2)
	l.now = clock.now
	for i := 0; i < 100; i++ {
		l.Allow(strconv.Itoa(i))
	}
	if n := l.len(); n != 100 {
		t.Fatalf("%d buckets, want 100", n)
	}
	clock.t = clock.t.Add(5 * time.Minute)
	l.Allow("fresh")
	if n := l.len(); n != 101 {
		t.Fatalf("after 5 min: %d buckets, want 101", n)
	}
	clock.t = clock.t.Add(5*time.Minute + time.Second)
	l.Allow("fresh")
	if n := l.len(); n != 1 {
		t.Fatalf("after 10 min idle: %d buckets, want 1", n)
	}
}

func TestRateLimiterSlowRateKeepsBucketUntilRefilled(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := NewRateLimiter(1.0/3600, 2) // 2 per two hours
	l.now = clock.now
	l.Allow("k")
	l.Allow("k")
	clock.t = clock.t.Add(30 * time.Minute)
	// Dropping the bucket after 10 minutes would hand out a fresh burst.
	if ok, _ := l.Allow("k"); ok {
		t.Fatal("empty bucket forgotten before it refilled")
	}
}

func TestRateLimiterCapsKeys(t *testing.T) {
	l := NewRateLimiter(1, 1)
	l.maxKeys = 10
	for i := 0; i < 1000; i++ {
		l.Allow(strconv.Itoa(i))
	}
	if n := l.len(); n != 10 {
		t.Fatalf("%d buckets, want the cap of 10", n)
	}
	// The most recent keys survive: their buckets are still empty.
	if ok, _ := l.Allow("999"); ok {
		t.Error("recent key's bucket was dropped")
	}
	// An old key was evicted and starts afresh.
	if ok, _ := l.Allow("0"); !ok {
		t.Error("evicted key did not start with a full bucket")
	}
}

func TestRateLimiterConcurrent(t *testing.T) {
	l := NewRateLimiter(0.001, 50) // effectively no refill during the test
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if ok, _ := l.Allow("shared"); ok {
					allowed.Add(1)
				}
				l.Allow(fmt.Sprint("own", g))
			}
		}()
	}
	wg.Wait()
	if n := allowed.Load(); n != 50 {
		t.Errorf("%d requests allowed on one key, want exactly the burst of 50", n)
	}
}

func TestConcurrencyLimitUnderLoad(t *testing.T) {
	const limit = 4
	c := NewConcurrency(limit, 64)
	var cur, peak atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				release, err := c.Acquire(context.Background())
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				n := cur.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				if got := c.InFlight(); got > limit {
					t.Errorf("InFlight() = %d > %d", got, limit)
				}
				time.Sleep(10 * time.Microsecond)
				cur.Add(-1)
				release()
				release() // a second call must not free another slot
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > limit || p < 2 {
		t.Errorf("peak in flight %d, want 2..%d", p, limit)
	}
	if c.InFlight() != 0 || c.Waiting() != 0 {
		t.Errorf("after all released: InFlight %d, Waiting %d", c.InFlight(), c.Waiting())
	}
}

func TestConcurrencyQueueFull(t *testing.T) {
	c := NewConcurrency(1, 1)
	release, err := c.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := c.Acquire(context.Background())
		if err == nil {
			r()
		}
		got <- err
	}()
	waitFor(t, func() bool { return c.Waiting() == 1 })
	if _, err := c.Acquire(context.Background()); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third Acquire = %v, want ErrQueueFull", err)
	}
	release()
	if err := <-got; err != nil {
		t.Fatalf("queued Acquire = %v", err)
	}

	// With no queue, a full limiter refuses at once.
	c0 := NewConcurrency(1, 0)
	r0, _ := c0.Acquire(context.Background())
	if _, err := c0.Acquire(context.Background()); !errors.Is(err, ErrQueueFull) {
		t.Errorf("Acquire with queue 0 = %v, want ErrQueueFull", err)
	}
	r0()
}

func TestConcurrencyCancelFreesPlace(t *testing.T) {
	c := NewConcurrency(1, 2)
	release, _ := c.Acquire(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx)
		cancelled <- err
	}()
	waitFor(t, func() bool { return c.Waiting() == 1 })
	next := make(chan func(), 1)
	go func() {
		r, err := c.Acquire(context.Background())
		if err != nil {
			t.Errorf("second waiter: %v", err)
		}
		next <- r
	}()
	waitFor(t, func() bool { return c.Waiting() == 2 })

	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire = %v, want context.Canceled", err)
	}
	if w := c.Waiting(); w != 1 {
		t.Fatalf("Waiting() after cancel = %d, want 1", w)
	}
	release()
	r := <-next // the slot went to the remaining waiter
	if c.InFlight() != 1 {
		t.Errorf("InFlight() = %d, want 1", c.InFlight())
	}
	r()
	if c.InFlight() != 0 {
		t.Errorf("InFlight() = %d after release, want 0", c.InFlight())
	}

	// A context already done fails without taking a slot.
	if _, err := c.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire(done ctx) = %v", err)
	}
	if c.InFlight() != 0 {
		t.Error("done context took a slot")
	}
}

// TestConcurrencyCancelRace cancels waiters while slots are being handed
// over, checking that no slot is lost or duplicated.
func TestConcurrencyCancelRace(t *testing.T) {
	c := NewConcurrency(2, 100)
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(g%5)*20*time.Microsecond)
				r, err := c.Acquire(ctx)
				if err == nil {
					if n := c.InFlight(); n > 2 {
						t.Errorf("InFlight() = %d > 2", n)
					}
					r()
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	if c.InFlight() != 0 || c.Waiting() != 0 {
		t.Fatalf("leaked: InFlight %d, Waiting %d", c.InFlight(), c.Waiting())
	}
	// Every slot is still usable.
	r1, err1 := c.Acquire(context.Background())
	r2, err2 := c.Acquire(context.Background())
	if err1 != nil || err2 != nil {
		t.Fatalf("Acquire after race: %v, %v", err1, err2)
	}
	r1()
	r2()
}

func TestConcurrencyFIFO(t *testing.T) {
	c := NewConcurrency(1, 10)
	release, _ := c.Acquire(context.Background())
	const n = 8
	order := make(chan int, n)
	for i := 0; i < n; i++ {
		go func() {
			r, err := c.Acquire(context.Background())
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			r()
		}()
		// Queue the waiters one by one so their order is known.
		waitFor(t, func() bool { return c.Waiting() == i+1 })
	}
	release()
	for want := 0; want < n; want++ {
		if got := <-order; got != want {
			t.Fatalf("waiter %d got the slot in turn %d", got, want)
		}
	}
}

func TestConcurrencyNil(t *testing.T) {
	if NewConcurrency(0, 5) != nil {
		t.Fatal("limit 0 should mean no limiter")
	}
	var c *Concurrency
	r, err := c.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r()
	if c.InFlight() != 0 || c.Waiting() != 0 {
		t.Error("nil Concurrency reports load")
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkAllow(b *testing.B) {
	b.Run("one key", func(b *testing.B) {
		l := NewRateLimiter(1e9, 1<<30)
		b.ReportAllocs()
		for b.Loop() {
			l.Allow("client")
		}
	})
	b.Run("many keys parallel", func(b *testing.B) {
		l := NewRateLimiter(1e9, 1<<30)
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = "client-" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				l.Allow(keys[i%len(keys)])
				i++
			}
		})
	})
}

func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("uncontended", func(b *testing.B) {
		c := NewConcurrency(4, 16)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			r, err := c.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			r()
		}
	})
	b.Run("contended parallel", func(b *testing.B) {
		c := NewConcurrency(2, 1<<20)
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r, err := c.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				r()
			}
		})
	})
}
