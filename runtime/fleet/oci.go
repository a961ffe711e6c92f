package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file is the fleet rule of oci:// modules: one replica pulls, the
// others use its bytes. For each reference the fleet keeps a record
// ("oci.<hash of the reference>" in the control KV, sealed like every
// control record) naming the version pulled (its module digest, pinned
// reference, the key its signature was verified with) and the time; the
// bytes go to the fleet's object store under their digest. A replica
// that needs the module reads the record and the bytes (checked against
// the digest); when there is no usable record it claims the pull by
// writing a claim with compare-and-set, so that of replicas starting
// together one pulls and the others wait for its record. A replica that
// cannot reach NATS pulls by itself.

// ociRecord is the fleet's record of one oci:// reference: a claim (Claim
// set, no Version) or a pull (Version set).
type ociRecord struct {
	Reference string         `json:"reference"`
	Claim     string         `json:"claim,omitempty"` // the replica pulling
	Version   *store.Version `json:"version,omitempty"`
	At        time.Time      `json:"at"`
}

// OCIRequest is a replica's need of an oci:// module.
type OCIRequest struct {
	// Reference is the oci:// reference as configured.
	Reference string
	// Usable reports whether a version another replica pulled may be
	// used here (the same reference, a signature by a key trusted here).
	Usable func(store.Version) bool
	// Fresh, when positive, is how old a recorded pull may be (pull
	// policy always); 0: any age (if_not_present).
	Fresh time.Duration
	// MaxBytes caps the module read from the object store.
	MaxBytes int64
	// Wait bounds how long a replica waits for another's claimed pull.
	Wait time.Duration
	// Pull pulls the module from the registry (this replica's own pull,
	// verified and stored locally).
	Pull func(ctx context.Context) ([]byte, store.Version, error)
}

// OCIModule returns the module of an oci:// reference as the fleet shares
// it: the bytes another replica pulled (fromFleet true: the caller checks
// them as it checks an upload), or this replica's own pull, which it then
// shares. Without a fleet (nil f) it is r.Pull.
func (f *Fleet) OCIModule(ctx context.Context, r OCIRequest) (wasm []byte, v store.Version, fromFleet bool, err error) {
	if f == nil {
		wasm, v, err = r.Pull(ctx)
		return wasm, v, false, err
	}
	ctl, replica, done := f.controlPlane(ctx)
	defer done()
	if ctl == nil {
		f.log.Warn("cluster: NATS unreachable; pulling the module without the fleet", "module", r.Reference)
		wasm, v, err = r.Pull(ctx)
		return wasm, v, false, err
	}
	return f.sharedPull(ctx, ctl, replica, r)
}

// ociKey is the control record of reference.
func ociKey(reference string) string {
	sum := sha256.Sum256([]byte(reference))
	return "oci." + hex.EncodeToString(sum[:16])
}

func (f *Fleet) sharedPull(ctx context.Context, ctl *cluster.Control, replica string, r OCIRequest) ([]byte, store.Version, bool, error) {
	key := ociKey(r.Reference)
	waitUntil := time.Now().Add(r.Wait)
	for {
		e, err := ctl.Get(ctx, key)
		if err != nil {
			f.log.Warn("cluster: reading the fleet's record of a module failed; pulling it here", "module", r.Reference, "err", err)
			wasm, v, err := r.Pull(ctx)
			return wasm, v, false, err
		}
		var rec ociRecord
		if e.Value != nil && json.Unmarshal(e.Value, &rec) != nil || rec.Reference != r.Reference {
			rec = ociRecord{} // unreadable, or another reference: pull over it
		}
		if v := rec.Version; v != nil && r.Usable(*v) && (r.Fresh <= 0 || time.Since(rec.At) < r.Fresh) {
			wasm, err := ctl.Blob(ctx, v.Digest, r.MaxBytes)
			if err == nil {
				return wasm, *v, true, nil
			}
			if !errors.Is(err, cluster.ErrBadBlob) {
				return nil, store.Version{}, false, fmt.Errorf("module %s: reading the fleet's copy: %w", r.Reference, err)
			}
			// missing or corrupt bytes: pull again over the record
		} else if rec.Claim != "" && rec.Claim != replica && time.Since(rec.At) < r.Wait && time.Now().Before(waitUntil) {
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return nil, store.Version{}, false, fmt.Errorf("module %s: waiting for replica %s to pull it: %w", r.Reference, rec.Claim, err)
			}
			continue
		}
		claim, _ := json.Marshal(ociRecord{Reference: r.Reference, Claim: replica, At: time.Now().UTC()})
		rev, err := ctl.Put(ctx, key, claim, e.Revision)
		if errors.Is(err, cluster.ErrConflict) {
			continue // another replica claimed it first
		}
		if err != nil {
			f.log.Warn("cluster: claiming the pull of a module failed; pulling it here", "module", r.Reference, "err", err)
		}
		wasm, v, err2 := r.Pull(ctx)
		if err2 != nil || err != nil {
			if err == nil {
				f.release(ctx, ctl, key, rev)
			}
			return wasm, v, false, err2
		}
		f.share(ctx, ctl, key, rev, r.Reference, wasm, v)
		return wasm, v, false, nil
	}
}

// share puts a pulled module in the object store, then its record.
func (f *Fleet) share(ctx context.Context, ctl *cluster.Control, key string, rev uint64, reference string, wasm []byte, v store.Version) {
	if _, err := ctl.PutBlob(ctx, wasm); err != nil {
		f.log.Warn("cluster: sharing a pulled module failed; the other replicas will pull it", "module", reference, "err", err)
		f.release(ctx, ctl, key, rev)
		return
	}
	b, _ := json.Marshal(ociRecord{Reference: reference, Version: &v, At: time.Now().UTC()})
	if _, err := ctl.Put(ctx, key, b, rev); err != nil {
		f.log.Warn("cluster: recording a pulled module failed; the other replicas will pull it", "module", reference, "err", err)
	}
}

// release ends a claim whose pull failed, so that another replica may try
// without waiting for the claim to age.
func (f *Fleet) release(ctx context.Context, ctl *cluster.Control, key string, rev uint64) {
	b, _ := json.Marshal(ociRecord{})
	if _, err := ctl.Put(ctx, key, b, rev); err != nil {
		f.log.Debug("cluster: releasing a pull claim", "key", key, "err", err)
	}
}

// controlPlane is the fleet's control plane for a one-off use: the joined
// node's, or, before Join (policies load before the replica joins), a
// node opened for the call and closed by done. nil when NATS cannot be
// reached within a few seconds.
func (f *Fleet) controlPlane(ctx context.Context) (*cluster.Control, string, func()) {
	if n := f.node.Load(); n != nil {
		if !n.Connected() {
			return nil, "", func() {}
		}
		return cluster.NewControl(n), n.Replica(), func() {}
	}
	cc := *f.cluster
	if f.checked {
		cc.AllowAnonymousNATS = true // checked by New: NATS wants credentials
	}
	n, err := cluster.Open(ctx, &cc, f.replica, f.log)
	if err != nil {
		f.log.Warn("cluster: opening NATS to share a module", "err", err)
		return nil, "", func() {}
	}
	done := func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n.Close(c)
	}
	for deadline := time.Now().Add(5 * time.Second); !n.Connected(); {
		if time.Now().After(deadline) || sleep(ctx, 50*time.Millisecond) != nil {
			done()
			return nil, "", func() {}
		}
	}
	return cluster.NewControl(n), n.Replica(), done
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ociConfig keeps what OCIModule needs of the config given to New.
func (f *Fleet) ociConfig(cfg *config.Config) {
	c := *cfg.Cluster
	f.cluster, f.replica = &c, DefaultReplica(cfg.Listen)
}
