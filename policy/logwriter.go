package policy

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
)

// guestLogBudget is how many bytes of stdout+stderr one instance may log per
// hook call (and during instantiation). The rest is dropped and counted.
const guestLogBudget = 4 << 10

// maxLogLine caps a single buffered line.
const maxLogLine = 1 << 10

// guestLog turns a guest's stdout and stderr (WASI fd_write) into log
// records tagged with the module name, one record per line, within a
// per-call byte budget. It also notices "out of memory" so a Go guest that
// dies at its memory cap is reported as such.
type guestLog struct {
	log    *slog.Logger
	module string

	mu      sync.Mutex
	budget  int
	dropped int
	oom     bool
	partial [2][]byte
}

func newGuestLog(log *slog.Logger, module string) *guestLog {
	return &guestLog{log: log, module: module, budget: guestLogBudget}
}

// begin starts a new call's budget.
func (g *guestLog) begin() {
	g.mu.Lock()
	g.budget = guestLogBudget
	g.oom = false
	g.mu.Unlock()
}

// end emits a trailing partial line and reports dropped output.
func (g *guestLog) end() {
	g.mu.Lock()
	g.flushLocked()
	g.mu.Unlock()
}

// sawOOM reports whether the guest printed an out-of-memory message since
// the last reset.
func (g *guestLog) sawOOM() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.oom
}

func (g *guestLog) flushLocked() {
	for fd := range g.partial {
		if len(g.partial[fd]) > 0 {
			g.emitLocked(fd, g.partial[fd])
			g.partial[fd] = g.partial[fd][:0]
		}
	}
	if g.dropped > 0 {
		g.log.LogAttrs(context.Background(), slog.LevelWarn, "policy module output dropped",
			slog.String("module", g.module), slog.Int("bytes", g.dropped))
		g.dropped = 0
	}
}

func (g *guestLog) emitLocked(fd int, line []byte) {
	if bytes.Contains(line, []byte("out of memory")) {
		g.oom = true
	}
	level, stream := slog.LevelInfo, "stdout"
	if fd == 1 {
		level, stream = slog.LevelWarn, "stderr"
	}
	g.log.LogAttrs(context.Background(), level, string(line),
		slog.String("module", g.module), slog.String("stream", stream))
}

func (g *guestLog) write(fd int, p []byte) (int, error) {
	n := len(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	if bytes.Contains(p, []byte("out of memory")) {
		g.oom = true
	}
	for len(p) > 0 {
		if g.budget <= 0 {
			g.dropped += len(p)
			break
		}
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if len(chunk) > g.budget {
			chunk = chunk[:g.budget]
		}
		g.budget -= len(chunk)
		room := maxLogLine - len(g.partial[fd])
		if room > len(chunk) {
			room = len(chunk)
		}
		g.partial[fd] = append(g.partial[fd], chunk[:room]...)
		g.dropped += len(chunk) - room
		p = p[len(chunk):]
		if len(p) > 0 && p[0] == '\n' {
			g.emitLocked(fd, g.partial[fd])
			g.partial[fd] = g.partial[fd][:0]
			p = p[1:]
		}
	}
	return n, nil
}

type guestStream struct {
	g  *guestLog
	fd int
}

func (s guestStream) Write(p []byte) (int, error) { return s.g.write(s.fd, p) }
