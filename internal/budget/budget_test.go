package budget

import (
	"sync"
	"testing"
)

func TestCharge(t *testing.T) {
	tests := []struct {
		name         string
		total, share int64
		shared       bool
		charges      []int64 // by identity a, then b
		wantA, wantB []bool
	}{
		{"within the share", 100, 50, true, []int64{20, 20}, []bool{true, true}, []bool{true, true}},
		{"over the share", 100, 50, true, []int64{30, 30}, []bool{true, false}, []bool{true, false}},
		{"over the total", 100, 60, true, []int64{50, 10}, []bool{true, true}, []bool{false, true}},
		{"unshared: the total", 100, 10, false, []int64{45, 45}, []bool{true, true}, []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.total, tt.share)
			a, b := p.Acquire("a", tt.shared), p.Acquire("b", tt.shared)
			for i, n := range tt.charges {
				if got := a.Charge(Resumption, n); got != tt.wantA[i] {
					t.Errorf("a's charge %d of %d: %v, want %v", i, n, got, tt.wantA[i])
				}
			}
			for i, n := range tt.charges {
				if got := b.Charge(InputRounds, n); got != tt.wantB[i] {
					t.Errorf("b's charge %d of %d: %v, want %v", i, n, got, tt.wantB[i])
				}
			}
			if st := p.Stats(); st.Used != a.Used()+b.Used() || st.Used > tt.total ||
				st.Stores[Resumption].Used != a.Used() || st.Stores[InputRounds].Used != b.Used() {
				t.Errorf("stats %+v, accounts hold %d and %d", st, a.Used(), b.Used())
			}
		})
	}
}

func TestCreditAndRelease(t *testing.T) {
	p := New(1000, 100)
	a := p.Acquire("a", true)
	a2 := p.Acquire("a", true)
	if a != a2 {
		t.Fatal("two accounts for one identity")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if a.Charge(Resumption, 10) {
					a.Credit(Resumption, 10)
				}
			}
		})
	}
	wg.Wait()
	if a.Used() != 0 || p.Stats().Used != 0 {
		t.Fatalf("after crediting every charge: account %d, pool %d", a.Used(), p.Stats().Used)
	}
	a.Release()
	if p.Stats().Identities != 1 {
		t.Fatal("released while still held")
	}
	a2.Release()
	if p.Stats().Identities != 0 {
		t.Fatal("not forgotten after the last release")
	}
}

func TestUnlimited(t *testing.T) {
	var p *Pool = New(0, 0)
	a := p.Acquire("a", true)
	if !a.Charge(Resumption, 1<<40) || p.Stats() != nil {
		t.Fatal("the nil pool must grant everything and report nothing")
	}
	a.Credit(Resumption, 1<<40)
	a.Release()
}

// TestHold: a held item is credited once however often its release is
// called, and one over the share is refused and counted.
func TestHold(t *testing.T) {
	p := New(100, 50)
	release := p.Acquire("a", true).Hold(Streams, 30)
	if release == nil {
		t.Fatal("the first hold was refused")
	}
	if p.Acquire("a", true).Hold(Streams, 30) != nil {
		t.Error("a hold over the share was granted")
	}
	release()
	release()
	st := p.Stats()
	if st.Used != 0 || st.Identities != 0 || st.Stores[Streams].Refused != 1 {
		t.Errorf("after the release: %+v", st)
	}
	var nilAcct *Account
	nilAcct.Hold(Streams, 30)() // the unlimited pool grants and forgets
}
