package gateway

import (
	"math"
	"runtime/debug"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// The budget of memory clients can make the gateway hold for them
// (internal/budget): the events streamable HTTP sessions keep for
// resumption (transports), the upstream requests parked for a 2026-07-28
// client's input_required retry (bridge.go), the task records (tasks.go),
// the upstream sessions of per_client servers (clients.go) and the open
// downstream streams (transports), charged to the identity of the client.

// clientMemory is the pool of limits.client_memory, else a quarter of the
// Go memory limit when one is set (at least 16 MiB), else 1 GiB; one
// identity's share is limits.client_memory_per_identity, else a quarter
// of the pool. Read at start.
func clientMemory(l config.Limits) *budget.Pool {
	total := l.ClientMemory
	if total == 0 {
		total = 1 << 30
		if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
			total = max(lim/4, 16<<20)
		}
	}
	share := l.ClientMemoryPerIdentity
	if share == 0 {
		share = total / 4
	}
	return budget.New(total, share)
}

// budgetShared reports whether id is one authenticated identity among
// others, held to its share of the client memory and of per_client
// sessions; without authentication every client is the one anonymous
// identity, held only to the totals.
func budgetShared(id auth.Identity) bool { return id.Method != auth.ModeNone }

// accountOf returns the client-memory account of a downstream session's
// peer (the transports call it when a session opens); the session
// releases it when it ends.
func (g *Gateway) accountOf(p any) *budget.Account {
	id := anonymous
	if pe, ok := p.(*peer); ok && pe != nil {
		id = pe.id
	}
	return g.clientMem.Acquire(id.Name, budgetShared(id))
}
