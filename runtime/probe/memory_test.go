package probe

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestMemory: the mode of a new link follows the transport, the pin, the
// configuration and (for per-client links) what the shared link found.
func TestMemory(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var m Memory
	if got := m.Mode("stdio", "", true); got != Auto {
		t.Fatalf("a new memory: mode %q, want auto", got)
	}
	if got := m.Mode("sse", Version2026, false); got != Version2025 {
		t.Fatalf("legacy SSE: mode %q, want %s", got, Version2025)
	}
	if got := m.Mode("stdio", Version2026, true); got != Version2026 {
		t.Fatalf("configured: mode %q", got)
	}
	m.Found(true)
	if got := m.Mode("streamable-http", Auto, true); got != Version2026 || !m.Speaks2026() {
		t.Fatalf("per-client link after the shared one found 2026: mode %q", got)
	}
	if got := m.Mode("streamable-http", Auto, false); got != Auto {
		t.Fatalf("the shared link probes again: mode %q", got)
	}
	for _, tc := range []struct {
		mode string
		err  error
		want bool
	}{
		{Version2026, ErrKilled, false},
		{Auto, errors.New("refused"), false},
		{Auto, fmt.Errorf("probing: %w", ErrKeep2025), true},
		{Auto, ErrKilled, true},
	} {
		if got := m.Retry(tc.mode, tc.err, log); got != tc.want {
			t.Fatalf("Retry(%s, %v) = %v", tc.mode, tc.err, got)
		}
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"server/discover probe failed") || !strings.Contains(logs.String(), "level=INFO msg=\"reconnecting pinned") {
		t.Fatalf("log %s: want the kill warned, the keep noted", logs.String())
	}
	if got := m.Mode("stdio", Version2026, false); got != Version2025 {
		t.Fatalf("pinned: mode %q, want %s over the configuration", got, Version2025)
	}
	m.Found(false)
	if m.Speaks2026() {
		t.Fatal("Speaks2026 after 2025 was found")
	}
}
