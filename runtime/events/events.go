// Package events is the gateway's event stream: servers connecting and
// disconnecting, tools executed. Each event is logged once as a structured
// record and handed to every subscriber and to the policy modules with an
// event hook (Bus.Observe).
package events

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Event types.
const (
	ServerConnected    = "server_connected"
	ServerDisconnected = "server_disconnected"
	ToolExecuted       = "tool_executed"
)

// Event is one thing that happened in the gateway. Which fields are set
// depends on Type. Tool arguments are never part of an event.
type Event struct {
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	Server    string    `json:"server_name"`
	Transport string    `json:"transport,omitempty"`

	// server_connected
	ProtocolVersion string `json:"protocol_version,omitempty"`
	Tools           int    `json:"tools,omitempty"`
	Prompts         int    `json:"prompts,omitempty"`
	Resources       int    `json:"resources,omitempty"`
	Templates       int    `json:"templates,omitempty"`

	// server_disconnected
	Reason     string `json:"reason,omitempty"`
	HadSession bool   `json:"had_session,omitempty"`

	// tool_executed
	Tool          string        `json:"tool_name,omitempty"`
	Success       bool          `json:"success,omitempty"`
	Duration      time.Duration `json:"duration,omitempty"`
	ContentLength int           `json:"content_length,omitempty"`
	ErrorMessage  string        `json:"error_message,omitempty"`
}

// Bus is the gateway's in-process event stream: every event is logged
// once as a structured record and handed to every subscriber. Lifecycle
// events (server_connected, server_disconnected) are logged at INFO (WARN
// when a server is lost); tool_executed, one per call, at DEBUG: the audit
// log is the record of calls.
type Bus struct {
	log     *slog.Logger
	mu      sync.Mutex
	subs    map[chan Event]struct{}
	n       atomic.Int32 // number of subscribers, read without the lock
	dropped atomic.Int64
	// Observe, when set, also receives every event (policy modules with an
	// event hook); Wants reports whether it would use them. Both are set
	// before the first event.
	Observe func(Event)
	Wants   func() bool
}

// New returns a bus that logs to log.
func New(log *slog.Logger) *Bus { return &Bus{log: log} }

// Wanted reports whether anybody would see an event at level: callers skip
// building events (and scanning results) otherwise.
func (e *Bus) Wanted(level slog.Level) bool {
	return e.n.Load() > 0 || e.log.Enabled(context.Background(), level) || (e.Wants != nil && e.Wants())
}

// Emit stamps ev with the time, logs it at level, and hands it on.
func (e *Bus) Emit(level slog.Level, ev Event) {
	ev.Time = time.Now()
	if e.log.Enabled(context.Background(), level) {
		attrs := []slog.Attr{slog.String("server_name", ev.Server)}
		switch ev.Type {
		case ServerConnected:
			attrs = append(attrs, slog.String("transport", ev.Transport), slog.String("protocol_version", ev.ProtocolVersion),
				slog.Int("tools", ev.Tools), slog.Int("prompts", ev.Prompts), slog.Int("resources", ev.Resources), slog.Int("templates", ev.Templates))
		case ServerDisconnected:
			attrs = append(attrs, slog.String("transport", ev.Transport), slog.String("reason", ev.Reason), slog.Bool("had_session", ev.HadSession))
		case ToolExecuted:
			attrs = append(attrs, slog.String("tool_name", ev.Tool), slog.Bool("success", ev.Success),
				slog.Float64("duration_ms", float64(ev.Duration.Microseconds())/1000), slog.Int("content_length", ev.ContentLength))
			if ev.ErrorMessage != "" {
				attrs = append(attrs, slog.String("error_message", ev.ErrorMessage))
			}
		}
		e.log.LogAttrs(context.Background(), level, ev.Type, attrs...)
	}
	if e.Observe != nil {
		e.Observe(ev)
	}
	if e.n.Load() == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch := range e.subs {
		select {
		case ch <- ev:
		default:
			e.dropped.Add(1) // a slow subscriber loses events, the gateway does not wait
		}
	}
}

// Subscribe returns a channel that receives every event from now on (up to
// buffer events may queue; beyond that a slow subscriber loses events) and a
// function that ends the subscription.
func (e *Bus) Subscribe(buffer int) (<-chan Event, func()) {
	ch := make(chan Event, buffer)
	e.mu.Lock()
	if e.subs == nil {
		e.subs = make(map[chan Event]struct{})
	}
	e.subs[ch] = struct{}{}
	e.n.Add(1)
	e.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			e.mu.Lock()
			delete(e.subs, ch)
			e.n.Add(-1)
			e.mu.Unlock()
		})
	}
}
