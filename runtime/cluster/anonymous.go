package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// A fleet's NATS should let in only its replicas (and its operators): a
// party on NATS without the fleet's secret can neither read nor forge
// what the replicas exchange (seal.go), but it can delete records and
// drop messages. So a replica refuses to start against a NATS that
// accepts clients without credentials, unless cluster.allow_anonymous_nats
// says the operator chose it (a NATS reachable only on loopback, tests).
// The check is one bare connection to each URL of cluster.nats_url:
// without the credentials, nkey, client certificate or user:password of
// the config. When NATS is not reachable at start the check is made when
// it comes; a NATS found anonymous then is left (the replica serves alone).

// ErrNATSUnreachable says the check could not be made: no server of
// cluster.nats_url answered.
var ErrNATSUnreachable = errors.New("NATS not reachable")

// probeTimeout bounds one bare connection.
const probeTimeout = 2 * time.Second

// CheckAnonymous is nil when no server of cfg.NatsURL accepts a client
// without credentials, ErrNATSUnreachable when none could be asked, else
// an error naming cluster.allow_anonymous_nats. Open makes it; a gateway
// makes it before it starts anything.
func CheckAnonymous(ctx context.Context, cfg *config.Cluster) error {
	asked := 0
	for _, raw := range strings.Split(cfg.NatsURL, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			continue // checked by the config
		}
		u.User = nil
		switch err := probe(ctx, u.String(), cfg); {
		case err == nil:
			return fmt.Errorf("cluster.allow_anonymous_nats: the NATS server at %s accepts clients without credentials, so anyone who reaches it can delete the fleet's records and watch its traffic; "+
				"give NATS users (nkeys or creds, with permissions on the subjects %q and the fleet's buckets) and set cluster.nats_nkey or cluster.nats_creds, "+
				"or set cluster.allow_anonymous_nats to true if that NATS is reachable only by the fleet", u.Redacted(), cmpOr(cfg.Name, DefaultName)+".>")
		case errors.Is(err, ErrNATSUnreachable):
		default:
			asked++ // refused: it wants credentials
		}
	}
	if asked == 0 {
		return ErrNATSUnreachable
	}
	return nil
}

// probe connects to addr without credentials: nil when the server lets it
// in, ErrNATSUnreachable when it cannot be reached.
func probe(ctx context.Context, addr string, cfg *config.Cluster) error {
	opts := []nats.Option{nats.Name("edge-mcp anonymity check"), nats.Timeout(probeTimeout), nats.NoReconnect()}
	if t := cfg.NatsTLS; t != nil && t.CAFile != "" {
		opts = append(opts, nats.RootCAs(t.CAFile))
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < probeTimeout {
		opts = append(opts, nats.Timeout(max(time.Until(d), 100*time.Millisecond)))
	}
	nc, err := nats.Connect(addr, opts...)
	if err == nil {
		nc.Close()
		return nil
	}
	var op *net.OpError
	if errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) || errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%w: %w", ErrNATSUnreachable, err)
	}
	return err
}

// probeLater makes the check deferred at Open, now that NATS is here; a
// NATS that accepts anonymous clients is left.
func (n *Node) probeLater() {
	cfg := n.probe.Swap(nil)
	if cfg == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*probeTimeout)
		defer cancel()
		switch err := CheckAnonymous(ctx, cfg); {
		case errors.Is(err, ErrNATSUnreachable):
			n.probe.CompareAndSwap(nil, cfg) // next time
		case err != nil:
			n.log.Error("cluster: leaving the fleet; this replica serves alone: "+err.Error(), "key", "cluster.allow_anonymous_nats")
			n.nc.Close()
		}
	}()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
