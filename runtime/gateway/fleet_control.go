package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file is the fleet's one control plane on a replica. What the admin
// API changes (uploaded modules, their versions and rollbacks,
// attachments, their order and mode) is the fleet's policy record
// (fleet_control_record.go) in NATS, module bytes in the fleet's object
// store. Every replica watches the record and activates each revision by
// the path an admin change takes on one process (the local store, then
// rebuildLocked: build aside, swap); the local state directory is a cache
// the fleet's record overrides. An admin change is first activated on the
// replica that received it (the validation every replica will run), then
// written with compare-and-set; only then do the others see it.

// fleetControl is the control plane of one replica.
type fleetControl struct {
	g    *Gateway
	node *cluster.Node
	ctl  *cluster.Control
	mem  *cluster.Members

	started time.Time
	tmpDir  string        // the local store's folder when the config has no state_dir
	kick    chan struct{} // publish the member record now
	pins    fleetPinState // the fleet's tool-pin decisions (fleet_control_pins.go)

	// Guarded by g.pol.mu: the record active here.
	rec *fleetPolicy
	// view is what the member record and /status say is active, readable
	// without the lock an admin change holds across NATS round trips.
	view atomic.Pointer[recordView]
	// rev is the revision active here; failed the last one refused.
	rev    atomic.Uint64
	failed atomic.Pointer[cluster.Failure]
	// failedCfg is the config a refusal was made under: a reload (a
	// larger admin.max_module_bytes, say) earns the revision a retry.
	failedCfg atomic.Pointer[config.Config]

	membersMu sync.Mutex
	members   []cluster.Member // last list read
	listedAt  time.Time
}

// recordView is the digest of the record active here and its modules'
// active versions.
type recordView struct {
	digest  string
	modules map[string]string
}

func viewOf(rec *fleetPolicy) *recordView {
	return &recordView{digest: rec.digest(), modules: rec.activeDigests()}
}

// errFleetDown is the admin API's answer to a write while NATS is away.
func errFleetDown(err error) error {
	return admin.Errorf(http.StatusServiceUnavailable, "fleet_unavailable",
		"the fleet's NATS is unreachable, so fleet-wide changes cannot be made now (this replica keeps serving what it has; retry when NATS is back): %v", err)
}

// startFleetControl starts watching the fleet's record and heartbeating.
// A replica without a state directory keeps its cache in a temporary one.
func (g *Gateway) startFleetControl() error {
	fc := &fleetControl{g: g, node: g.fleet, ctl: cluster.NewControl(g.fleet), mem: cluster.NewMembers(g.fleet),
		started: time.Now().UTC(), kick: make(chan struct{}, 1)}
	if g.pol.store == nil {
		dir, err := os.MkdirTemp("", "edge-mcp-fleet-*")
		if err != nil {
			return fmt.Errorf("creating the fleet's module cache: %w", err)
		}
		st, err := store.Open(dir, store.Options{Keep: g.config().Admin.KeepVersions, Logger: g.log})
		if err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("opening the fleet's module cache: %w", err)
		}
		fc.tmpDir = dir
		g.pol.mu.Lock()
		g.pol.store = st
		g.pol.mu.Unlock()
	}
	g.pol.mu.Lock()
	fc.rec = fleetPolicyOf(g.pol.store)
	fc.view.Store(viewOf(fc.rec))
	g.pol.fleet = fc
	g.pol.mu.Unlock()
	g.fleetCtl = fc
	ctx := g.ctx
	g.wg.Go(func() { fc.ctl.Watch(ctx, fleetPolicyKey, func(e cluster.Entry) { fc.onRecord(ctx, e) }, nil) })
	g.wg.Go(func() { fc.ctl.Watch(ctx, fleetPinsKey, fc.onPins, nil) })
	g.wg.Go(func() { fc.run(ctx) })
	return nil
}

// onRecord activates a revision of the fleet's record read from NATS.
// A record that does not decode, or does not activate here, is refused
// and logged; the replica keeps serving what it has.
func (fc *fleetControl) onRecord(ctx context.Context, e cluster.Entry) {
	if e.Key != fleetPolicyKey || e.Revision <= fc.rev.Load() || e.Refused != nil {
		return // a record no replica of the fleet wrote is refused (logged by cluster)
	}
	if f := fc.failed.Load(); f != nil && f.Generation == e.Revision && fc.failedCfg.Load() == fc.g.config() {
		return // refused once; a newer revision or config may fix it
	}
	if e.Value == nil {
		fc.g.log.Warn("cluster: the fleet's policy record was deleted; keeping the active policies", "revision", e.Revision)
		return
	}
	rec, err := decodeFleetPolicy(e.Value)
	if err != nil {
		fc.refuse(e.Revision, fmt.Errorf("refused: %w", err))
		return
	}
	blobs, err := fc.fetch(ctx, rec)
	if errors.Is(err, cluster.ErrUnavailable) {
		fc.g.log.Warn("cluster: cannot fetch modules now; will retry", "revision", e.Revision, "err", err)
		return
	}
	if err != nil {
		fc.refuse(e.Revision, err)
		return
	}
	p := &fc.g.pol
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || e.Revision <= fc.rev.Load() {
		return
	}
	if err := fc.activateLocked(ctx, rec, blobs, nil); err != nil {
		fc.refuse(e.Revision, err)
		return
	}
	fc.appliedLocked(e.Revision, rec)
	fc.g.log.Info("cluster: fleet policies activated", "revision", e.Revision, "digest", rec.digest())
	fc.auditRemote(e.Revision, rec)
}

// refuse records and logs a revision this replica did not activate.
func (fc *fleetControl) refuse(rev uint64, err error) {
	fc.g.log.Error("cluster: fleet policy revision not activated on this replica; serving the previous one", "revision", rev, "err", err)
	fc.failedCfg.Store(fc.g.config())
	fc.failed.Store(&cluster.Failure{Generation: rev, Error: err.Error(), At: time.Now().UTC()})
	fc.publishSoon()
}

// appliedLocked records rec, revision rev, as active here.
func (fc *fleetControl) appliedLocked(rev uint64, rec *fleetPolicy) {
	fc.rec = rec
	fc.view.Store(viewOf(rec))
	fc.rev.Store(rev)
	if f := fc.failed.Load(); f != nil && f.Generation <= rev {
		fc.failed.Store(nil)
	}
	fc.publishSoon()
}

func (fc *fleetControl) publishSoon() {
	select {
	case fc.kick <- struct{}{}:
	default:
	}
}

// maxModuleBytes is this replica's admin.max_module_bytes.
func maxModuleBytes(cfg *config.Config) int64 {
	if cfg.Admin.MaxModuleBytes > 0 {
		return cfg.Admin.MaxModuleBytes
	}
	return config.DefaultMaxModuleBytes
}

// fetch reads from the fleet's object store every version of rec the
// local store lacks. An active version larger than this replica's
// admin.max_module_bytes is refused, as its upload here would be.
func (fc *fleetControl) fetch(ctx context.Context, rec *fleetPolicy) (map[string][]byte, error) {
	limit := maxModuleBytes(fc.g.config())
	for name, m := range rec.Modules {
		if m.Active.Size > limit {
			return nil, admin.Errorf(http.StatusUnprocessableEntity, "too_large",
				"module %q (%s) is %d bytes; this replica's admin.max_module_bytes is %d", name, m.Active.Digest, m.Active.Size, limit)
		}
	}
	blobs := map[string][]byte{}
	st := fc.g.pol.store
	for _, v := range rec.versions() {
		if _, ok := blobs[v.Digest]; ok || st.HasBlob(v.Digest) {
			continue
		}
		b, err := fc.ctl.Blob(ctx, v.Digest, max(limit, v.Size))
		if err != nil {
			return nil, fmt.Errorf("fetching module version %s: %w", v.Digest, err)
		}
		blobs[v.Digest] = b
	}
	if err := fc.checkSigned(rec, blobs); err != nil {
		return nil, err
	}
	return blobs, nil
}

// checkSigned checks, on a replica whose config requires signed modules,
// the signature each active version was uploaded with against this
// replica's trusted keys, as its own upload endpoint would.
func (fc *fleetControl) checkSigned(rec *fleetPolicy, blobs map[string][]byte) error {
	cfg := fc.g.config()
	if !cfg.Admin.RequireSigned {
		return nil
	}
	for name, m := range rec.Modules {
		wasm, ok := blobs[m.Active.Digest]
		if !ok {
			var err error
			if wasm, err = fc.g.pol.store.Blob(m.Active.Digest); err != nil {
				return fmt.Errorf("module %q: %w", name, err)
			}
		}
		if _, err := checkSignature(cfg, wasm, m.Signatures[m.Active.Digest]); err != nil {
			return fmt.Errorf("module %q (%s) on a replica with admin.require_signed: %w", name, m.Active.Digest, err)
		}
	}
	return nil
}

// activateLocked makes rec the local state: its modules and attachments
// go into the local store (blobs added), then the generation is built and
// swapped in by rebuildLocked, as for an admin change on one process. On
// failure the store gets its previous state back and the running
// generation stays. Called with g.pol.mu held.
func (fc *fleetControl) activateLocked(ctx context.Context, rec *fleetPolicy, blobs map[string][]byte, preloaded map[moduleKey]*policy.Module) error {
	p := &fc.g.pol
	st := p.store
	prevMods, prevAtts := st.List(), st.Attachments()
	if err := st.Replace(rec.storeModules(), rec.Attachments, blobs); err != nil {
		closeAll(preloaded)
		return fmt.Errorf("storing the fleet's modules: %w", err)
	}
	if fc.rec != nil && fc.rec.digest() == rec.digest() {
		closeAll(preloaded) // the same modules and attachments: nothing to rebuild
		st.GC()
		return nil
	}
	if err := p.rebuildLocked(ctx, rec.Attachments, preloaded); err != nil {
		if rerr := st.Replace(prevMods, prevAtts, nil); rerr != nil {
			err = errors.Join(err, rerr)
		}
		closeAll(preloaded)
		return fmt.Errorf("activating: %w", err)
	}
	closeUnused(p, preloaded)
	st.GC()
	return nil
}
