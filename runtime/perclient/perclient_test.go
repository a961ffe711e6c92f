package perclient

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// owner is a session of identity name with a client-memory budget of
// budget links (negative: unbounded).
type owner struct {
	name    string
	counted bool
	budget  *int
}

func (o owner) Identity() (string, bool) { return o.name, o.counted }

func (o owner) Hold() (func(), error) {
	if o.budget == nil {
		return func() {}, nil
	}
	if *o.budget == 0 {
		return nil, fmt.Errorf("%w: over the client memory budget", ErrTooMany)
	}
	*o.budget--
	return func() { *o.budget++ }, nil
}

// TestLimits: entries are refused outside the run, beyond the limit in
// all, beyond the limit of a counted identity, and over the memory budget.
func TestLimits(t *testing.T) {
	budget := 1
	for _, tc := range []struct {
		name    string
		started bool
		have    []owner
		add     owner
		want    error
	}{
		{"stopped", false, nil, owner{name: "a"}, ErrStopped},
		{"first", true, nil, owner{name: "a"}, nil},
		{"limit in all", true, []owner{{name: "a"}, {name: "b"}, {name: "c"}}, owner{name: "d"}, ErrTooMany},
		{"per identity", true, []owner{{name: "a"}, {name: "a"}}, owner{name: "a", counted: true}, ErrTooMany},
		{"per identity, anonymous", true, []owner{{name: "a"}, {name: "a"}}, owner{name: "a"}, nil},
		{"memory", true, nil, owner{name: "a", budget: new(int)}, ErrTooMany},
		{"memory left", true, nil, owner{name: "a", budget: &budget}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Set[int, string]
			if tc.started {
				c.Start(context.Background())
			}
			for i, o := range tc.have {
				if _, _, err := c.Add(i, o, 3, 2); err != nil {
					t.Fatalf("adding %d: %v", i, err)
				}
			}
			e, opener, err := c.Add(100, tc.add, 3, 2)
			if !errors.Is(err, tc.want) || (err == nil) != (e != nil && opener != nil) {
				t.Fatalf("Add = %v, %v, %v; want %v", e, opener, err, tc.want)
			}
		})
	}
}

// TestLifetime: an entry is added once, opened once, seen open only once
// opened without error, and Stop waits until every entry is done.
func TestLifetime(t *testing.T) {
	var c Set[int, string]
	c.Start(context.Background())
	e, opener, err := c.Add(1, owner{name: "a"}, 4, 4)
	if err != nil || opener == nil {
		t.Fatalf("Add = %v, %v", opener, err)
	}
	if again, o2, err := c.Add(1, owner{name: "a"}, 4, 4); again != e || o2 != nil || err != nil {
		t.Fatalf("second Add = %p, %v, %v; want the same entry, nothing to open", again, o2, err)
	}
	if _, ok := c.Open(1); ok || len(c.OpenLinks()) != 0 {
		t.Fatal("an entry still opening is open")
	}
	e.Opened("link", nil)
	if l, ok := c.Open(1); !ok || l != "link" || len(c.OpenLinks()) != 1 {
		t.Fatalf("Open = %q, %v after Opened", l, ok)
	}
	f, _, _ := c.Add(2, owner{name: "a"}, 4, 4)
	f.Opened("", errors.New("refused"))
	if _, ok := c.Open(2); ok || len(c.OpenLinks()) != 1 || c.Count() != 2 {
		t.Fatal("a link that failed to open is open")
	}
	c.Forget(2, f)
	c.Done(f)
	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned with an entry not done")
	case <-time.After(50 * time.Millisecond):
	}
	if _, _, err := c.Add(3, owner{name: "a"}, 4, 4); !errors.Is(err, ErrStopped) {
		t.Fatalf("Add while stopping: %v, want ErrStopped", err)
	}
	c.Forget(1, e)
	c.Done(e)
	<-stopped
	if c.Count() != 0 {
		t.Fatalf("%d entries after Stop", c.Count())
	}
}
