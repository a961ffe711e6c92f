// Package pinning protects against "rug pulls": an MCP server that changes a
// tool's description or schema after the user has come to trust it.
//
// The gateway passes every tool definition it sees to [Store.Check]. The
// first definition seen for a server's tool is pinned by its [Fingerprint].
// A later definition with a different fingerprint is recorded as a pending
// [Change], with a readable diff, and stays pending until an operator calls
// [Store.Approve]; meanwhile the gateway withholds the tool or only flags it,
// as configured.
package pinning

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

var (
	// ErrNotPending reports an Approve for a tool with no pending change.
	ErrNotPending = errors.New("no pending change for tool")
	// ErrUnknownTool reports a Forget for a tool that is not pinned.
	ErrUnknownTool = errors.New("tool is not pinned")
)

// Verdict is the outcome of Store.Check.
type Verdict int

const (
	// Pinned means the tool was seen for the first time and is now pinned.
	Pinned Verdict = iota + 1
	// Unchanged means the definition matches the pin.
	Unchanged
	// Changed means the definition differs from the pin; the change is
	// pending until approved.
	Changed
)

// String returns "pinned", "unchanged" or "changed".
func (v Verdict) String() string {
	switch v {
	case Pinned:
		return "pinned"
	case Unchanged:
		return "unchanged"
	case Changed:
		return "changed"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Change describes a tool whose definition differs from its pin.
type Change struct {
	Server, Tool   string
	OldFingerprint string // the pinned, approved definition
	NewFingerprint string // the definition now served
	// Diff is a line-based, unified-style diff of the canonical, indented
	// old and new definitions, with "- " and "+ " marking changed lines.
	Diff string
	// FirstSeen is when the tool was first pinned; ChangedAt is when this
	// pending definition was first seen.
	FirstSeen, ChangedAt time.Time
}

// Store holds the pins. It is safe for concurrent use.
//
// A Store opened with a path writes its file whenever its content changes:
// on a first sight or a new pending change in Check, and in Approve and
// Forget. Each write is atomic (temporary file, fsync, rename), so a crash
// leaves either the old or the new file. Because Check cannot return an
// error, a failed write there leaves the store marked unsaved; Save writes
// it again and reports the error. Only one process should use a file.
type Store struct {
	path string

	mu    sync.Mutex
	pins  map[toolKey]*pin
	dirty bool // memory differs from the file
	batch int  // > 0 inside Batch: writes wait until it ends
}

// Batch runs fn, which may call Check many times (a server's whole tools
// list), and writes the file once at the end instead of once per change.
func (s *Store) Batch(fn func()) {
	s.mu.Lock()
	s.batch++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.batch--
		if s.batch == 0 {
			_ = s.saveLocked()
		}
		s.mu.Unlock()
	}()
	fn()
}

type toolKey struct{ server, tool string }

// pin is the record for one tool. Definitions are kept in compact
// canonical form.
type pin struct {
	Server      string          `json:"server"`
	Tool        string          `json:"tool"`
	Fingerprint string          `json:"fingerprint"`
	Definition  json.RawMessage `json:"definition"`
	FirstSeen   time.Time       `json:"firstSeen"`
	Pending     *pending        `json:"pending,omitempty"`

	// seenRaw is the SHA-256 of the bytes last passed to Check for this
	// tool and seenFP their fingerprint (not stored in the file).
	seenRaw [sha256.Size]byte
	seenFP  string
}

// pending is a changed definition awaiting approval.
type pending struct {
	Fingerprint string          `json:"fingerprint"`
	Definition  json.RawMessage `json:"definition"`
	ChangedAt   time.Time       `json:"changedAt"`
}

// fileFormat is the persisted form of a Store.
type fileFormat struct {
	Version int    `json:"version"`
	Tools   []*pin `json:"tools"`
}

const fileVersion = 1

// Open loads the store kept in the file at path, or starts an empty one
// when the file does not exist yet. An empty path gives a store that lives
// in memory only. A file that cannot be parsed, or whose recorded
// fingerprints do not match their definitions, is an error naming the file.
func Open(path string) (*Store, error) {
	s := &Store{path: path, pins: make(map[toolKey]*pin)}
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading pin store %q: %w", path, err)
	}
	if err := s.load(data); err != nil {
		return nil, fmt.Errorf("pin store %q is corrupt: %w", path, err)
	}
	return s, nil
}

// load fills an empty store from the file content, checking every record.
func (s *Store) load(data []byte) error {
	var f fileFormat
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return err
	}
	if f.Version != fileVersion {
		return fmt.Errorf("unsupported version %d", f.Version)
	}
	for i, p := range f.Tools {
		if p == nil {
			return fmt.Errorf("tools[%d]: null entry", i)
		}
		k := toolKey{p.Server, p.Tool}
		if _, dup := s.pins[k]; dup {
			return fmt.Errorf("tools[%d]: duplicate entry for %s/%s", i, p.Server, p.Tool)
		}
		var err error
		if p.Definition, err = checkDefinition(p.Fingerprint, p.Definition); err != nil {
			return fmt.Errorf("tools[%d] (%s/%s): %w", i, p.Server, p.Tool, err)
		}
		if p.Pending != nil {
			if p.Pending.Definition, err = checkDefinition(p.Pending.Fingerprint, p.Pending.Definition); err != nil {
				return fmt.Errorf("tools[%d] (%s/%s) pending: %w", i, p.Server, p.Tool, err)
			}
		}
		s.pins[k] = p
	}
	return nil
}

// checkDefinition returns the canonical form of a stored definition after
// verifying that it has the stored fingerprint, which catches damaged or
// hand-edited files. (The file holds definitions indented, so they are
// canonicalized again here.)
func checkDefinition(fp string, def json.RawMessage) (json.RawMessage, error) {
	if len(def) == 0 {
		return nil, errors.New("missing definition")
	}
	canon := canonical(def)
	if fingerprintCanonical(canon) != fp {
		return nil, errors.New("fingerprint does not match definition")
	}
	return canon, nil
}

// Check compares def, the definition server currently serves for tool,
// with the pin. The first definition seen is pinned (Pinned). A definition
// with the pinned fingerprint is Unchanged; if a change was pending, the
// server has reverted and the pending change is dropped. Any other
// definition is Changed and is recorded as the pending change, replacing an
// older pending one; seeing the same changed definition again returns the
// same pending Change. The Change is nil unless the verdict is Changed.
func (s *Store) Check(server, tool string, def json.RawMessage) (Verdict, *Change) {
	k := toolKey{server, tool}
	raw := sha256.Sum256(def)
	fp := s.seenFingerprint(k, raw)
	var canon []byte
	if fp == "" { // bytes not seen before: canonicalize (decode, sort, encode)
		canon = canonical(def)
		fp = fingerprintCanonical(canon)
	}
	canonOf := func() []byte {
		if canon == nil {
			canon = canonical(def)
		}
		return canon
	}
	now := time.Now().UTC()

	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pins[k]
	if !ok {
		p = &pin{Server: server, Tool: tool, Fingerprint: fp, Definition: canonOf(), FirstSeen: now}
		s.pins[k] = p
		p.seenRaw, p.seenFP = raw, fp
		s.changedLocked()
		return Pinned, nil
	}
	p.seenRaw, p.seenFP = raw, fp
	if p.Fingerprint == fp {
		if p.Pending != nil {
			p.Pending = nil
			s.changedLocked()
		}
		return Unchanged, nil
	}
	if p.Pending == nil || p.Pending.Fingerprint != fp {
		p.Pending = &pending{Fingerprint: fp, Definition: canonOf(), ChangedAt: now}
		s.changedLocked()
	}
	c := p.change()
	return Changed, &c
}

// seenFingerprint returns the fingerprint of the definition last checked
// for k if its bytes hash to raw, else "". A catalogue rebuild checks every
// tool of every server again; most come back byte for byte, and hashing
// the bytes costs a small part of canonicalizing them (decode, sort,
// re-encode).
func (s *Store) seenFingerprint(k toolKey, raw [sha256.Size]byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pins[k]; ok && p.seenFP != "" && p.seenRaw == raw {
		return p.seenFP
	}
	return ""
}

// Pending returns the pending changes sorted by server, then tool.
func (s *Store) Pending() []Change {
	s.mu.Lock()
	var out []Change
	for _, p := range s.pins {
		if p.Pending != nil {
			out = append(out, p.change())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Tool, b.Tool))
	})
	return out
}

// Approve accepts the pending definition of server's tool as its new pin
// and persists the store. It returns ErrNotPending when there is no pending
// change.
func (s *Store) Approve(server, tool string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pins[toolKey{server, tool}]
	if !ok || p.Pending == nil {
		return fmt.Errorf("approving %s/%s: %w", server, tool, ErrNotPending)
	}
	p.Fingerprint, p.Definition = p.Pending.Fingerprint, p.Pending.Definition
	p.Pending = nil
	s.dirty = true
	return s.saveLocked()
}

// Forget removes the pin of server's tool, with any pending change, and
// persists the store; the next Check pins whatever definition is then
// served. It returns ErrUnknownTool when the tool is not pinned.
func (s *Store) Forget(server, tool string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := toolKey{server, tool}
	if _, ok := s.pins[k]; !ok {
		return fmt.Errorf("forgetting %s/%s: %w", server, tool, ErrUnknownTool)
	}
	delete(s.pins, k)
	s.dirty = true
	return s.saveLocked()
}

// Save writes the store to its file if it has unsaved changes, which only
// happens after a failed write in Check. It is a no-op for an in-memory
// store.
func (s *Store) Save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saveLocked()
}

// change builds the Change for a pin with a pending definition.
func (p *pin) change() Change {
	name := p.Server + "/" + p.Tool
	return Change{
		Server:         p.Server,
		Tool:           p.Tool,
		OldFingerprint: p.Fingerprint,
		NewFingerprint: p.Pending.Fingerprint,
		Diff: unifiedDiff(
			name+" (pinned "+short(p.Fingerprint)+")",
			name+" (now served "+short(p.Pending.Fingerprint)+")",
			pretty(p.Definition), pretty(p.Pending.Definition)),
		FirstSeen: p.FirstSeen,
		ChangedAt: p.Pending.ChangedAt,
	}
}

// short abbreviates a fingerprint for display.
func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// changedLocked marks the store changed and tries to persist it; a failure
// is left for Save to report.
func (s *Store) changedLocked() {
	if s.batch > 0 {
		s.dirty = true
		return
	}
	s.dirty = true
	_ = s.saveLocked()
}

// saveLocked writes the file if the store is dirty. s.mu must be held.
func (s *Store) saveLocked() error {
	if s.path == "" {
		s.dirty = false
		return nil
	}
	if !s.dirty {
		return nil
	}
	f := fileFormat{Version: fileVersion, Tools: make([]*pin, 0, len(s.pins))}
	for _, p := range s.pins {
		f.Tools = append(f.Tools, p)
	}
	slices.SortFunc(f.Tools, func(a, b *pin) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Tool, b.Tool))
	})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return fmt.Errorf("encoding pin store: %w", err)
	}
	if err := writeFileAtomic(s.path, buf.Bytes()); err != nil {
		return err
	}
	s.dirty = false
	return nil
}

// writeFileAtomic replaces path with data: it writes a temporary file in
// the same directory, syncs it, renames it over path and syncs the
// directory.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing pin store %q: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("writing pin store %q: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("syncing pin store %q: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("closing pin store %q: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing pin store %q: %w", path, err)
	}
	// Make the rename durable; not every platform can sync a directory,
	// and the file itself is already complete, so this is best effort.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
