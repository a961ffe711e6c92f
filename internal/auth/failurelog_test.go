package auth

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFailedAuthLoggedOncePerAddress hammers the middleware with a bad key:
// one log line per client address per minute, the next one saying how many
// failures it left out, while every request still gets its 401.
func TestFailedAuthLoggedOncePerAddress(t *testing.T) {
	var (
		buf   syncBuffer
		clock = time.Unix(1_700_000_000, 0)
		mu    sync.Mutex
	)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	g := newGateway(t, func(string) *Authenticator {
		return newAuth(t, apiKeyConfig(), Options{Logger: debugLogger(&buf), now: now})
	})
	lines := func() int { return strings.Count(buf.String(), "authentication failed") }
	for range 50 {
		resp, _ := g.do(t, http.MethodPost, "/mcp", "Authorization", "Bearer nope-nope-nope-nope-nope")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	}
	if n := lines(); n != 1 {
		t.Fatalf("50 failures from one address logged %d times, want once:\n%s", n, buf.String())
	}
	mu.Lock()
	clock = clock.Add(failureLogInterval)
	mu.Unlock()
	g.do(t, http.MethodPost, "/mcp", "Authorization", "Bearer nope-nope-nope-nope-nope")
	if n := lines(); n != 2 || !strings.Contains(buf.String(), "not_logged_since_last=49") {
		t.Fatalf("after the interval: %d lines, want 2 with not_logged_since_last=49:\n%s", n, buf.String())
	}
}

func TestFailureLimiterBounded(t *testing.T) {
	clock := time.Unix(0, 0)
	l := newFailureLimiter(time.Minute, func() time.Time { return clock })
	for i := range maxFailureAddrs + 10 {
		if log, _ := l.allow(fmt.Sprintf("10.0.%d.%d:4711", i/256, i%256)); !log {
			t.Fatalf("the first failure of address %d was not logged", i)
		}
	}
	if len(l.addrs) > maxFailureAddrs {
		t.Fatalf("%d addresses remembered, want at most %d", len(l.addrs), maxFailureAddrs)
	}
}
