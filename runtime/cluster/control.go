package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// This file is the fleet's control plane as storage: records in a
// JetStream KV bucket ("<name>_control"), compare-and-set on their
// revision, watched by every replica; and module bytes in a JetStream
// Object Store ("<name>_modules"), named by their SHA-256. What the
// records mean is the gateway's business; every byte read here is
// checked (digests) or handed over for validation, never trusted.

// Bucket names, under the fleet's prefix.
const (
	controlBucket = "control"
	modulesBucket = "modules"
)

// opTimeout bounds one KV or Object Store operation: a fleet write must
// fail fast with ErrUnavailable, not hang an admin request.
const opTimeout = 3 * time.Second

// Entry is one revision of a control record; Revision 0 means the record
// does not exist. Value is the record as a replica wrote it; when what is
// stored was not sealed by the fleet (or replays an older revision) Value
// is nil and Refused says why (logged once, here).
type Entry struct {
	Key      string
	Revision uint64
	Value    []byte
	Refused  error
}

// Control is the fleet's control plane of one replica. Buckets are created
// (or bound) on first use, so a replica that starts while NATS is down
// opens them when it comes.
type Control struct {
	n *Node

	mu  sync.Mutex
	kv  jetstream.KeyValue
	obj jetstream.ObjectStore

	marks   Watermarks        // newest record read, per key
	sealed  sync.Map          // key → time.Time of the newest record read (a write seals after it)
	refused map[string]uint64 // key → revision refused last (logged once)
}

// NewControl is the control plane of the fleet n belongs to; one per
// replica.
func NewControl(n *Node) *Control { return &Control{n: n} }

// buckets binds (creating when missing) the control KV and the module
// object store.
func (c *Control) buckets(ctx context.Context) (jetstream.KeyValue, jetstream.ObjectStore, error) {
	if !c.n.Connected() {
		return nil, nil, ErrUnavailable
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kv != nil && c.obj != nil {
		return c.kv, c.obj, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	kv, err := c.n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: c.n.Bucket(controlBucket), History: 10, Replicas: c.n.replicas(),
		Description: "edge-mcp control plane: policy attachments, module versions, tool pin decisions"})
	if err != nil {
		return nil, nil, unavailable(fmt.Errorf("opening bucket %q: %w", c.n.Bucket(controlBucket), err))
	}
	obj, err := c.n.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: c.n.Bucket(modulesBucket), Replicas: c.n.replicas(),
		Description: "edge-mcp policy modules by sha256"})
	if err != nil {
		return nil, nil, unavailable(fmt.Errorf("opening object store %q: %w", c.n.Bucket(modulesBucket), err))
	}
	c.kv, c.obj = kv, obj
	return kv, obj, nil
}

// replicas is how many copies the fleet's buckets keep: one per NATS
// server the connection knows of, at most 3, so a cluster loses no
// control state when a member dies.
func (n *Node) replicas() int { return max(1, min(3, len(n.nc.Servers()))) }

// unavailable marks an error of a NATS round trip that failed because
// NATS (or its JetStream) cannot be reached, so callers can answer 503.
func unavailable(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// gone reports an error that may mean a bucket no longer exists (deleted,
// or a NATS that lost its store): a missing stream answers nothing, like
// a JetStream that is down.
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// forget drops the bound buckets after an error that may mean they are
// gone, so the next call binds (or makes) them again.
func (c *Control) forget(err error) {
	if gone(err) {
		c.mu.Lock()
		c.kv, c.obj = nil, nil
		c.mu.Unlock()
	}
}

// Get reads the current revision of key; a missing key is Entry{} and no
// error.
func (c *Control) Get(ctx context.Context, key string) (Entry, error) {
	kv, _, err := c.buckets(ctx)
	if err != nil {
		return Entry{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	e, err := kv.Get(ctx, key)
	c.forget(err)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return Entry{Key: key}, nil
	case err != nil:
		return Entry{}, unavailable(fmt.Errorf("reading %q: %w", key, err))
	}
	return c.open(key, e.Revision(), e.Value()), nil
}

// open checks a stored revision of key: sealed by the fleet for that key,
// not older than one read before.
func (c *Control) open(key string, rev uint64, value []byte) Entry {
	bucket := c.n.Bucket(controlBucket)
	body, at, err := c.n.keys.OpenRecord(bucket, key, value)
	if err == nil {
		err = c.marks.Accept(key, at)
	}
	if err != nil {
		c.mu.Lock()
		first := c.refused[key] != rev
		if c.refused == nil {
			c.refused = map[string]uint64{}
		}
		c.refused[key] = rev
		c.mu.Unlock()
		if first {
			c.n.refused("a control record", fmt.Sprintf("%s/%s revision %d", bucket, key, rev), err)
		}
		return Entry{Key: key, Revision: rev, Refused: err}
	}
	c.sealed.Store(key, at)
	return Entry{Key: key, Revision: rev, Value: body}
}

// ErrConflict says the record changed since the revision a write was
// based on; read it again and retry.
var ErrConflict = errors.New("the control record changed meanwhile")

// IsConflict reports whether err, from a KV Create or Update, says the key
// exists or has another revision than the one the write was based on.
func IsConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Put writes value, sealed, as the next revision of key if its revision
// is still prev (0: the key must not exist) and returns the new revision.
func (c *Control) Put(ctx context.Context, key string, value []byte, prev uint64) (uint64, error) {
	kv, _, err := c.buckets(ctx)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var after time.Time
	if t, ok := c.sealed.Load(key); ok {
		after = t.(time.Time)
	}
	value = c.n.keys.SealRecord(c.n.Bucket(controlBucket), key, c.n.keys.Next(after), value)
	var rev uint64
	if prev == 0 {
		rev, err = kv.Create(ctx, key, value)
	} else {
		rev, err = kv.Update(ctx, key, value, prev)
	}
	c.forget(err)
	switch {
	case IsConflict(err):
		return 0, fmt.Errorf("writing %q: %w", key, ErrConflict)
	case err != nil:
		return 0, unavailable(fmt.Errorf("writing %q: %w", key, err))
	}
	return rev, nil
}

// Watch calls fn with every revision of the keys matching pattern: the
// current ones first, then each change, until ctx ends. A watcher that
// ends (NATS gone, bucket recreated) is started again once NATS is
// reachable; the current values are then delivered again, so fn must be
// idempotent per revision. ready, when not nil, is called after each
// delivery of the current values.
func (c *Control) Watch(ctx context.Context, pattern string, fn func(Entry), ready func()) {
	for ctx.Err() == nil {
		if err := c.watchOnce(ctx, pattern, fn, ready); err != nil && ctx.Err() == nil {
			c.n.log.Debug("cluster: control watcher ended; restarting", "key", pattern, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Control) watchOnce(ctx context.Context, pattern string, fn func(Entry), ready func()) error {
	kv, _, err := c.buckets(ctx)
	if err != nil {
		return err
	}
	reconnects := c.n.nc.Stats().Reconnects
	w, err := kv.Watch(ctx, pattern)
	if err != nil {
		return fmt.Errorf("watching %q: %w", pattern, err)
	}
	defer w.Stop()
	// A watcher's consumer does not always survive NATS restarting (its
	// state may be gone with the server): after a reconnect, start over.
	check := time.NewTicker(250 * time.Millisecond)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-check.C:
			if c.n.nc.Stats().Reconnects != reconnects {
				return errors.New("NATS reconnected")
			}
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watcher closed")
			}
			if e == nil {
				if ready != nil {
					ready()
				}
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				fn(Entry{Key: e.Key(), Revision: e.Revision()})
				continue
			}
			if ent := c.open(e.Key(), e.Revision(), e.Value()); ent.Refused == nil {
				fn(ent)
			}
		}
	}
}

// blobName is the object name of a module: the hex of its SHA-256.
func blobName(digest string) (string, error) {
	h := strings.TrimPrefix(digest, "sha256:")
	if len(h) != 2*sha256.Size || strings.ToLower(h) != h {
		return "", fmt.Errorf("digest %q is not sha256:<64 lowercase hex>", digest)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", fmt.Errorf("digest %q: %w", digest, err)
	}
	return h, nil
}

// Digest is "sha256:<hex>" of b, the name modules are stored under.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// PutBlob stores module bytes under their digest (once: content
// addressing makes a second upload of the same bytes a no-op) and
// returns the digest.
func (c *Control) PutBlob(ctx context.Context, b []byte) (string, error) {
	_, obj, err := c.buckets(ctx)
	if err != nil {
		return "", err
	}
	d := Digest(b)
	name, _ := blobName(d)
	ctx, cancel := context.WithTimeout(ctx, 4*opTimeout)
	defer cancel()
	if info, err := obj.GetInfo(ctx, name); err == nil && info.Size == uint64(len(b)) {
		return d, nil
	}
	if _, err := obj.PutBytes(ctx, name, b); err != nil {
		return "", unavailable(fmt.Errorf("storing module %s: %w", d, err))
	}
	return d, nil
}

// ErrBadBlob says the bytes stored under a digest are missing, do not hash
// to it, or are larger than allowed: the record naming it is broken.
var ErrBadBlob = errors.New("module bytes missing or not matching their digest")

// Blob reads the module stored under digest, at most limit bytes, and
// checks that it hashes to the digest.
func (c *Control) Blob(ctx context.Context, digest string, limit int64) ([]byte, error) {
	name, err := blobName(digest)
	if err != nil {
		return nil, err
	}
	_, obj, err := c.buckets(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 4*opTimeout)
	defer cancel()
	info, err := obj.GetInfo(ctx, name)
	c.forget(err)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("module %s: %w: %w", digest, ErrBadBlob, err)
	}
	if err != nil {
		return nil, unavailable(fmt.Errorf("module %s: %w", digest, err))
	}
	if limit > 0 && info.Size > uint64(limit) {
		return nil, fmt.Errorf("module %s: %w: %d bytes, limit %d", digest, ErrBadBlob, info.Size, limit)
	}
	b, err := obj.GetBytes(ctx, name)
	if err != nil {
		return nil, unavailable(fmt.Errorf("reading module %s: %w", digest, err))
	}
	if got := Digest(b); got != digest {
		return nil, fmt.Errorf("module %s: %w (got %s)", digest, ErrBadBlob, got)
	}
	return b, nil
}
