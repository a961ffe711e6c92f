package events

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestBus checks what a subscriber, the log and the observer see of an
// event, that a full subscriber loses events instead of holding the
// gateway, and that a subscription ends once.
func TestBus(t *testing.T) {
	var logged bytes.Buffer
	b := New(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if b.Wanted(slog.LevelDebug) {
		t.Fatal("a debug event is wanted with no subscriber, no observer and the log at INFO")
	}
	var observed []Event
	b.Observe = func(ev Event) { observed = append(observed, ev) }
	b.Wants = func() bool { return true }
	if !b.Wanted(slog.LevelDebug) {
		t.Fatal("a debug event is not wanted by an observer that wants events")
	}
	ch, stop := b.Subscribe(1)
	b.Emit(slog.LevelInfo, Event{Type: ServerConnected, Server: "a", Transport: "stdio"})
	b.Emit(slog.LevelDebug, Event{Type: ToolExecuted, Server: "a", Tool: "echo", Success: true}) // the buffer is full: dropped

	if ev := <-ch; ev.Type != ServerConnected || ev.Time.IsZero() {
		t.Errorf("the subscriber got %+v, want the server_connected event, stamped", ev)
	}
	if len(ch) != 0 || b.dropped.Load() != 1 {
		t.Errorf("%d queued, %d dropped: want the second event dropped, not waited for", len(ch), b.dropped.Load())
	}
	if len(observed) != 2 {
		t.Errorf("the observer got %d events, want 2", len(observed))
	}
	if strings.Count(logged.String(), "\n") != 1 || !strings.Contains(logged.String(), "server_connected") {
		t.Errorf("log %q: want the INFO event only", logged.String())
	}
	stop()
	stop() // idempotent
	if b.n.Load() != 0 {
		t.Errorf("%d subscribers after stop, want 0", b.n.Load())
	}
}
