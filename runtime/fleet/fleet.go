// Package fleet lets the replicas of a gateway act as one when its config
// has a cluster section: any replica serves any request of a downstream
// session (session.go), admin changes to modules, attachments and tool
// pins are the fleet's (control.go), rate limits are shared (limits.go).
// runtime/cluster is the NATS layer underneath (node, sealed records,
// tokens); this package is what the gateway does with it. The gateway
// stays the owner of sessions, policies and pins: it hands the fleet the
// parts it drives through Host, and calls the fleet at the few points of
// its request path that a fleet changes. Without a cluster section the
// gateway's *Fleet is nil, no NATS code runs, and every method of a nil
// *Fleet answers as a single replica would.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/policy/spec"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/transports"
)

// Host is the gateway as its fleet sees it, given to Join. The fleet
// calls it from NATS callbacks and its own goroutines, until Close
// returns.
type Host struct {
	// Config is the running config (replaced on reload).
	Config func() *config.Config
	// Version is the build's version, for the member record.
	Version string
	// Streams is the streamable HTTP server whose GET streams the fleet
	// feeds (WriteStandalone) and hands backlogs to (Rehome).
	Streams *transports.StreamableServer
	// Peers names who opened a session (session.go).
	Peers Peers
	// Policies is the replica's policy state (control.go).
	Policies Policies
	// Pins is the replica's tool pins (control_pins.go).
	Pins Pins
	// Audit records an admin change made through another replica.
	Audit func(admin.Record)
	// CheckSignature checks a module's detached signature as the
	// replica's own upload endpoint would (admin.require_signed).
	CheckSignature func(wasm []byte, sig string) error
	// Joined runs once the node is up and sessions are shared, before the
	// control plane starts; an error leaves the fleet. The func it
	// returns runs on Close, before the node closes.
	Joined func(*cluster.Node) (leave func(), err error)
}

// Policies is the replica's policy state, as the control plane changes
// it. The admin API holds its lock across a fleet-wide change (the
// Control's ...Locked methods); every method but Lock and Store is
// called with it held.
type Policies interface {
	Lock()
	Unlock()
	// Store is the local module store, the fleet's cache; nil when the
	// replica has none (Join then gives it one: UseStore).
	Store() *store.Store
	UseStore(*store.Store)
	// Attach sends the admin API's changes through c from now on.
	Attach(c *Control)
	// Closed reports that the gateway is closing its policies.
	Closed() bool
	// Rebuild builds the generation of the config's attachments and
	// attachments, taking what it needs of pre (nil: none), swaps it in
	// and releases the rest of pre (all of it when it fails).
	Rebuild(ctx context.Context, attachments []spec.Spec, pre Preloaded) error
}

// Preloaded are modules the admin API compiled ahead of a change, opaque
// to the fleet; Close releases them when the change is not made.
type Preloaded interface{ Close() }

// Pins is the replica's tool pins (internal/pinning), as the fleet's
// decisions change them: from the fleet's watch goroutine, and on the
// goroutine of whoever calls ApplyPinDecision or DecidePin.
type Pins interface {
	// Pending lists the changed definitions awaiting a decision; nil when
	// pinning is off.
	Pending() []pinning.Change
	// Approve makes the pending definition of server's tool its pin;
	// false when there is none.
	Approve(server, tool string) bool
	// Reject withholds definition fp of server's tool; false when it was
	// already.
	Reject(server, tool, fp string) bool
	// Changed tells the clients that the catalogue changed.
	Changed()
}

// Fleet is a replica's membership of its fleet; nil without a cluster
// section.
type Fleet struct {
	log     *slog.Logger
	limits  *cluster.Limits
	checked bool            // New found NATS wanting credentials: Join need not ask again
	cluster *config.Cluster // the cluster section given to New (oci.go)
	replica string          // the default replica name of its listener

	node  atomic.Pointer[cluster.Node]
	ctl   atomic.Pointer[Control]
	sess  atomic.Pointer[Sessions]
	leave func()
	wg    sync.WaitGroup
}

// New prepares the fleet of cfg; nil without a cluster section. It
// refuses, before anything starts, a fleet whose NATS lets clients in
// without credentials, unless cluster.allow_anonymous_nats
// (cluster.CheckAnonymous); a NATS unreachable now is checked by the node
// when it reaches it. Nothing else touches NATS until Join.
func New(cfg *config.Config, log *slog.Logger) (*Fleet, error) {
	if cfg.Cluster == nil {
		return nil, nil
	}
	f := &Fleet{log: log, limits: newLimits(cfg, log)}
	f.ociConfig(cfg)
	if cfg.Cluster.AllowAnonymousNATS {
		return f, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch err := cluster.CheckAnonymous(ctx, cfg.Cluster); {
	case errors.Is(err, cluster.ErrNATSUnreachable):
	case err != nil:
		file := cfg.Path
		if file == "" {
			file = "config"
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	default:
		f.checked = true
	}
	return f, nil
}

// Join connects to the fleet's NATS; it does not wait for NATS to be
// reachable (a replica starts degraded and joins when it comes). The
// fleet's goroutines run until ctx ends; Close waits for them.
func (f *Fleet) Join(ctx context.Context, h Host) error {
	if f == nil {
		return nil
	}
	cfg := h.Config()
	cc := cfg.Cluster
	if f.checked {
		c := *cc
		c.AllowAnonymousNATS = true // checked by New: NATS wants credentials
		cc = &c
	}
	node, err := cluster.Open(ctx, cc, DefaultReplica(cfg.Listen), f.log)
	if err != nil {
		return fmt.Errorf("joining the fleet: %w", err)
	}
	f.limits.Bind(node)
	if err := f.startSessions(ctx, node, h); err != nil {
		f.log.Error("cluster: sessions stay on the replica that opened them", "err", err)
	}
	if f.leave, err = h.Joined(node); err != nil {
		node.Close(ctx)
		return fmt.Errorf("sharing upstream tokens with the fleet: %w", err)
	}
	if err := f.startControl(ctx, node, h); err != nil {
		f.leave()
		node.Close(ctx)
		return err
	}
	f.node.Store(node)
	f.log.Info("cluster: joined", "fleet", node.Name(), "replica", node.Replica(), "connected", node.Connected())
	return nil
}

// Close waits for the fleet's goroutines (the context given to Join must
// have ended) and leaves the fleet, flushing what is buffered for at most
// 2 s.
func (f *Fleet) Close() {
	if f == nil {
		return
	}
	f.wg.Wait()
	node := f.node.Load()
	if node == nil {
		return
	}
	f.leave()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	node.Close(ctx)
}

// Node is the replica's NATS node; nil until Join.
func (f *Fleet) Node() *cluster.Node {
	if f == nil {
		return nil
	}
	return f.node.Load()
}

// Control is the fleet's control plane on this replica; nil until Join.
func (f *Fleet) Control() *Control {
	if f == nil {
		return nil
	}
	return f.ctl.Load()
}

// Sessions is the replica's part of the fleet's sessions; nil until Join.
func (f *Fleet) Sessions() *Sessions {
	if f == nil {
		return nil
	}
	return f.sess.Load()
}

// Degraded says why a fleet replica serves degraded; "" when it does not.
func (f *Fleet) Degraded() string {
	if n := f.Node(); n == nil || n.Connected() {
		return ""
	}
	return "the fleet's NATS is unreachable: serving with the modules and policies this replica has; admin changes are refused until it is back"
}

// DefaultReplica names a replica whose config does not: host name and
// listen port, so two replicas on one host differ.
func DefaultReplica(listen string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "edge-mcp"
	}
	if _, port, err := net.SplitHostPort(listen); err == nil && port != "" {
		return host + "-" + port
	}
	return host
}
