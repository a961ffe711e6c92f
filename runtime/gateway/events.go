package gateway

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/policy"
)

// Event types.
const (
	EventServerConnected    = "server_connected"
	EventServerDisconnected = "server_disconnected"
	EventToolExecuted       = "tool_executed"
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

// events is the gateway's in-process event stream: every event is logged
// once as a structured record and handed to every subscriber. Lifecycle
// events (server_connected, server_disconnected) are logged at INFO (WARN
// when a server is lost); tool_executed, one per call, at DEBUG: the audit
// log is the record of calls.
type events struct {
	log     *slog.Logger
	mu      sync.Mutex
	subs    map[chan Event]struct{}
	n       atomic.Int32 // number of subscribers, read without the lock
	dropped atomic.Int64
	// observe, when set, also receives every event (policy modules with an
	// event hook); wants reports whether it would use them.
	observe func(Event)
	wants   func() bool
}

// wanted reports whether anybody would see an event at level: callers skip
// building events (and scanning results) otherwise.
func (e *events) wanted(level slog.Level) bool {
	return e.n.Load() > 0 || e.log.Enabled(context.Background(), level) || (e.wants != nil && e.wants())
}

func (e *events) emit(level slog.Level, ev Event) {
	ev.Time = time.Now()
	if e.log.Enabled(context.Background(), level) {
		attrs := []slog.Attr{slog.String("server_name", ev.Server)}
		switch ev.Type {
		case EventServerConnected:
			attrs = append(attrs, slog.String("transport", ev.Transport), slog.String("protocol_version", ev.ProtocolVersion),
				slog.Int("tools", ev.Tools), slog.Int("prompts", ev.Prompts), slog.Int("resources", ev.Resources), slog.Int("templates", ev.Templates))
		case EventServerDisconnected:
			attrs = append(attrs, slog.String("transport", ev.Transport), slog.String("reason", ev.Reason), slog.Bool("had_session", ev.HadSession))
		case EventToolExecuted:
			attrs = append(attrs, slog.String("tool_name", ev.Tool), slog.Bool("success", ev.Success),
				slog.Float64("duration_ms", float64(ev.Duration.Microseconds())/1000), slog.Int("content_length", ev.ContentLength))
			if ev.ErrorMessage != "" {
				attrs = append(attrs, slog.String("error_message", ev.ErrorMessage))
			}
		}
		e.log.LogAttrs(context.Background(), level, ev.Type, attrs...)
	}
	if e.observe != nil {
		e.observe(ev)
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
func (e *events) Subscribe(buffer int) (<-chan Event, func()) {
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

// policyEvents connects the events to the modules with an event hook.
type policyEvents struct{ g *Gateway }

// observe hands a gateway event to the modules with an event hook, off the
// request path.
func (pe policyEvents) observe(ev Event) {
	g := pe.g
	if !g.pol.hooks().Has(policy.HookEvent) {
		return
	}
	pev := policy.Event{Kind: ev.Type, Server: ev.Server, Tool: ev.Tool, Duration: ev.Duration,
		IsError: !ev.Success && ev.Type == EventToolExecuted, Error: ev.ErrorMessage, Time: ev.Time}
	if ev.Type == EventServerDisconnected {
		pev.Error = ev.Reason
	}
	pg := g.pol.acquire()
	if pg == nil {
		return
	}
	go func() {
		defer g.pol.release(pg)
		pg.chain.Event(g.ctx, pev) //nolint:errcheck // failures are logged and counted by the module
	}()
}
