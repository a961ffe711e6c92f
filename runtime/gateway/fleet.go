package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file joins the gateway to its fleet when the config has a cluster
// section. Without one, no NATS code runs: fleet is nil and every caller
// checks that first.

// openFleet connects to the fleet's NATS; it does not wait for NATS to be
// reachable (a replica starts degraded and joins when it comes).
func (g *Gateway) openFleet(ctx context.Context) error {
	cfg := g.config()
	if cfg.Cluster == nil {
		return nil
	}
	cc := cfg.Cluster
	if g.natsChecked {
		c := *cc
		c.AllowAnonymousNATS = true // checked by New: NATS wants credentials
		cc = &c
	}
	node, err := cluster.Open(ctx, cc, defaultReplica(cfg.Listen), g.log)
	if err != nil {
		return fmt.Errorf("joining the fleet: %w", err)
	}
	g.fleet = node
	g.fleetLimits.Bind(node)
	if err := g.startFleetSessions(node); err != nil {
		g.log.Error("cluster: sessions stay on the replica that opened them", "err", err)
	}
	if err := g.openFleetOAuth(node); err != nil {
		node.Close(ctx)
		g.fleet = nil
		return fmt.Errorf("sharing upstream tokens with the fleet: %w", err)
	}
	if err := g.startFleetControl(); err != nil {
		node.Close(ctx)
		g.fleet = nil
		return err
	}
	g.log.Info("cluster: joined", "fleet", node.Name(), "replica", node.Replica(), "connected", node.Connected())
	return nil
}

// checkFleetNATS refuses, before anything starts, a fleet whose NATS lets
// clients in without credentials, unless cluster.allow_anonymous_nats
// (cluster.CheckAnonymous); checked says NATS wants credentials (false:
// no cluster, allowed, or NATS unreachable now, then the node checks when
// it reaches it).
func checkFleetNATS(cfg *config.Config) (checked bool, err error) {
	if cfg.Cluster == nil || cfg.Cluster.AllowAnonymousNATS {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch err := cluster.CheckAnonymous(ctx, cfg.Cluster); {
	case errors.Is(err, cluster.ErrNATSUnreachable):
		return false, nil
	case err != nil:
		file := cfg.Path
		if file == "" {
			file = "config"
		}
		return false, fmt.Errorf("%s: %w", file, err)
	}
	return true, nil
}

// closeFleet leaves the fleet, flushing what is buffered for at most 2 s.
func (g *Gateway) closeFleet() {
	if g.fleet == nil {
		return
	}
	g.closeFleetOAuth()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	g.fleet.Close(ctx)
}

// defaultReplica names a replica whose config does not: host name and
// listen port, so two replicas on one host differ.
func defaultReplica(listen string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "edge-mcp"
	}
	if _, port, err := net.SplitHostPort(listen); err == nil && port != "" {
		return host + "-" + port
	}
	return host
}
