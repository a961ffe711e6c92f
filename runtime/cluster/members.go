package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// This file is the fleet's membership: every replica puts a heartbeat
// record into a KV bucket ("<name>_members") whose entries expire, so the
// bucket lists the replicas alive now and what each one serves.

// MemberTTL is how long a member's record lives without a heartbeat.
const MemberTTL = 15 * time.Second

// Member is one replica's heartbeat record.
type Member struct {
	Replica string `json:"replica"`
	// Listen and Admin are the replica's downstream and admin addresses.
	Listen  string `json:"listen,omitempty"`
	Admin   string `json:"admin,omitempty"`
	Version string `json:"version,omitempty"`
	// Started and LastSeen: when the replica started and last beat.
	Started  time.Time `json:"started"`
	LastSeen time.Time `json:"last_seen"`
	// NATS is the replica's NATS connection state as it sees it.
	NATS string `json:"nats"`
	// Generation is the revision of the fleet's policy record active on
	// the replica; PolicyDigest identifies what it activated (equal
	// digests: the same modules and attachments).
	Generation   uint64 `json:"generation"`
	PolicyDigest string `json:"policy_digest,omitempty"`
	// Modules maps each uploaded module to the digest active there.
	Modules map[string]string `json:"modules,omitempty"`
	// Failed is the last revision the replica could not activate, when it
	// is newer than Generation.
	Failed *Failure `json:"failed,omitempty"`
}

// Failure says why a replica did not activate a revision.
type Failure struct {
	Generation uint64    `json:"generation"`
	Error      string    `json:"error"`
	At         time.Time `json:"at"`
}

// Limits of a member record; anything larger is refused.
const (
	maxMemberBytes = 64 << 10
	maxFieldLen    = 1024
)

// DecodeMember parses and checks a member record read from NATS.
func DecodeMember(b []byte) (Member, error) {
	var m Member
	if len(b) > maxMemberBytes {
		return m, fmt.Errorf("member record of %d bytes; at most %d", len(b), maxMemberBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Member{}, fmt.Errorf("member record: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Member{}, errors.New("member record: data after the JSON object")
	}
	if err := m.check(); err != nil {
		return Member{}, fmt.Errorf("member record: %w", err)
	}
	return m, nil
}

func (m *Member) check() error {
	if m.Replica == "" {
		return errors.New(`no "replica"`)
	}
	if m.LastSeen.IsZero() {
		return errors.New(`no "last_seen"`)
	}
	fields := []string{m.Replica, m.Listen, m.Admin, m.Version, m.NATS, m.PolicyDigest}
	for name, d := range m.Modules {
		fields = append(fields, name, d)
	}
	if m.Failed != nil {
		fields = append(fields, m.Failed.Error)
	}
	for _, f := range fields {
		if len(f) > maxFieldLen {
			return fmt.Errorf("a field of %d bytes; at most %d", len(f), maxFieldLen)
		}
	}
	return nil
}

// Members is the fleet's membership bucket as one replica uses it.
type Members struct {
	n *Node

	mu sync.Mutex
	kv jetstream.KeyValue
}

// NewMembers is the membership of the fleet n belongs to.
func NewMembers(n *Node) *Members { return &Members{n: n} }

func (ms *Members) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if !ms.n.Connected() {
		return nil, ErrUnavailable
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.kv != nil {
		return ms.kv, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	kv, err := ms.n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ms.n.Bucket("members"), TTL: MemberTTL, Replicas: ms.n.replicas(),
		Description: "edge-mcp replicas alive, by heartbeat"})
	if err != nil {
		return nil, unavailable(fmt.Errorf("opening bucket %q: %w", ms.n.Bucket("members"), err))
	}
	ms.kv = kv
	return kv, nil
}

// Publish puts this replica's record.
func (ms *Members) Publish(ctx context.Context, m Member) error {
	kv, err := ms.bucket(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding member record: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	key := Token(m.Replica)
	if _, err := kv.Put(ctx, key, ms.n.keys.SealRecord(ms.n.Bucket("members"), key, ms.n.keys.Next(time.Time{}), b)); err != nil {
		if gone(err) {
			ms.mu.Lock()
			ms.kv = nil
			ms.mu.Unlock()
		}
		return unavailable(fmt.Errorf("publishing member record: %w", err))
	}
	return nil
}

// Leave deletes this replica's record (a clean stop).
func (ms *Members) Leave(ctx context.Context) {
	kv, err := ms.bucket(ctx)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_ = kv.Delete(ctx, Token(ms.n.Replica()))
}

// List reads the records of the replicas alive, sorted by replica. A
// record that does not decode, or whose key is not its replica's, is
// skipped and logged.
func (ms *Members) List(ctx context.Context) ([]Member, error) {
	kv, err := ms.bucket(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, unavailable(fmt.Errorf("listing members: %w", err))
	}
	defer w.Stop()
	var out []Member
	for {
		select {
		case <-ctx.Done():
			return nil, unavailable(fmt.Errorf("listing members: %w", ctx.Err()))
		case e, ok := <-w.Updates():
			if !ok {
				return nil, unavailable(errors.New("listing members: watcher closed"))
			}
			if e == nil {
				slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Replica, b.Replica) })
				return out, nil
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			body, err := ms.n.OpenRecord("members", e.Key(), e.Value(), nil)
			if err != nil {
				continue // logged
			}
			m, err := DecodeMember(body)
			if err == nil && Token(m.Replica) != e.Key() {
				err = fmt.Errorf("record of replica %q under the key %q", m.Replica, e.Key())
			}
			if err != nil {
				ms.n.log.Warn("cluster: refused a member record", "key", e.Key(), "err", err)
				continue
			}
			out = append(out, m)
		}
	}
}
