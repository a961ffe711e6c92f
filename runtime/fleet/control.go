package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file is the fleet's one control plane on a replica. What the admin
// API changes (uploaded modules, their versions and rollbacks,
// attachments, their order and mode) is the fleet's policy record
// (control_record.go) in NATS, module bytes in the fleet's object
// store. Every replica watches the record and activates each revision by
// the path an admin change takes on one process (the local store, then
// Policies.Rebuild: build aside, swap); the local state directory is a cache
// the fleet's record overrides. An admin change is first activated on the
// replica that received it (the validation every replica will run), then
// written with compare-and-set; only then do the others see it.

// Control is the control plane of one replica.
type Control struct {
	h    Host
	log  *slog.Logger
	node *cluster.Node
	ctl  controlStore
	mem  *cluster.Members

	started time.Time
	tmpDir  string        // the local store's folder when the config has no state_dir
	kick    chan struct{} // publish the member record now
	pins    fleetPinState // the fleet's tool-pin decisions (control_pins.go)

	// Guarded by the Policies lock: the record active here.
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

// controlStore is what the control plane uses of [cluster.Control]: the
// fleet's policy record and the module blobs in NATS. Safe for concurrent
// use.
type controlStore interface {
	Get(ctx context.Context, key string) (cluster.Entry, error)
	Put(ctx context.Context, key string, value []byte, prev uint64) (uint64, error)
	Watch(ctx context.Context, pattern string, fn func(cluster.Entry), ready func())
	PutBlob(ctx context.Context, b []byte) (string, error)
	Blob(ctx context.Context, digest string, limit int64) ([]byte, error)
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

// startControl starts watching the fleet's record and heartbeating.
// A replica without a state directory keeps its cache in a temporary one.
func (f *Fleet) startControl(ctx context.Context, node *cluster.Node, h Host) error {
	fc := &Control{h: h, log: f.log, node: node, ctl: cluster.NewControl(node), mem: cluster.NewMembers(node),
		started: time.Now().UTC(), kick: make(chan struct{}, 1)}
	p := h.Policies
	if p.Store() == nil {
		dir, err := os.MkdirTemp("", "edge-mcp-fleet-*")
		if err != nil {
			return fmt.Errorf("creating the fleet's module cache: %w", err)
		}
		st, err := store.Open(dir, store.Options{Keep: h.Config().Admin.KeepVersions, Logger: f.log})
		if err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("opening the fleet's module cache: %w", err)
		}
		fc.tmpDir = dir
		p.Lock()
		p.UseStore(st)
		p.Unlock()
	}
	p.Lock()
	fc.rec = fleetPolicyOf(p.Store())
	fc.view.Store(viewOf(fc.rec))
	p.Attach(fc)
	p.Unlock()
	f.ctl.Store(fc)
	f.wg.Go(func() { fc.ctl.Watch(ctx, fleetPolicyKey, func(e cluster.Entry) { fc.onRecord(ctx, e) }, nil) })
	f.wg.Go(func() { fc.ctl.Watch(ctx, fleetPinsKey, fc.onPins, nil) })
	f.wg.Go(func() { fc.run(ctx) })
	return nil
}

// onRecord activates a revision of the fleet's record read from NATS.
// A record that does not decode, or does not activate here, is refused
// and logged; the replica keeps serving what it has.
func (fc *Control) onRecord(ctx context.Context, e cluster.Entry) {
	if e.Key != fleetPolicyKey || e.Revision <= fc.rev.Load() || e.Refused != nil {
		return // a record no replica of the fleet wrote is refused (logged by cluster)
	}
	if f := fc.failed.Load(); f != nil && f.Generation == e.Revision && fc.failedCfg.Load() == fc.h.Config() {
		return // refused once; a newer revision or config may fix it
	}
	if e.Value == nil {
		fc.log.Warn("cluster: the fleet's policy record was deleted; keeping the active policies", "revision", e.Revision)
		return
	}
	rec, err := decodeFleetPolicy(e.Value)
	if err != nil {
		fc.refuse(e.Revision, fmt.Errorf("refused: %w", err))
		return
	}
	blobs, err := fc.fetch(ctx, rec)
	if errors.Is(err, cluster.ErrUnavailable) {
		fc.log.Warn("cluster: cannot fetch modules now; will retry", "revision", e.Revision, "err", err)
		return
	}
	if err != nil {
		fc.refuse(e.Revision, err)
		return
	}
	p := fc.h.Policies
	p.Lock()
	defer p.Unlock()
	if p.Closed() || e.Revision <= fc.rev.Load() {
		return
	}
	if err := fc.activateLocked(ctx, rec, blobs, nil); err != nil {
		fc.refuse(e.Revision, err)
		return
	}
	fc.appliedLocked(e.Revision, rec)
	fc.log.Info("cluster: fleet policies activated", "revision", e.Revision, "digest", rec.digest())
	fc.auditRemote(e.Revision, rec)
}

// refuse records and logs a revision this replica did not activate.
func (fc *Control) refuse(rev uint64, err error) {
	fc.log.Error("cluster: fleet policy revision not activated on this replica; serving the previous one", "revision", rev, "err", err)
	fc.failedCfg.Store(fc.h.Config())
	fc.failed.Store(&cluster.Failure{Generation: rev, Error: err.Error(), At: time.Now().UTC()})
	fc.publishSoon()
}

// appliedLocked records rec, revision rev, as active here.
func (fc *Control) appliedLocked(rev uint64, rec *fleetPolicy) {
	fc.rec = rec
	fc.view.Store(viewOf(rec))
	fc.rev.Store(rev)
	if f := fc.failed.Load(); f != nil && f.Generation <= rev {
		fc.failed.Store(nil)
	}
	fc.publishSoon()
}

func (fc *Control) publishSoon() {
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
func (fc *Control) fetch(ctx context.Context, rec *fleetPolicy) (map[string][]byte, error) {
	limit := maxModuleBytes(fc.h.Config())
	for name, m := range rec.Modules {
		if m.Active.Size > limit {
			return nil, admin.Errorf(http.StatusUnprocessableEntity, "too_large",
				"module %q (%s) is %d bytes; this replica's admin.max_module_bytes is %d", name, m.Active.Digest, m.Active.Size, limit)
		}
	}
	blobs := map[string][]byte{}
	st := fc.h.Policies.Store()
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
func (fc *Control) checkSigned(rec *fleetPolicy, blobs map[string][]byte) error {
	if !fc.h.Config().Admin.RequireSigned {
		return nil
	}
	for name, m := range rec.Modules {
		wasm, ok := blobs[m.Active.Digest]
		if !ok {
			var err error
			if wasm, err = fc.h.Policies.Store().Blob(m.Active.Digest); err != nil {
				return fmt.Errorf("module %q: %w", name, err)
			}
		}
		if err := fc.h.CheckSignature(wasm, m.Signatures[m.Active.Digest]); err != nil {
			return fmt.Errorf("module %q (%s) on a replica with admin.require_signed: %w", name, m.Active.Digest, err)
		}
	}
	return nil
}

// activateLocked makes rec the local state: its modules and attachments
// go into the local store (blobs added), then the generation is built and
// swapped in by Policies.Rebuild, as for an admin change on one process.
// On failure the store gets its previous state back and the running
// generation stays. Called with the Policies lock held.
func (fc *Control) activateLocked(ctx context.Context, rec *fleetPolicy, blobs map[string][]byte, pre Preloaded) error {
	p := fc.h.Policies
	st := p.Store()
	prevMods, prevAtts := st.List(), st.Attachments()
	if err := st.Replace(rec.storeModules(), rec.Attachments, blobs); err != nil {
		release(pre)
		return fmt.Errorf("storing the fleet's modules: %w", err)
	}
	if fc.rec != nil && fc.rec.digest() == rec.digest() {
		release(pre) // the same modules and attachments: nothing to rebuild
		st.GC()
		return nil
	}
	if err := p.Rebuild(ctx, rec.Attachments, pre); err != nil {
		if rerr := st.Replace(prevMods, prevAtts, nil); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("activating: %w", err)
	}
	st.GC()
	return nil
}

// release closes pre, when there is one.
func release(pre Preloaded) {
	if pre != nil {
		pre.Close()
	}
}
