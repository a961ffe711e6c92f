package gateway

import (
	"context"
	"encoding/json"

	"github.com/edge-mcp/edge-mcp/runtime/console"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// consoleSource is what the operator console (package console) reads of
// the gateway beyond the admin operations.
type consoleSource struct{ g *Gateway }

func (c consoleSource) Upstreams() []console.Upstream {
	st := c.g.Status()
	out := make([]console.Upstream, len(st))
	for i, s := range st {
		out[i] = console.Upstream{Name: s.Name, Transport: s.Transport, State: string(s.State), Protocol: s.ProtocolVersion,
			Tools: s.Tools, Prompts: s.Prompts, Resources: s.Resources, Retries: s.Retries,
			LastHealthCheck: s.LastHealthCheck, NextRetry: s.NextRetry, LastError: s.LastError}
	}
	return out
}

// Tools lists what every upstream offers now (withheld tools included:
// the console shows the catalogue as upstreams send it), with the names
// clients see.
func (c consoleSource) Tools() []console.Tool {
	ups, offers := c.g.route.offers()
	var out []console.Tool
	for i, u := range ups {
		if offers[i] == nil {
			continue
		}
		for _, it := range offers[i][kindTools] {
			var d struct {
				Description string `json:"description"`
			}
			json.Unmarshal(it.Raw, &d)
			name := it.Exposed
			if name == "" {
				name = it.Name
			}
			out = append(out, console.Tool{Server: u.name, Name: name, Description: d.Description})
		}
	}
	return out
}

func (c consoleSource) Sessions() int { return len(c.g.route.allSessions()) }

func (c consoleSource) Fleet(ctx context.Context) *fleet.Status { return c.g.fleet.Status(ctx) }
