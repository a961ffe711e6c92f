// Package cluster joins a gateway replica to its fleet over NATS: the
// connection, the names of the fleet's subjects and buckets, and (in the
// files beside this one) what the replicas share.
//
// Everything of a fleet lives under one prefix, the fleet's name: subjects
// "<name>.…", JetStream buckets "<name>_…". Several fleets may share one
// NATS. Every message and record read from NATS is opened with the
// fleet's keys (seal.go) and validated before use.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/limits"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// DefaultName is the fleet's name when the config gives none.
const DefaultName = "edge"

// Node is this replica's membership of the fleet: one NATS connection and
// its JetStream context. Its methods are safe for concurrent use. The
// connection reconnects by itself for as long as the Node is open; Close
// ends it.
type Node struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	name    string
	replica string
	secrets []string
	ttl     time.Duration // of session tokens; 0: SessionTTL
	log     *slog.Logger
	up      atomic.Bool
	keys    *Keys
	refusal refusals
	// probe is the anonymity check still to make once NATS is reachable
	// (it was not at Open); nil when made or not wanted.
	probe atomic.Pointer[config.Cluster]
}

// Open connects to the fleet's NATS. It does not wait for NATS to be
// reachable: a replica starts (degraded) while NATS is down and joins when
// it comes (Connected says which). defaultReplica names the replica when
// the config does not (host name and listen port).
func Open(ctx context.Context, cfg *config.Cluster, defaultReplica string, log *slog.Logger) (*Node, error) {
	n := &Node{name: cfg.Name, replica: cfg.Replica, secrets: cfg.Secrets, ttl: cfg.SessionTTL, log: log}
	if n.name == "" {
		n.name = DefaultName
	}
	if n.replica == "" {
		n.replica = defaultReplica
	}
	keys, err := NewKeys(n.name, cfg.Secrets)
	if err != nil {
		return nil, err
	}
	n.keys = keys
	n.refusal.log = limits.NewRateLimiter(10, 20)
	if !cfg.AllowAnonymousNATS {
		switch err := CheckAnonymous(ctx, cfg); {
		case errors.Is(err, ErrNATSUnreachable):
			n.probe.Store(cfg) // checked when NATS comes
		case err != nil:
			return nil, err
		}
	}
	opts, err := n.options(cfg)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(cfg.NatsURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS %s: %w", cfg.NatsURL, err)
	}
	n.nc = nc
	n.up.Store(nc.IsConnected())
	if n.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	return n, nil
}

// options are the NATS connection's: a name saying which replica, endless
// reconnects, the credentials and TLS of the config, and state logging.
func (n *Node) options(cfg *config.Cluster) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("edge-mcp " + n.name + "/" + n.replica),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			n.up.Store(false)
			n.log.Warn("cluster: NATS connection lost; serving from local state", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			n.up.Store(true)
			n.log.Info("cluster: NATS connection back", "server", nc.ConnectedUrlRedacted())
			n.probeLater()
		}),
		nats.ConnectHandler(func(*nats.Conn) { n.up.Store(true); n.probeLater() }),
	}
	if cfg.NatsCreds != "" {
		if _, err := os.Stat(cfg.NatsCreds); err != nil {
			return nil, fmt.Errorf("NATS credentials: %w", err)
		}
		opts = append(opts, nats.UserCredentials(cfg.NatsCreds))
	}
	if cfg.NatsNkey != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NatsNkey)
		if err != nil {
			return nil, fmt.Errorf("NATS nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if t := cfg.NatsTLS; t != nil {
		if t.CAFile != "" {
			opts = append(opts, nats.RootCAs(t.CAFile))
		}
		if t.CertFile != "" {
			opts = append(opts, nats.ClientCert(t.CertFile, t.KeyFile))
		}
	}
	return opts, nil
}

// Conn is the NATS connection.
func (n *Node) Conn() *nats.Conn { return n.nc }

// JetStream is the JetStream context of the connection.
func (n *Node) JetStream() jetstream.JetStream { return n.js }

// Name is the fleet's name, the prefix of its subjects and buckets.
func (n *Node) Name() string { return n.name }

// Replica is this replica's id.
func (n *Node) Replica() string { return n.replica }

// Secrets are the session-token keys, first one sealing.
func (n *Node) Secrets() []string { return n.secrets }

// SessionTTL is how long a session token is valid (cluster.session_ttl).
func (n *Node) SessionTTL() time.Duration {
	if n.ttl > 0 {
		return n.ttl
	}
	return SessionTTL
}

// Connected reports whether NATS is reachable now.
func (n *Node) Connected() bool { return n.up.Load() && n.nc.IsConnected() }

// Subject is the fleet's subject made of tokens, each of which must be a
// valid subject token (see Token).
func (n *Node) Subject(tokens ...string) string {
	return n.name + "." + strings.Join(tokens, ".")
}

// Bucket is the name of the fleet's JetStream bucket (KV or object store)
// called what.
func (n *Node) Bucket(what string) string { return n.name + "_" + what }

// ErrUnavailable says NATS is not reachable, so a fleet-wide change
// cannot be made now.
var ErrUnavailable = errors.New("the fleet's NATS is not reachable")

// Close drains the connection: subscriptions end, buffered publishes are
// flushed (bounded by the context's deadline, else 2 s).
func (n *Node) Close(ctx context.Context) {
	done := make(chan struct{})
	n.nc.SetClosedHandler(func(*nats.Conn) { close(done) })
	if err := n.nc.Drain(); err != nil {
		n.nc.Close()
		return
	}
	wait := 2 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	select {
	case <-done:
	case <-time.After(wait):
		n.nc.Close()
	}
}
