package probe

import (
	"errors"
	"log/slog"
	"sync"
)

// Memory is what an upstream remembers of the revisions its links spoke.
// The shared link probes on every (re)connect, since the server may have
// been upgraded meanwhile; per-client links use what the shared link
// found. A server that closed the connection on the probe (some stdio
// servers exit on an unknown method) is pinned to Version2025 for the
// life of the upstream, i.e. until a configuration change replaces it, so
// that each reconnect does not kill a process.
//
// A Memory is safe for concurrent use; its zero value remembers nothing.
type Memory struct {
	mu     sync.Mutex
	probed string // the revision the shared link speaks, once connected
	pinned string // Version2025 once the server went away on the probe
}

// Mode is the revision mode of a new link of a server whose transport is
// transport ("sse" speaks only Version2025) and whose protocol_version is
// configured ("" or Auto: probe); perClient: a per-client link, which
// uses what the shared link found.
func (m *Memory) Mode(transport, configured string, perClient bool) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case transport == "sse":
		return Version2025
	case m.pinned != "":
		return m.pinned
	case configured != "" && configured != Auto:
		return configured
	case perClient && m.probed != "":
		return m.probed
	}
	return Auto
}

// Retry reports whether a link whose handshake in mode failed with err
// must be made again pinned to Version2025 (the server went away on the
// probe, or keeps 2025-11-25), and if so pins it and logs why.
func (m *Memory) Retry(mode string, err error, log *slog.Logger) bool {
	if mode != Auto || !(errors.Is(err, ErrKilled) || errors.Is(err, ErrKeep2025)) {
		return false
	}
	m.mu.Lock()
	m.pinned = Version2025
	m.mu.Unlock()
	if errors.Is(err, ErrKilled) {
		log.Warn("server/discover probe failed: the server exited, closed the connection or did not answer; reconnecting pinned to protocol "+Version2025, "reason", err)
	} else {
		log.Info("reconnecting pinned to protocol "+Version2025, "reason", err)
	}
	return true
}

// Found records the revision the shared link speaks: Version2026 when
// speaks2026, else Version2025.
func (m *Memory) Found(speaks2026 bool) {
	version := Version2025
	if speaks2026 {
		version = Version2026
	}
	m.mu.Lock()
	m.probed = version
	m.mu.Unlock()
}

// Speaks2026 reports whether the shared link spoke Version2026 when it
// last connected.
func (m *Memory) Speaks2026() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.probed == Version2026
}
