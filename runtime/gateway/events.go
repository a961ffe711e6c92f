package gateway

import (
	"log/slog"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/events"
)

// Event is one thing that happened in the gateway (package events).
type Event = events.Event

// eventBus is the gateway's event stream.
type eventBus = events.Bus

func newEventBus(log *slog.Logger) *eventBus { return events.New(log) }

// Event types.
const (
	EventServerConnected    = events.ServerConnected
	EventServerDisconnected = events.ServerDisconnected
	EventToolExecuted       = events.ToolExecuted
)

// policyEvents connects the events to the modules with an event hook.
type policyEvents struct{ g *Gateway }

// observe hands a gateway event to the modules with an event hook, off the
// request path.
func (pe policyEvents) observe(ev Event) {
	g := pe.g
	if !g.pol.Hooks().Has(policy.HookEvent) {
		return
	}
	pev := policy.Event{Kind: ev.Type, Server: ev.Server, Tool: ev.Tool, Duration: ev.Duration,
		IsError: !ev.Success && ev.Type == EventToolExecuted, Error: ev.ErrorMessage, Time: ev.Time}
	if ev.Type == EventServerDisconnected {
		pev.Error = ev.Reason
	}
	pg := g.pol.Acquire()
	if pg == nil {
		return
	}
	go func() {
		defer g.pol.Release(pg)
		pg.Chain().Event(g.ctx, pev) //nolint:errcheck // failures are logged and counted by the module
	}()
}
