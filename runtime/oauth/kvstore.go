package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The fleet's token store: one JetStream KV bucket ("<fleet>_oauth"), one
// value per server and identity, sealed exactly as the file store seals
// its files (Sealer: AES-256-GCM, server and identity as additional data),
// so every replica must have the same oauth.key. NATS only ever carries
// sealed records.
//
// Keys are "tok.s<server>.i<identity>", each name base64url-encoded
// (unpadded), so any server name or identity (a JWT subject) makes a valid
// key. A replica watches the bucket: a login, a refresh or a logout done
// by another replica reaches its handlers (Manager.Changed) within the
// watch's delivery time, well under a second on a healthy NATS.
//
// NATS unreachable: reads fail (the handlers keep the token they hold in
// memory); a write that fails is kept and retried every kvRetry until it
// lands, a versioned one only while the revision it was based on is still
// the stored one (else the fleet moved on and the write is dropped).

const (
	kvKeyPrefix = "tok."
	// kvTimeout bounds one KV operation.
	kvTimeout = 3 * time.Second
	// kvRetry is how often writes that failed are retried.
	kvRetry = 500 * time.Millisecond
)

// ErrStale says the stored record changed since the version a write was
// based on: another replica stored a newer one.
var ErrStale = errors.New("the stored token record changed meanwhile")

// ErrFleetUnreachable says the fleet's NATS does not answer now.
var ErrFleetUnreachable = errors.New("the fleet's NATS is not reachable")

// Versioned is a Store whose records carry versions, so that a replica
// replacing a token (a rotated refresh token) does not overwrite a newer
// one another replica stored meanwhile.
type Versioned interface {
	Store
	// LoadVersion is Load with the record's version (0: none).
	LoadVersion(server, identity string) (*Record, uint64, error)
	// SaveVersion replaces the record if its version is still version (0:
	// none stored); ErrStale when it is not. It returns the new version.
	SaveVersion(server, identity string, rec *Record, version uint64) (uint64, error)
}

// KVStore keeps the sealed records in a JetStream KV bucket. Its methods
// are safe for concurrent use.
type KVStore struct {
	open    func(context.Context) (jetstream.KeyValue, error)
	up      func() bool
	sealer  *Sealer
	fleet   FleetSeal
	names   sync.Map // with fleet: key → [2]string{server, identity} of the records seen
	log     *slog.Logger
	changed func(server, identity string)

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	kv      jetstream.KeyValue
	pending map[string]kvWrite // by key: writes to retry
}

// kvWrite is a write that failed and is retried: a put (versioned when
// rev is set) or a delete (value nil).
type kvWrite struct {
	value     []byte
	rev       uint64
	versioned bool
}

// NewKVStore returns a store over the bucket that open opens (called
// again until it succeeds: NATS may be down at start). up reports whether
// NATS is reachable now (nil: always asked): while it is not, operations
// fail at once instead of waiting out their timeout. changed is called
// for every record another replica (or this one) writes or deletes.
// Close ends its watch and retries.
func NewKVStore(open func(context.Context) (jetstream.KeyValue, error), up func() bool, sealer *Sealer, log *slog.Logger, changed func(server, identity string)) *KVStore {
	ctx, cancel := context.WithCancel(context.Background())
	s := &KVStore{open: open, up: up, sealer: sealer, log: log, changed: changed, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), pending: map[string]kvWrite{}}
	go s.run()
	return s
}

// FleetSeal is the fleet's own seal around the records (the gateway's
// cluster.Node): under it, a record's key is a keyed hash of its server
// and identity, so neither appears on a subject, and its value is sealed
// again with the fleet's key for that key, saying whose record it is, so
// that only a replica of the fleet can have written it and an older value
// put back is refused.
type FleetSeal interface {
	// Key is the bucket key of server and identity.
	Key(server, identity string) string
	// Seal seals body as the value of key.
	Seal(key string, body []byte) []byte
	// Open opens the value of key (an error, logged, when no replica of
	// the fleet wrote it, or it is older than one read before).
	Open(key string, value []byte) ([]byte, error)
}

// fleetRecord is what FleetSeal seals: whose record, and the record
// sealed with oauth.key.
type fleetRecord struct {
	Server   string `json:"s"`
	Identity string `json:"i"`
	Sealed   []byte `json:"r"`
}

// UseFleetSeal makes the store key and seal its records with f. Call it
// before the store is used.
func (s *KVStore) UseFleetSeal(f FleetSeal) { s.fleet = f }

// key is the bucket key of server and identity.
func (s *KVStore) key(server, identity string) string {
	if s.fleet != nil {
		key := s.fleet.Key(server, identity)
		s.names.Store(key, [2]string{server, identity})
		return key
	}
	return KVKey(server, identity)
}

// deleted is whose record key was, when this replica knows.
func (s *KVStore) deleted(key string) (server, identity string) {
	if v, ok := s.names.Load(key); ok {
		n := v.([2]string)
		return n[0], n[1]
	}
	return "", ""
}

// wrap seals a record sealed with oauth.key for the fleet.
func (s *KVStore) wrap(key, server, identity string, sealed []byte) []byte {
	if s.fleet == nil {
		return sealed
	}
	b, _ := json.Marshal(fleetRecord{Server: server, Identity: identity, Sealed: sealed})
	return s.fleet.Seal(key, b)
}

// unwrap opens a value read under key: whose record, and the record
// sealed with oauth.key.
func (s *KVStore) unwrap(key string, value []byte) (fleetRecord, error) {
	if s.fleet == nil {
		server, identity, err := ParseKVKey(key)
		return fleetRecord{Server: server, Identity: identity, Sealed: value}, err
	}
	b, err := s.fleet.Open(key, value)
	if err != nil {
		return fleetRecord{}, err
	}
	var r fleetRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Server == "" || s.key(r.Server, r.Identity) != key {
		return fleetRecord{}, fmt.Errorf("token record under %.64q: not the record of its key", key)
	}
	return r, nil
}

// Close stops watching and retrying.
func (s *KVStore) Close() {
	s.cancel()
	<-s.done
}

// KVKey is the bucket key of server and identity.
func KVKey(server, identity string) string {
	enc := base64.RawURLEncoding
	return kvKeyPrefix + "s" + enc.EncodeToString([]byte(server)) + ".i" + enc.EncodeToString([]byte(identity))
}

// ParseKVKey returns the server and identity of a bucket key.
func ParseKVKey(key string) (server, identity string, err error) {
	rest, ok := strings.CutPrefix(key, kvKeyPrefix)
	s, i, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || !strings.HasPrefix(s, "s") || !strings.HasPrefix(i, "i") {
		return "", "", fmt.Errorf("token key %.64q: not tok.s<server>.i<identity>", key)
	}
	enc := base64.RawURLEncoding.Strict() // one key per name
	sv, err1 := enc.DecodeString(s[1:])
	iv, err2 := enc.DecodeString(i[1:])
	if err1 != nil || err2 != nil || len(sv) == 0 {
		return "", "", fmt.Errorf("token key %.64q: bad encoding", key)
	}
	return string(sv), string(iv), nil
}

// bucket is the KV bucket, opened at first use.
func (s *KVStore) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if s.up != nil && !s.up() {
		return nil, ErrFleetUnreachable
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	kv, err := s.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening the fleet's token bucket: %w", err)
	}
	s.kv = kv
	return kv, nil
}

// Load implements Store.
func (s *KVStore) Load(server, identity string) (*Record, error) {
	rec, _, err := s.LoadVersion(server, identity)
	return rec, err
}

// LoadVersion implements Versioned. A value that does not open is
// refused (logged once here, returned as an error).
func (s *KVStore) LoadVersion(server, identity string) (*Record, uint64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, kvTimeout)
	defer cancel()
	kv, err := s.bucket(ctx)
	if err != nil {
		return nil, 0, err
	}
	key := s.key(server, identity)
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the token record of %q from the fleet: %w", server, err)
	}
	fr, err := s.unwrap(key, e.Value())
	if err != nil {
		return nil, 0, err // logged by the fleet's seal
	}
	rec, err := s.sealer.Open(server, identity, fr.Sealed)
	if err != nil {
		s.log.Warn("fleet token record refused", "server_name", server, "identity", identity, "revision", e.Revision(), "err", err)
		return nil, 0, err
	}
	return rec, e.Revision(), nil
}

// Save implements Store: the record replaces whatever is stored.
func (s *KVStore) Save(server, identity string, rec *Record) error {
	sealed, err := s.sealer.Seal(server, identity, rec)
	if err != nil {
		return err
	}
	// A login while NATS is unreachable still succeeds on this replica;
	// the fleet gets the token when NATS answers.
	key := s.key(server, identity)
	return s.write(key, kvWrite{value: s.wrap(key, server, identity, sealed)}, false)
}

// SaveVersion implements Versioned.
func (s *KVStore) SaveVersion(server, identity string, rec *Record, version uint64) (uint64, error) {
	sealed, err := s.sealer.Seal(server, identity, rec)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(s.ctx, kvTimeout)
	defer cancel()
	key := s.key(server, identity)
	sealed = s.wrap(key, server, identity, sealed)
	rev, err := s.put(ctx, key, kvWrite{value: sealed, rev: version, versioned: true})
	switch {
	case errors.Is(err, ErrStale):
		return 0, err
	case err != nil:
		s.keep(key, kvWrite{value: sealed, rev: version, versioned: true})
		return 0, fmt.Errorf("storing the token record of %q in the fleet (kept, retried when NATS answers): %w", server, err)
	}
	return rev, nil
}

// Delete implements Store.
func (s *KVStore) Delete(server, identity string) error {
	return s.write(s.key(server, identity), kvWrite{}, true)
}

// write puts or deletes now; on failure the write is kept for retrying
// and, when failLoud, the failure returned (else logged).
func (s *KVStore) write(key string, w kvWrite, failLoud bool) error {
	ctx, cancel := context.WithTimeout(s.ctx, kvTimeout)
	defer cancel()
	if _, err := s.put(ctx, key, w); err != nil {
		s.keep(key, w)
		if failLoud {
			return fmt.Errorf("writing the fleet's token store (kept, retried when NATS answers): %w", err)
		}
		s.log.Warn("fleet token store unreachable: the write is kept and retried when NATS answers", "key", key, "err", err)
	}
	return nil
}

// put performs one write.
func (s *KVStore) put(ctx context.Context, key string, w kvWrite) (uint64, error) {
	kv, err := s.bucket(ctx)
	if err != nil {
		return 0, err
	}
	switch {
	case w.value == nil:
		err = kv.Delete(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err = nil
		}
		return 0, err
	case w.versioned && w.rev == 0:
		rev, err := kv.Create(ctx, key, w.value)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, ErrStale
		}
		return rev, err
	case w.versioned:
		rev, err := kv.Update(ctx, key, w.value, w.rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return 0, ErrStale
		}
		return rev, err
	}
	return kv.Put(ctx, key, w.value)
}

// keep remembers a failed write (the latest per key wins).
func (s *KVStore) keep(key string, w kvWrite) {
	s.mu.Lock()
	s.pending[key] = w
	s.mu.Unlock()
}

// run watches the bucket and retries kept writes until Close.
func (s *KVStore) run() {
	defer close(s.done)
	var w jetstream.KeyWatcher
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	tick := time.NewTicker(kvRetry)
	defer tick.Stop()
	var updates <-chan jetstream.KeyValueEntry
	for {
		if w == nil {
			w = s.watch()
			if w != nil {
				updates = w.Updates()
			}
		}
		select {
		case <-s.ctx.Done():
			return
		case e, ok := <-updates:
			if !ok {
				w, updates = nil, nil
				continue
			}
			s.seen(e)
		case <-tick.C:
			s.retry()
		}
	}
}

// watch starts watching the bucket (nil while it cannot be opened).
func (s *KVStore) watch() jetstream.KeyWatcher {
	ctx, cancel := context.WithTimeout(s.ctx, kvTimeout)
	defer cancel()
	kv, err := s.bucket(ctx)
	if err != nil {
		return nil
	}
	w, err := kv.WatchAll(s.ctx, jetstream.UpdatesOnly())
	if err != nil {
		s.log.Debug("watching the fleet's token bucket", "err", err)
		return nil
	}
	return w
}

// seen tells the manager about a change of the bucket; a key that does
// not decode is refused and logged.
func (s *KVStore) seen(e jetstream.KeyValueEntry) {
	if e == nil {
		return
	}
	var server, identity string
	switch {
	case s.fleet == nil || e.Operation() == jetstream.KeyValuePut:
		fr, err := s.unwrap(e.Key(), e.Value())
		if err != nil {
			if s.fleet == nil {
				s.log.Warn("fleet token bucket: entry refused", "err", err)
			}
			return
		}
		server, identity = fr.Server, fr.Identity
	default:
		// A deletion under the fleet's keyed hash says not whose: the
		// replica that knows the key tells its handler.
		server, identity = s.deleted(e.Key())
		if server == "" {
			return
		}
	}
	if s.changed != nil {
		s.changed(server, identity)
	}
}

// retry writes what failed before, oldest state first; a versioned write
// whose base changed meanwhile is dropped (the fleet has a newer token).
func (s *KVStore) retry() {
	s.mu.Lock()
	if len(s.pending) == 0 {
		s.mu.Unlock()
		return
	}
	todo := s.pending
	s.pending = map[string]kvWrite{}
	s.mu.Unlock()
	for key, w := range todo {
		ctx, cancel := context.WithTimeout(s.ctx, kvTimeout)
		_, err := s.put(ctx, key, w)
		cancel()
		switch {
		case errors.Is(err, ErrStale):
			s.log.Info("fleet token store: a kept write was superseded by another replica's", "key", key)
		case err != nil:
			s.mu.Lock()
			if _, newer := s.pending[key]; !newer {
				s.pending[key] = w
			}
			s.mu.Unlock()
		default:
			s.log.Info("fleet token store: a kept write reached NATS", "key", key)
		}
	}
}

var _ Versioned = (*KVStore)(nil)
