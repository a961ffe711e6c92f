package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/spec"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// This file is the write side of the fleet's control plane: the admin
// API's module and attachment changes, made fleet-wide. The gateway's
// admin hooks call these instead of changing the local store when the
// gateway is in a fleet.

// commitLocked makes a fleet-wide change: it reads the fleet's record
// (catching up first when this replica is behind), applies change to a
// copy, activates the result here (the validation every replica will
// run), stores blob in the object store and writes the record with
// compare-and-set on the revision read. When the write fails this replica
// goes back to the fleet's record. Called with the Policies lock held.
func (fc *Control) commitLocked(ctx context.Context, change func(*fleetPolicy) error, blob []byte, pre Preloaded) error {
	if !fc.node.Connected() {
		release(pre)
		return errFleetDown(cluster.ErrUnavailable)
	}
	e, err := fc.ctl.Get(ctx, fleetPolicyKey)
	if err != nil {
		release(pre)
		return fleetWriteError(err)
	}
	if err := fc.catchUpLocked(ctx, e); err != nil {
		release(pre)
		return err
	}
	next, err := fc.rec.clone()
	if err != nil {
		release(pre)
		return fmt.Errorf("the policies active here cannot be written to the fleet: %w", err)
	}
	if err := change(next); err != nil {
		release(pre)
		return err
	}
	next.By = fc.changeOf(ctx)
	blobs := map[string][]byte{}
	if blob != nil {
		if _, err := fc.ctl.PutBlob(ctx, blob); err != nil {
			release(pre)
			return fleetWriteError(err)
		}
		blobs[cluster.Digest(blob)] = blob
	}
	prev := fc.rec
	if err := fc.activateLocked(ctx, next, blobs, pre); err != nil {
		return admin.Errorf(http.StatusUnprocessableEntity, "activation_failed", "%v", err)
	}
	fc.rec = next // what is active now, until the write says otherwise
	rev, err := fc.ctl.Put(ctx, fleetPolicyKey, next.encode(), e.Revision)
	if err != nil {
		if rerr := fc.activateLocked(ctx, prev, nil, nil); rerr != nil {
			fc.log.Error("cluster: going back to the fleet's policies after a failed write", "err", rerr)
		} else {
			fc.rec = prev
		}
		return fleetWriteError(err)
	}
	fc.appliedLocked(rev, next)
	return nil
}

// catchUpLocked activates e, the fleet's current record, when this
// replica has not yet; a replica that cannot is behind the fleet and
// refuses to write over changes it has not seen.
func (fc *Control) catchUpLocked(ctx context.Context, e cluster.Entry) error {
	if e.Revision == 0 || e.Revision == fc.rev.Load() {
		return nil
	}
	rec, err := decodeFleetPolicy(e.Value)
	if err != nil {
		// A record no replica can read is repaired by writing over it
		// from what this replica serves.
		fc.log.Error("cluster: the fleet's policy record is unreadable; this change replaces it", "revision", e.Revision, "err", err)
		return nil
	}
	blobs, err := fc.fetch(ctx, rec)
	if errors.Is(err, cluster.ErrBadBlob) {
		fc.log.Error("cluster: the fleet's policy record names module bytes it does not have; this change replaces it", "revision", e.Revision, "err", err)
		return nil
	}
	if err == nil {
		err = fc.activateLocked(ctx, rec, blobs, nil)
	}
	if err != nil {
		return admin.Errorf(http.StatusConflict, "replica_behind",
			"this replica cannot activate the fleet's current policies (revision %d): %v; make the change through a replica that has", e.Revision, err)
	}
	fc.appliedLocked(e.Revision, rec)
	fc.auditRemote(e.Revision, rec)
	return nil
}

// Writable fails fast, before any work, when a fleet-wide change cannot
// be made now; nil outside a fleet.
func (f *Fleet) Writable() error {
	if fc := f.Control(); fc != nil && !fc.node.Connected() {
		return errFleetDown(cluster.ErrUnavailable)
	}
	return nil
}

// fleetWriteError is the admin API's answer to a failed NATS round trip.
func fleetWriteError(err error) error {
	switch {
	case errors.Is(err, cluster.ErrConflict):
		return admin.Errorf(http.StatusConflict, "fleet_conflict", "another replica changed the fleet's policies meanwhile; retry")
	case errors.Is(err, cluster.ErrUnavailable):
		return errFleetDown(err)
	}
	return fmt.Errorf("writing the fleet's policies: %w", err)
}

// The admin operations, fleet-wide. Each is called with the Policies lock
// held, from the gateway's admin hooks, with ctx saying which change it
// is (ChangeContext).

// SetAttachmentsLocked writes next, computed by the caller from the
// attachments active here; if catching up with the fleet changed those,
// the caller's list is stale and the change must be asked again.
func (fc *Control) SetAttachmentsLocked(ctx context.Context, next []spec.Spec) error {
	base := fc.rev.Load()
	return fc.commitLocked(ctx, func(r *fleetPolicy) error {
		if fc.rev.Load() != base {
			return fleetWriteError(cluster.ErrConflict)
		}
		r.Attachments = next
		return nil
	}, nil, nil)
}

// UploadLocked makes wasm, with meta and its detached signature sig, the
// active version of module name; pre are the modules the caller compiled
// to verify it.
func (fc *Control) UploadLocked(ctx context.Context, name string, wasm []byte, meta store.Version, sig string, pre Preloaded) error {
	now := time.Now().UTC()
	meta.Digest, meta.Size, meta.ActivatedAt = store.Digest(wasm), int64(len(wasm)), now
	if meta.UploadedAt.IsZero() {
		meta.UploadedAt = now
	}
	meta.UploadedAt = meta.UploadedAt.UTC()
	keep := fc.h.Config().Admin.KeepVersions
	return fc.commitLocked(ctx, func(r *fleetPolicy) error { r.upload(name, meta, sig, keep); return nil }, wasm, pre)
}

// RollbackLocked makes the previous version of module name active.
func (fc *Control) RollbackLocked(ctx context.Context, name string) error {
	return fc.commitLocked(ctx, func(r *fleetPolicy) error { return r.rollback(name, time.Now()) }, nil, nil)
}

// RemoveLocked forgets module name and its versions.
func (fc *Control) RemoveLocked(ctx context.Context, name string) error {
	return fc.commitLocked(ctx, func(r *fleetPolicy) error { return r.remove(name) }, nil, nil)
}
