package gateway

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/limits"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file makes the rate limits (limits.client_rate, limits.tool_rate,
// a tool rule's rate) hold for the fleet when the config has a cluster
// section: each becomes a cluster.Limiter, which leases tokens from a
// bucket shared in JetStream KV and falls back to rate/members per
// replica while NATS is unreachable (runtime/cluster/limits.go says how
// and with what error). Concurrency limits (limits.upstream_concurrency)
// stay per replica: they protect this replica's upstream connections.

// rateLimiter is one rate limit of the guard: this replica's own
// (limits.RateLimiter) or the fleet's (cluster.Limiter).
type rateLimiter interface {
	// Allow takes a token of key's bucket, or says how long until there is one.
	Allow(key string) (ok bool, retryAfter time.Duration)
}

// localRate is r limited by this replica alone; nil when r sets no limit.
func localRate(r *config.Rate) rateLimiter {
	if r == nil {
		return nil
	}
	if l := limits.NewRateLimiter(r.RPS, r.Burst); l != nil {
		return l
	}
	return nil
}

// allow asks l, where nil allows everything.
func allow(l rateLimiter, key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	return l.Allow(key)
}

// newFleetLimits prepares the shared rate limits of a fleet's replica; nil
// without a cluster section. Nothing touches NATS until openFleet binds
// them to the node.
func newFleetLimits(cfg *config.Config, log *slog.Logger) *cluster.Limits {
	if cfg.Cluster == nil {
		return nil
	}
	// Keep an unused key's shared bucket as long as the slowest limit
	// takes to refill: a missing bucket is a full one.
	var ttl time.Duration
	for _, r := range append([]*config.Rate{cfg.Limits.ClientRate, cfg.Limits.ToolRate}, ruleRates(cfg)...) {
		if r != nil && r.RPS > 0 {
			ttl = max(ttl, time.Duration(float64(max(r.Burst, 1))/r.RPS*float64(time.Second)))
		}
	}
	return cluster.NewLimits(log, ttl)
}

func ruleRates(cfg *config.Config) []*config.Rate {
	out := make([]*config.Rate, 0, len(cfg.ToolRules))
	for _, r := range cfg.ToolRules {
		out = append(out, r.Rate)
	}
	return out
}

// shareLimits makes gd's rate limits the fleet's. The names are the same
// on every replica of a fleet that runs the same config.
func (g *Gateway) shareLimits(gd *guard, cfg *config.Config) {
	if g.fleetLimits == nil {
		return
	}
	gd.clientRate = fleetRate(g.fleetLimits, "client", cfg.Limits.ClientRate)
	gd.toolRate = fleetRate(g.fleetLimits, "tool", cfg.Limits.ToolRate)
	for i, r := range cfg.ToolRules {
		gd.ruleRates[i] = fleetRate(g.fleetLimits, "rule"+strconv.Itoa(i), r.Rate)
	}
}

// fleetRate is r limited for the fleet; nil when r sets no limit.
func fleetRate(fl *cluster.Limits, name string, r *config.Rate) rateLimiter {
	if r == nil {
		return nil
	}
	if l := fl.Limiter(name, r.RPS, r.Burst); l != nil {
		return l
	}
	return nil
}
