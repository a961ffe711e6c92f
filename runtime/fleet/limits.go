package fleet

import (
	"log/slog"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file makes the rate limits (limits.client_rate, limits.tool_rate,
// a tool rule's rate) hold for the fleet: each becomes a cluster.Limiter,
// which leases tokens from a bucket shared in JetStream KV and falls back
// to rate/members per replica while NATS is unreachable
// (runtime/cluster/limits.go says how and with what error). Concurrency
// limits (limits.upstream_concurrency) stay per replica: they protect this
// replica's upstream connections.

// Limiter is one rate limit shared by the fleet.
type Limiter interface {
	// Allow takes a token of key's bucket, or says how long until there is one.
	Allow(key string) (ok bool, retryAfter time.Duration)
}

// newLimits prepares the shared rate limits of a fleet's replica. Nothing
// touches NATS until Join binds them to the node.
func newLimits(cfg *config.Config, log *slog.Logger) *cluster.Limits {
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

// Rate is r limited for the fleet under name (the same on every replica
// of a fleet that runs the same config); nil when r sets no limit.
func (f *Fleet) Rate(name string, r *config.Rate) Limiter {
	if r == nil {
		return nil
	}
	if l := f.limits.Limiter(name, r.RPS, r.Burst); l != nil {
		return l
	}
	return nil
}
