package reconnect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/transports"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// server fails its first failures attempts, then connects and serves until
// its context ends or drop is sent to; then the connection ends with
// dropErr (default "connection closed").
type server struct {
	k        *Keeper
	failures int32
	needAuth bool
	attempts atomic.Int32
	live     atomic.Bool
	drop     chan struct{}
	dropErr  error // set before sending to drop
}

func (s *server) Authorize(ctx context.Context) bool { return ctx.Err() == nil }
func (s *server) Failed(wasUp bool) bool             { return s.needAuth }
func (s *server) Live() bool                         { return s.live.Load() }

func (s *server) Serve(ctx context.Context) error {
	if n := s.attempts.Add(1); n <= s.failures {
		return fmt.Errorf("attempt %d: refused", n)
	}
	s.live.Store(true)
	s.k.Connected()
	select {
	case <-ctx.Done():
	case <-s.drop:
	}
	s.live.Store(false)
	if s.dropErr != nil {
		return s.dropErr
	}
	return errors.New("connection closed")
}

func start(t *testing.T, s *server, initial time.Duration) *Keeper {
	t.Helper()
	if s.drop == nil {
		s.drop = make(chan struct{})
	}
	s.k = New(s, discard, initial, initial)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s.k
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRunRetries: failed attempts are counted with their error and a next
// retry; once connected the count starts over.
func TestRunRetries(t *testing.T) {
	s := &server{failures: 3}
	k := start(t, s, time.Millisecond)
	waitFor(t, "connected", func() bool { return k.State() == Connected })
	st := k.Status()
	if st.Retries != 0 || st.LastErr != "" || !st.NextRetry.IsZero() || s.attempts.Load() != 4 {
		t.Fatalf("status %+v after %d attempts, want connected after 4 with no retries or error", st, s.attempts.Load())
	}
	s.drop <- struct{}{}
	waitFor(t, "reconnected", func() bool { return s.attempts.Load() == 5 && k.State() == Connected })
}

// TestRunFailedState: a server that keeps failing is Failed with its last
// error and a next attempt; one that wants authorization says so.
func TestRunFailedState(t *testing.T) {
	for _, tc := range []struct {
		name     string
		needAuth bool
		want     State
	}{
		{"refused", false, Failed},
		{"needs authorization", true, NeedsAuthorization},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{failures: 1 << 30, needAuth: tc.needAuth}
			k := start(t, s, time.Hour)
			waitFor(t, "a failed attempt", func() bool { return k.Status().Retries == 1 })
			st := k.Status()
			if st.State != tc.want || !strings.Contains(st.LastErr, "refused") || st.NextRetry.IsZero() != (tc.want != Failed) {
				t.Fatalf("status %+v, want %s with the error (and the next attempt when failed)", st, tc.want)
			}
			state, next, lastErr := k.Retry()
			if state != tc.want || time.Until(next) < 20*time.Minute || lastErr != st.LastErr {
				t.Fatalf("Retry() = %s, %v, %q, want the state, the next attempt in about an hour and the error", state, next, lastErr)
			}
		})
	}
}

// TestAwaitHeals: a call waiting for a server in a long backoff gets an
// attempt at once, and is answered when it connects.
func TestAwaitHeals(t *testing.T) {
	s := &server{failures: 1}
	k := start(t, s, time.Hour)
	waitFor(t, "a failed attempt", func() bool { return k.State() == Failed })
	if err := k.Await(context.Background(), 5*time.Second, nil); err != nil {
		t.Fatalf("Await: %v, want the server connected by an attempt at once", err)
	}
	if n := s.attempts.Load(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

// TestAwaitFails: why a call that waited gives up.
func TestAwaitFails(t *testing.T) {
	removed := make(chan struct{})
	close(removed)
	for _, tc := range []struct {
		name     string
		needAuth bool
		removed  chan struct{}
		want     string
	}{
		{"still down", false, nil, "still disconnected after waiting 300ms for a reconnection"},
		{"needs authorization", true, nil, "it needs authorization"},
		{"removed", false, removed, "it was removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{failures: 1 << 30, needAuth: tc.needAuth}
			k := start(t, s, time.Hour)
			waitFor(t, "a failed attempt", func() bool { return k.Status().Retries >= 1 })
			err := k.Await(context.Background(), 300*time.Millisecond, tc.removed)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Await: %v, want %q", err, tc.want)
			}
			if tc.name == "still down" {
				if !errors.Is(err, ErrStillDown) {
					t.Fatalf("Await: %v is not ErrStillDown", err)
				}
				// Retried while the call waited, at most every RetryFloor.
				if n := s.attempts.Load(); n < 2 || n > 3 {
					t.Fatalf("%d attempts while a call waited 300ms, want 2 or 3", n)
				}
			}
		})
	}
}

// TestRunExpiredSession: a server that forgot the session is
// re-initialized at once, not after the backoff.
func TestRunExpiredSession(t *testing.T) {
	s := &server{}
	k := start(t, s, time.Hour)
	waitFor(t, "connected", func() bool { return k.State() == Connected })
	s.dropErr = transports.ErrSessionExpired
	s.drop <- struct{}{}
	waitFor(t, "re-initialized", func() bool { return s.attempts.Load() == 2 && k.State() == Connected })
}

// pinger answers pings with the errors in answers, in turn (then nil),
// and records why it failed.
type pinger struct {
	mu      sync.Mutex
	answers []error
	failed  chan error
}

func (p *pinger) Ping(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.answers) == 0 {
		return nil
	}
	err := p.answers[0]
	p.answers = p.answers[1:]
	return err
}

func (p *pinger) Fail(err error) { p.failed <- err }

// TestWatch: an answer (even an error) keeps the connection, an
// unreachable server fails it at once, Misses timeouts in a row fail it.
func TestWatch(t *testing.T) {
	timeout := context.DeadlineExceeded
	unreachable := fmt.Errorf("%w: connection refused", ErrUnreachable)
	for _, tc := range []struct {
		name    string
		answers []error
		want    string // "": not failed
	}{
		{"answers", []error{nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no ping"}, nil}, ""},
		{"misses then answers", []error{timeout, timeout, nil, timeout, timeout}, ""},
		{"misses", []error{timeout, nil, timeout, timeout, timeout}, "health check: 3 pings in a row unanswered: context deadline exceeded"},
		{"unreachable", []error{unreachable}, "health check: unreachable: connection refused"},
		{"answered unreachable", []error{Answered{&jsonrpc.Error{Code: 1, Message: "401"}}}, "health check: 401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := New(&server{}, discard, 0, 0)
			p := &pinger{answers: tc.answers, failed: make(chan error, 1)}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			now := make(chan struct{})
			go func() {
				defer close(done)
				k.Watch(ctx, Health{Interval: time.Hour, Timeout: time.Second, Misses: 3}, p, now)
			}()
		pings:
			for range len(tc.answers) + 1 {
				select {
				case now <- struct{}{}:
				case <-done:
					break pings
				}
			}
			cancel()
			<-done
			var got string
			select {
			case err := <-p.failed:
				got = err.Error()
			default:
			}
			if got != tc.want {
				t.Fatalf("failed with %q, want %q", got, tc.want)
			}
			if k.Status().LastHealth.IsZero() {
				t.Fatal("no health check recorded")
			}
		})
	}
}

func TestWait(t *testing.T) {
	for _, tc := range []struct {
		reconnect, timeout, server, want time.Duration
	}{
		{0, 0, time.Minute, DefaultWait},
		{5 * time.Second, 0, time.Minute, 5 * time.Second},
		{5 * time.Second, time.Second, time.Minute, time.Second},
		{5 * time.Second, 0, 3 * time.Second, 3 * time.Second},
	} {
		t.Run(fmt.Sprint(tc.reconnect, tc.timeout, tc.server), func(t *testing.T) {
			if got := Wait(tc.reconnect, tc.timeout, tc.server); got != tc.want {
				t.Fatalf("Wait = %s, want %s", got, tc.want)
			}
		})
	}
}
