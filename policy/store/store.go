// Package store is the gateway's on-disk, content-addressed store of
// uploaded Wasm policy modules, plus the helpers an upload endpoint needs
// (body decoding with a decoded-size cap, digests, detached ed25519
// signatures).
//
// A store lives in one directory:
//
//	blobs/sha256/<hex>   module bytes, named by their SHA-256
//	state.json           module versions, policy attachments, extras
//
// Blobs are written to a temporary file, fsynced and renamed into place,
// and verified against their digest whenever they are read. state.json is
// replaced atomically (temporary file, fsync, rename, fsync of the
// directory), so a crash leaves either the old or the new state. Blobs no
// module references any more are deleted after every change.
//
// A directory must be owned by one Store at a time; the store takes no
// lock against other processes.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/edge-mcp/edge-mcp/policy"
)

// Sentinel errors; test for them with errors.Is.
var (
	// ErrNotFound: no module of that name, or no blob of that digest.
	ErrNotFound = errors.New("not found")
	// ErrNoPrevious: Rollback found no older version to activate.
	ErrNoPrevious = errors.New("no previous version to roll back to")
	// ErrBadName: a module name is not 1–64 characters of [A-Za-z0-9._-]
	// or starts with '.'.
	ErrBadName = errors.New("invalid module name")
	// ErrCorrupt: a blob does not match its digest, or state.json cannot
	// be decoded.
	ErrCorrupt = errors.New("corrupt data")
	// ErrTooLarge: an upload body decodes to more than the allowed size.
	ErrTooLarge = errors.New("body too large")
	// ErrDigestMismatch: the bytes do not hash to the expected digest.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrBadSignature: a signature is malformed or no trusted key verifies
	// it.
	ErrBadSignature = errors.New("bad signature")
	// ErrUnsigned: a signature was required but none was given.
	ErrUnsigned = errors.New("module is not signed")
)

const (
	stateFileName = "state.json"
	// stateTempPattern names the temporary files state.json is written
	// through; leftovers of a crash are removed by Open.
	stateTempPattern = ".state.json.tmp-*"
	defaultKeep      = 5
	maxNameLen       = 64
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// Keep is how many previous versions of each module are kept for
	// rollback, not counting the active one; 0 or less means 5. A lower
	// value than a directory was written with takes effect at each
	// module's next Commit.
	Keep int
	// Logger receives store events; nil discards them.
	Logger *slog.Logger
}

// Version describes one uploaded version of a module.
type Version struct {
	// Digest is "sha256:<hex>" of the module bytes.
	Digest string `json:"digest"`
	// Size is the module's length in bytes.
	Size int64 `json:"size"`
	// ABIVersion is the policy ABI the module declares, as recorded by the
	// uploader.
	ABIVersion string `json:"abi_version,omitempty"`
	// UploadedAt is when the version was uploaded; Commit fills in the
	// current time when it is zero.
	UploadedAt time.Time `json:"uploaded_at"`
	// UploadedBy identifies the uploader (a principal, a token name).
	UploadedBy string `json:"uploaded_by,omitempty"`
	// SignedBy is the KeyID of the key whose signature was verified.
	SignedBy string `json:"signed_by,omitempty"`
	// Source is the oci:// reference the version was pulled from, pinned
	// to the manifest digest its tag resolved to; empty for uploads.
	Source string `json:"source,omitempty"`
	// ActivatedAt is when the version last became active; set by the
	// store.
	ActivatedAt time.Time `json:"activated_at,omitzero"`
}

// Module is a snapshot of one stored module.
type Module struct {
	Name   string
	Active Version
	// History holds the older versions available for rollback, newest
	// first.
	History []Version
}

// Store is an open store directory. Every method is safe for concurrent
// use. A change that fails leaves the previous state intact, in memory and
// on disk.
type Store struct {
	dir       string
	blobDir   string
	statePath string
	keep      int
	log       *slog.Logger

	mu sync.RWMutex
	// st is never modified once published: changes build a copy, write it
	// and then swap it in.
	st *state
}

// Open opens the store in dir, creating the directory if needed. A
// state.json that cannot be decoded is an error (wrapping ErrCorrupt) that
// names the file and the reason; the store never silently starts over.
// Open removes leftovers of interrupted writes and unreferenced blobs.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("policy store: no directory given")
	}
	s := &Store{
		dir:       dir,
		blobDir:   filepath.Join(dir, "blobs", "sha256"),
		statePath: filepath.Join(dir, stateFileName),
		keep:      opts.Keep,
		log:       opts.Logger,
	}
	if s.keep <= 0 {
		s.keep = defaultKeep
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(s.blobDir, 0o700); err != nil {
		return nil, fmt.Errorf("policy store: creating %s: %w", s.blobDir, err)
	}
	st, err := loadState(s.statePath)
	if err != nil {
		return nil, err
	}
	s.st = st
	s.removeStateTemps()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.gcLocked()
	for name, m := range st.Modules {
		for _, v := range append([]Version{m.Active}, m.History...) {
			if _, err := os.Stat(s.blobPath(v.Digest)); err != nil {
				s.log.Warn("policy store: blob of a stored version is unreadable",
					"module", name, "digest", v.Digest, "err", err)
			}
		}
	}
	s.log.Debug("policy store opened", "dir", dir, "modules", len(st.Modules), "attachments", len(st.Attachments))
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Commit stores wasm as the new active version of the module name. The
// previous active version moves into the history, which is trimmed to
// Options.Keep entries; blobs no module references any more are deleted.
// Digest and Size of v are filled in by the store (a non-empty v.Digest
// must match the bytes, else ErrDigestMismatch), as are a zero UploadedAt
// and ActivatedAt. Committing the bytes of the active version again
// changes nothing and returns the active version. Committing an older
// version's bytes moves it out of the history and makes it active.
func (s *Store) Commit(name string, wasm []byte, v Version) (Version, error) {
	if err := checkName(name); err != nil {
		return Version{}, err
	}
	if len(wasm) == 0 {
		return Version{}, fmt.Errorf("policy store: committing %q: empty module", name)
	}
	digest := Digest(wasm)
	if v.Digest != "" {
		if err := CheckDigest(wasm, v.Digest); err != nil {
			return Version{}, fmt.Errorf("policy store: committing %q: %w", name, err)
		}
	}
	now := time.Now().UTC()
	v.Digest = digest
	v.Size = int64(len(wasm))
	if v.UploadedAt.IsZero() {
		v.UploadedAt = now
	} else {
		v.UploadedAt = v.UploadedAt.UTC()
	}
	v.ActivatedAt = now

	s.mu.Lock()
	defer s.mu.Unlock()
	// Write (or repair) the blob even when the version is already active:
	// re-uploading is how an operator fixes a damaged blob.
	if err := s.writeBlob(digest, wasm); err != nil {
		return Version{}, fmt.Errorf("policy store: committing %q: %w", name, err)
	}
	if cur, ok := s.st.Modules[name]; ok && cur.Active.Digest == digest {
		return cur.Active, nil
	}
	err := s.updateLocked(func(st *state) error {
		ms := &moduleState{Active: v}
		if old := st.Modules[name]; old != nil {
			hist := make([]Version, 0, len(old.History)+1)
			for _, h := range old.History {
				if h.Digest != digest {
					hist = append(hist, h)
				}
			}
			hist = append(hist, old.Active)
			if len(hist) > s.keep {
				hist = slices.Clone(hist[len(hist)-s.keep:])
			}
			ms.History = hist
		}
		st.Modules[name] = ms
		return nil
	})
	if err != nil {
		s.gcLocked() // the new blob may now be unreferenced
		return Version{}, fmt.Errorf("policy store: committing %q: %w", name, err)
	}
	s.gcLocked()
	s.log.Info("policy module committed", "module", name, "digest", digest, "size", v.Size,
		"uploaded_by", v.UploadedBy, "signed_by", v.SignedBy)
	return v, nil
}

// Rollback makes the newest version in the module's history active again
// and returns it. The version rolled back from is discarded. It fails with
// ErrNotFound for an unknown module, ErrNoPrevious when the history is
// empty, and with the error of reading the older version's blob
// (ErrCorrupt, ErrNotFound) when that is damaged; nothing changes then.
func (s *Store) Rollback(name string) (Version, error) {
	if err := checkName(name); err != nil {
		return Version{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.st.Modules[name]
	if old == nil {
		return Version{}, fmt.Errorf("policy store: rolling back %q: module %w", name, ErrNotFound)
	}
	if len(old.History) == 0 {
		return Version{}, fmt.Errorf("policy store: rolling back %q: %w", name, ErrNoPrevious)
	}
	n := len(old.History)
	prev := old.History[n-1]
	// Refuse to activate a version that could not be loaded.
	if _, err := s.readBlob(prev.Digest); err != nil {
		return Version{}, fmt.Errorf("policy store: rolling back %q: %w", name, err)
	}
	prev.ActivatedAt = time.Now().UTC()
	err := s.updateLocked(func(st *state) error {
		st.Modules[name] = &moduleState{Active: prev, History: slices.Clone(old.History[:n-1])}
		return nil
	})
	if err != nil {
		return Version{}, fmt.Errorf("policy store: rolling back %q: %w", name, err)
	}
	s.gcLocked()
	s.log.Info("policy module rolled back", "module", name, "from", old.Active.Digest, "to", prev.Digest)
	return prev, nil
}

// Remove forgets the module and all its versions, deleting blobs no other
// module references. It fails with ErrNotFound for an unknown module.
func (s *Store) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.st.Modules[name]; !ok {
		return fmt.Errorf("policy store: removing %q: module %w", name, ErrNotFound)
	}
	err := s.updateLocked(func(st *state) error {
		delete(st.Modules, name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("policy store: removing %q: %w", name, err)
	}
	s.gcLocked()
	s.log.Info("policy module removed", "module", name)
	return nil
}

// Get returns a snapshot of the module name.
func (s *Store) Get(name string) (Module, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ms, ok := s.st.Modules[name]
	if !ok {
		return Module{}, false
	}
	return ms.snapshot(name), true
}

// List returns snapshots of all modules, sorted by name.
func (s *Store) List() []Module {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Module, 0, len(s.st.Modules))
	for name, ms := range s.st.Modules {
		out = append(out, ms.snapshot(name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Blob returns the bytes stored under digest ("sha256:<hex>" or bare hex),
// verified against it: ErrCorrupt when they do not match, ErrNotFound
// when there is no such blob.
func (s *Store) Blob(digest string) ([]byte, error) {
	d, err := ParseDigest(digest)
	if err != nil {
		return nil, fmt.Errorf("policy store: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.readBlob(d)
}

// ActiveWasm returns the verified bytes and the description of the
// module's active version.
func (s *Store) ActiveWasm(name string) ([]byte, Version, error) {
	if err := checkName(name); err != nil {
		return nil, Version{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ms := s.st.Modules[name]
	if ms == nil {
		return nil, Version{}, fmt.Errorf("policy store: module %q: %w", name, ErrNotFound)
	}
	b, err := s.readBlob(ms.Active.Digest)
	if err != nil {
		return nil, Version{}, fmt.Errorf("policy store: module %q: %w", name, err)
	}
	return b, ms.Active, nil
}

// Attachments returns a copy of the stored run-time policy attachments.
func (s *Store) Attachments() []policy.Spec {
	s.mu.RLock()
	defer s.mu.RUnlock()
	specs, err := cloneSpecs(s.st.Attachments)
	if err != nil { // cannot happen: the specs were decoded from JSON
		s.log.Error("policy store: copying attachments", "err", err)
		return nil
	}
	return specs
}

// SetAttachments replaces the stored run-time policy attachments. The store
// does not validate them; that is the caller's job.
func (s *Store) SetAttachments(specs []policy.Spec) error {
	specs, err := cloneSpecs(specs)
	if err != nil {
		return fmt.Errorf("policy store: setting attachments: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err = s.updateLocked(func(st *state) error {
		st.Attachments = specs
		return nil
	})
	if err != nil {
		return fmt.Errorf("policy store: setting attachments: %w", err)
	}
	s.log.Info("policy attachments stored", "count", len(specs))
	return nil
}

// Extra returns a copy of the JSON value another subsystem stored under
// key, or nil.
func (s *Store) Extra(key string) json.RawMessage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return bytes.Clone(s.st.Extra[key])
}

// SetExtra stores a JSON value under key for another subsystem (for
// example "approvals"); a nil v deletes the key.
func (s *Store) SetExtra(key string, v json.RawMessage) error {
	if key == "" {
		return errors.New("policy store: setting extra: empty key")
	}
	var compact []byte
	if v != nil {
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return fmt.Errorf("policy store: setting extra %q: invalid JSON: %w", key, err)
		}
		compact = buf.Bytes()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.updateLocked(func(st *state) error {
		if compact == nil {
			delete(st.Extra, key)
		} else {
			st.Extra[key] = compact
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("policy store: setting extra %q: %w", key, err)
	}
	return nil
}

// updateLocked applies fn to a copy of the state, writes the copy to disk
// and publishes it. On error nothing changes. The caller holds s.mu.
func (s *Store) updateLocked(fn func(st *state) error) error {
	next := s.st.clone()
	if err := fn(next); err != nil {
		return err
	}
	if err := s.writeState(next); err != nil {
		return err
	}
	s.st = next
	return nil
}

func (s *Store) removeStateTemps() {
	matches, _ := filepath.Glob(filepath.Join(s.dir, stateTempPattern))
	for _, m := range matches {
		if err := os.Remove(m); err != nil {
			s.log.Warn("policy store: removing leftover temporary file", "path", m, "err", err)
		}
	}
}

// checkName returns an error wrapping ErrBadName unless name is a valid
// module name (see ValidName).
func checkName(name string) error {
	if err := ValidName(name); err != nil {
		return fmt.Errorf("policy store: %w", err)
	}
	return nil
}

// ValidName checks a module name against the rule: 1 to 64 characters of
// [A-Za-z0-9._-], not starting with '.'. The error wraps ErrBadName and
// says which part of the rule the name breaks: empty, too long, leading
// dot, NUL, control character, space, or another character.
func ValidName(name string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrBadName, quoteShort(name), fmt.Sprintf(format, args...))
	}
	switch {
	case name == "":
		return bad("empty; want 1-%d characters of [A-Za-z0-9._-]", maxNameLen)
	case len(name) > maxNameLen:
		return bad("%d bytes long; at most %d", len(name), maxNameLen)
	case name[0] == '.':
		return bad("starts with '.'")
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		case c == 0:
			return bad("contains NUL at byte %d", i)
		case c < 0x20 || c == 0x7f:
			return bad("contains control character %#02x at byte %d", c, i)
		case c == ' ':
			return bad("contains a space at byte %d", i)
		default:
			r, _ := utf8.DecodeRuneInString(name[i:])
			return bad("contains %q at byte %d; only A-Z a-z 0-9 . _ - are allowed", r, i)
		}
	}
	return nil
}

// cloneSpecs deep-copies specs through their JSON form, which is all the
// store knows about them.
func cloneSpecs(specs []policy.Spec) ([]policy.Spec, error) {
	if specs == nil {
		return nil, nil
	}
	b, err := json.Marshal(specs)
	if err != nil {
		return nil, err
	}
	var out []policy.Spec
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// quoteShort quotes s for an error message, cutting it if it is long.
func quoteShort(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q…", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}
