package cluster

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// What a replica reads from NATS was written by another replica of its
// fleet, or it is refused: every cluster message and every record a
// replica writes (control, sessions, members, rates) is sealed with a key
// derived from cluster.secret.
//
//	sealed = kind ('M' message, 'R' record) | version 1 | nonce (24) |
//	         XChaCha20-Poly1305( at (8, unix ns, big endian) | body )
//
// The additional data binds it to its place: the fleet's name, the kind,
// and the subject a message was sent on or the bucket and key a record
// was written under, so a sealed body moved to another subject or key
// does not open. The first secret seals, every secret opens (rotation, as
// for session tokens). A message older than MaxMessageAge (or as much in
// the future), or whose nonce was seen within that window, is refused;
// for records, which live longer, the reader keeps the newest write time
// it accepted per key (Watermarks) and refuses older ones.
//
// Subjects name sessions by a keyed hash (Route), so neither a session id
// nor an identity appears on a subject, and sealed bodies hide them.

// MaxMessageAge bounds how old (or how far in the future, for clocks
// apart) a cluster message may be when it arrives.
const MaxMessageAge = 5 * time.Second

const (
	kindMessage  = 'M'
	kindRecord   = 'R'
	sealVersion  = 1
	sealHeader   = 2
	sealOverhead = sealHeader + chacha20poly1305.NonceSizeX + 8 + chacha20poly1305.Overhead
)

// ErrForged says a message or record was not sealed by a replica of this
// fleet for where it was found (another secret, another fleet, another
// subject or key, altered, or not sealed at all).
var ErrForged = errors.New("not sealed by this fleet")

// ErrReplayed says a sealed message or record is genuine but was seen
// before or is too old.
var ErrReplayed = errors.New("replayed or stale")

// IsRefused reports an error of opening: forged, stale or replayed
// (already logged where it was refused).
func IsRefused(err error) bool { return errors.Is(err, ErrForged) || errors.Is(err, ErrReplayed) }

// Keys seal and open the fleet's messages and records and hash the ids
// its subjects route by. Safe for concurrent use.
type Keys struct {
	fleet  []byte
	aeads  []cipher.AEAD // first seals
	routes [][]byte      // HMAC keys; first routes
	now    func() time.Time
	seen   nonceCache
}

// NewKeys derives the keys of secrets (first one sealing) for the fleet
// called fleet.
func NewKeys(fleet string, secrets []string) (*Keys, error) {
	if len(secrets) == 0 {
		return nil, errors.New("cluster keys: no secret configured")
	}
	k := &Keys{fleet: []byte(fleet), now: time.Now}
	for i, secret := range secrets {
		if secret == "" {
			return nil, fmt.Errorf("cluster keys: secret %d is empty", i)
		}
		key, err := hkdf.Key(sha256.New, []byte(secret), nil, "edge-mcp cluster seal v1", chacha20poly1305.KeySize)
		if err != nil {
			return nil, fmt.Errorf("cluster keys: deriving key %d: %w", i, err)
		}
		aead, err := chacha20poly1305.NewX(key)
		if err != nil {
			return nil, fmt.Errorf("cluster keys: key %d: %w", i, err)
		}
		route, err := hkdf.Key(sha256.New, []byte(secret), nil, "edge-mcp cluster route v1", 32)
		if err != nil {
			return nil, fmt.Errorf("cluster keys: deriving route key %d: %w", i, err)
		}
		k.aeads = append(k.aeads, aead)
		k.routes = append(k.routes, route)
	}
	return k, nil
}

// ad is the additional data of a sealed message (place: its subject) or
// record (place: bucket and key).
func (k *Keys) ad(kind byte, place ...string) []byte {
	n := len("edge-mcp\x00") + len(k.fleet) + 2
	for _, p := range place {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, "edge-mcp\x00"...)
	b = append(b, k.fleet...)
	b = append(b, 0, kind)
	for _, p := range place {
		b = append(b, 0)
		b = append(b, p...)
	}
	return b
}

func (k *Keys) seal(kind byte, at time.Time, body []byte, place ...string) []byte {
	aead := k.aeads[0]
	ns := aead.NonceSize()
	out := make([]byte, sealHeader+ns, sealOverhead+len(body))
	out[0], out[1] = kind, sealVersion
	_, _ = rand.Read(out[sealHeader:]) // never fails (crypto/rand)
	plain := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint64(plain, uint64(at.UnixNano()))
	plain = append(plain, body...)
	return aead.Seal(out, out[sealHeader:], plain, k.ad(kind, place...))
}

// open checks and opens a sealed value: its body, its write time, and its
// nonce.
func (k *Keys) open(kind byte, data []byte, place ...string) (body []byte, at time.Time, nonce []byte, err error) {
	if len(data) < sealOverhead || data[0] != kind || data[1] != sealVersion {
		return nil, time.Time{}, nil, fmt.Errorf("%w: not a sealed %s", ErrForged, kindName(kind))
	}
	ns := chacha20poly1305.NonceSizeX
	nonce, box := data[sealHeader:sealHeader+ns], data[sealHeader+ns:]
	ad := k.ad(kind, place...)
	var plain []byte
	for _, aead := range k.aeads {
		if plain, err = aead.Open(nil, nonce, box, ad); err == nil {
			break
		}
	}
	if err != nil {
		return nil, time.Time{}, nil, fmt.Errorf("%w: does not open with the fleet's keys here", ErrForged)
	}
	return plain[8:], time.Unix(0, int64(binary.BigEndian.Uint64(plain))), nonce, nil
}

func kindName(kind byte) string {
	if kind == kindRecord {
		return "record"
	}
	return "message"
}

// SealMessage seals body for subject.
func (k *Keys) SealMessage(subject string, body []byte) []byte {
	return k.seal(kindMessage, k.now(), body, subject)
}

// OpenMessage opens a message that arrived on subject: ErrForged unless a
// replica of this fleet sealed it for that subject, ErrReplayed when it is
// older than MaxMessageAge (or as far ahead) or was opened before.
func (k *Keys) OpenMessage(subject string, data []byte) ([]byte, error) {
	body, at, nonce, err := k.open(kindMessage, data, subject)
	if err != nil {
		return nil, err
	}
	now := k.now()
	if age := now.Sub(at); age > MaxMessageAge || age < -MaxMessageAge {
		return nil, fmt.Errorf("%w: sealed %s ago", ErrReplayed, age.Round(time.Millisecond))
	}
	if !k.seen.add(nonce, now) {
		return nil, fmt.Errorf("%w: seen before", ErrReplayed)
	}
	return body, nil
}

// SealRecord seals body as the value of key in bucket, written at at
// (which a writer makes later than the record it replaces, see
// Watermarks).
func (k *Keys) SealRecord(bucket, key string, at time.Time, body []byte) []byte {
	return k.seal(kindRecord, at, body, bucket, key)
}

// OpenRecord opens the value of key in bucket and says when it was
// written: ErrForged unless a replica of this fleet sealed it for that
// bucket and key.
func (k *Keys) OpenRecord(bucket, key string, data []byte) ([]byte, time.Time, error) {
	body, at, _, err := k.open(kindRecord, data, bucket, key)
	return body, at, err
}

// Route is the subject token that stands for id (a session id): a keyed
// hash, the same on every replica sealing with the same first secret.
func (k *Keys) Route(id string) string { return route(k.routes[0], id) }

// Routes are id's subject tokens under every secret, first one first: a
// replica subscribes to all of them, so that replicas that seal with
// another secret during a rotation still reach it.
func (k *Keys) Routes(id string) []string {
	out := make([]string, 0, len(k.routes))
	for _, key := range k.routes {
		if r := route(key, id); len(out) == 0 || out[0] != r {
			out = append(out, r)
		}
	}
	return out
}

func route(key []byte, id string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Next is the write time of a record that replaces one written at prev:
// now, or just after prev when this replica's clock is behind the
// writer's, so that readers' watermarks accept it.
func (k *Keys) Next(prev time.Time) time.Time {
	now := k.now()
	if !now.After(prev) {
		now = prev.Add(time.Microsecond)
	}
	return now
}

// nonceCache remembers the nonces of the messages opened lately, in two
// generations swapped every 2·MaxMessageAge: a nonce is kept at least
// that long after it was opened, as long as a message sealed up to
// MaxMessageAge ahead of this replica's clock is accepted.
type nonceCache struct {
	mu        sync.Mutex
	cur, prev map[[chacha20poly1305.NonceSizeX]byte]struct{}
	since     time.Time
}

// maxNonces caps a generation; past it nonces are not remembered (only
// genuine messages get this far, so only a fleet's own load fills it).
const maxNonces = 1 << 18

// add records nonce; false when it was seen before.
func (c *nonceCache) add(nonce []byte, now time.Time) bool {
	var n [chacha20poly1305.NonceSizeX]byte
	copy(n[:], nonce)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || now.Sub(c.since) > 2*MaxMessageAge {
		c.prev, c.cur, c.since = c.cur, map[[chacha20poly1305.NonceSizeX]byte]struct{}{}, now
	}
	if _, ok := c.cur[n]; ok {
		return false
	}
	if _, ok := c.prev[n]; ok {
		return false
	}
	if len(c.cur) < maxNonces {
		c.cur[n] = struct{}{}
	}
	return true
}

// Watermarks are the newest write times a replica accepted, per record:
// a record written earlier than one already accepted under the same key
// is a replay (someone put an old sealed value back) and is refused. A
// record may come again (a watcher restarted) with the same time. At
// most maxWatermarks keys are kept; past it the oldest half is forgotten.
type Watermarks struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const maxWatermarks = 1 << 16

// Accept records that key's value written at at was read, unless a newer
// one was accepted before (then ErrReplayed).
func (w *Watermarks) Accept(key string, at time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if last, ok := w.m[key]; ok && at.Before(last) {
		return fmt.Errorf("%w: written at %s, a newer record (%s) was read before", ErrReplayed,
			at.UTC().Format(time.RFC3339Nano), last.UTC().Format(time.RFC3339Nano))
	}
	if w.m == nil {
		w.m = map[string]time.Time{}
	}
	if len(w.m) >= maxWatermarks {
		w.forgetOldestLocked()
	}
	w.m[key] = at
	return nil
}

// Latest is the write time of the newest record of key accepted (zero:
// none).
func (w *Watermarks) Latest(key string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[key]
}

func (w *Watermarks) forgetOldestLocked() {
	cut := time.Now().Add(-time.Hour)
	for k, at := range w.m {
		if at.Before(cut) || len(w.m) > maxWatermarks/2 {
			delete(w.m, k)
		}
	}
}
