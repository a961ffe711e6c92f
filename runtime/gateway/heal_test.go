package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// answer is one call's outcome, when it came.
type answer struct {
	start, at time.Time
	err       error
}

// caller calls echo through cs one call after another until stop, and
// records every answer.
type caller struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	done    chan struct{}
}

func startCaller(t *testing.T, cs *mcp.ClientSession) *caller {
	c := &caller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for i := 0; ; i++ {
			select {
			case <-c.stop:
				return
			default:
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			text := "call " + strconv.Itoa(i)
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
			cancel()
			if err == nil && (r.IsError || textOf(r) != text) {
				err = fmt.Errorf("answer %q (isError %v), want %q", textOf(r), r.IsError, text)
			}
			c.mu.Lock()
			c.answers = append(c.answers, answer{start, time.Now(), err})
			c.mu.Unlock()
			if err != nil {
				time.Sleep(20 * time.Millisecond) // the old gateway fails at once
			}
		}
	}()
	t.Cleanup(func() { c.halt() })
	return c
}

func (c *caller) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

// firstSuccessAfter waits up to within for a successful answer after
// since (of a call started after since too, when sentAfter) and returns
// how long after since it came.
func (c *caller) firstSuccessAfter(t *testing.T, since time.Time, sentAfter bool, within time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c.mu.Lock()
		for _, a := range c.answers {
			if a.err == nil && a.at.After(since) && (!sentAfter || a.start.After(since)) {
				c.mu.Unlock()
				return a.at.Sub(since)
			}
		}
		var last error
		if n := len(c.answers); n > 0 {
			last = c.answers[n-1].err
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no call succeeded within %s (last error: %v)", within, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHealHTTPUpstreamRestart: a real upstream process (streamable HTTP)
// is killed and started again on the same port, four times; while a
// client keeps calling, the first call to succeed after the upstream
// listens again does so within a second, every time (the backoff does not
// grow while calls wait, and calls to the disconnected server trigger the
// reconnection).
func TestHealHTTPUpstreamRestart(t *testing.T) {
	t.Parallel()
	up := testenv.StartEchoUpstream(t)
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}}}`, up.URL()), Options{})
	cs := connect(t, url, nil)
	c := startCaller(t, cs)
	c.firstSuccessAfter(t, time.Now().Add(-time.Hour), false, 10*time.Second)
	for cycle := 1; cycle <= 4; cycle++ {
		up.Kill()
		time.Sleep(time.Second)
		if err := up.Start(); err != nil {
			t.Fatal(err)
		}
		listening := time.Now()
		took := c.firstSuccessAfter(t, listening, false, 15*time.Second)
		t.Logf("cycle %d: first success %s after the upstream listened again", cycle, took.Round(time.Millisecond))
		if took > time.Second {
			t.Errorf("cycle %d: the first call succeeded %s after the upstream was back; want within 1s", cycle, took.Round(time.Millisecond))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestHealStdioChildRestart: a stdio child is killed, four times; the
// gateway starts it again at once for the calls that wait, and the first
// call succeeds within a second of the kill.
func TestHealStdioChildRestart(t *testing.T) {
	t.Parallel()
	bin := testenv.EchoServer(t)
	pidfile := filepath.Join(t.TempDir(), "pid")
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"up": {"command": %q, "args": ["-stdio", "-pidfile", %q]}}}`, bin, pidfile), Options{})
	cs := connect(t, url, nil)
	c := startCaller(t, cs)
	c.firstSuccessAfter(t, time.Now().Add(-time.Hour), false, 10*time.Second)
	last := 0
	for cycle := 1; cycle <= 4; cycle++ {
		var pid int
		waitFor(t, "the child to write its pid", func() bool {
			b, _ := os.ReadFile(pidfile)
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return pid != 0 && pid != last
		})
		last = pid
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("killing the child %d: %v", pid, err)
		}
		took := c.firstSuccessAfter(t, killed, true, 15*time.Second)
		t.Logf("cycle %d: first success %s after the child was killed", cycle, took.Round(time.Millisecond))
		if took > time.Second {
			t.Errorf("cycle %d: the first call succeeded %s after the child was killed; want within 1s", cycle, took.Round(time.Millisecond))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
