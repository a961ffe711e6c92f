package console

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Failed logins allowed per client address within loginWindow; more are
// refused (429) until the window ends.
const (
	loginFailures = 5
	loginWindow   = time.Minute
	// maxTracked bounds the addresses remembered; beyond it the oldest
	// windows are dropped first.
	maxTracked = 4096
)

// loginLimiter counts failed logins per client address.
type loginLimiter struct {
	mu    sync.Mutex
	fails map[string]*window
}

type window struct {
	start time.Time
	n     int
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// wait says how long addr must wait before it may try again; 0: now.
func (l *loginLimiter) wait(addr string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.fails[addr]
	if w == nil || now.Sub(w.start) >= loginWindow || w.n < loginFailures {
		return 0
	}
	return w.start.Add(loginWindow).Sub(now)
}

// failed counts a failed login of addr.
func (l *loginLimiter) failed(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fails == nil {
		l.fails = map[string]*window{}
	}
	w := l.fails[addr]
	if w == nil || now.Sub(w.start) >= loginWindow {
		if len(l.fails) >= maxTracked {
			l.prune(now)
		}
		w = &window{start: now}
		l.fails[addr] = w
	}
	w.n++
}

// prune drops the windows that ended, and if none did, all of them (a
// flood of addresses must not grow memory).
func (l *loginLimiter) prune(now time.Time) {
	for a, w := range l.fails {
		if now.Sub(w.start) >= loginWindow {
			delete(l.fails, a)
		}
	}
	if len(l.fails) >= maxTracked {
		clear(l.fails)
	}
}

// loadKey returns the session signing key kept in path, creating it
// (32 random bytes, mode 0600) when it does not exist, so that a restart
// does not log everyone out. An empty path gives a key for this process
// only.
func loadKey(path string) ([]byte, error) {
	key := make([]byte, 32)
	if path == "" {
		rand.Read(key)
		return key, nil
	}
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) != 32 {
			return nil, fmt.Errorf("console session key %s: %d bytes, want 32", path, len(b))
		}
		return b, nil
	}
	if !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading the console session key: %w", err)
	}
	rand.Read(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the console session key's folder: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".console-key-*")
	if err != nil {
		return nil, fmt.Errorf("writing the console session key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("writing the console session key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("writing the console session key: %w", err)
	}
	// Link, not rename: of two processes creating the key at once, one
	// wins and the other reads the winner's.
	if err := os.Link(tmp.Name(), path); err != nil {
		if os.IsExist(err) {
			return loadKey(path)
		}
		return nil, fmt.Errorf("storing the console session key: %w", err)
	}
	return key, nil
}
