package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// blobTempPattern names temporary blob files; they are never referenced,
// so garbage collection removes leftovers.
const blobTempPattern = ".tmp-*"

// blobPath returns the file of a canonical digest.
func (s *Store) blobPath(digest string) string {
	return filepath.Join(s.blobDir, strings.TrimPrefix(digest, digestPrefix))
}

// writeBlob stores data under its canonical digest unless an intact copy
// is already there; a damaged copy is replaced. The caller holds s.mu.
func (s *Store) writeBlob(digest string, data []byte) error {
	path := s.blobPath(digest)
	if old, err := os.ReadFile(path); err == nil {
		if bytes.Equal(old, data) {
			return nil
		}
		s.log.Warn("policy store: replacing corrupt blob", "digest", digest, "path", path)
	}
	if err := writeFileAtomic(s.blobDir, blobTempPattern, path, data); err != nil {
		return fmt.Errorf("storing blob %s: %w", digest, err)
	}
	// The state must never name a blob that could vanish in a crash.
	if err := syncDir(s.blobDir); err != nil {
		return fmt.Errorf("storing blob %s: syncing %s: %w", digest, s.blobDir, err)
	}
	return nil
}

// readBlob reads the blob of a canonical digest and verifies it.
func (s *Store) readBlob(digest string) ([]byte, error) {
	path := s.blobPath(digest)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", digest, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", digest, err)
	}
	if got := Digest(b); got != digest {
		return nil, fmt.Errorf("blob %s: %w: %s hashes to %s", digest, ErrCorrupt, path, got)
	}
	return b, nil
}

// gcLocked deletes every file in the blob directory that no module
// version references, including leftover temporary files. Failures are
// logged: the state is already consistent without them. The caller holds
// s.mu.
func (s *Store) gcLocked() {
	keep := make(map[string]bool)
	for _, ms := range s.st.Modules {
		keep[strings.TrimPrefix(ms.Active.Digest, digestPrefix)] = true
		for _, v := range ms.History {
			keep[strings.TrimPrefix(v.Digest, digestPrefix)] = true
		}
	}
	entries, err := os.ReadDir(s.blobDir)
	if err != nil {
		s.log.Warn("policy store: listing blobs for garbage collection", "dir", s.blobDir, "err", err)
		return
	}
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		path := filepath.Join(s.blobDir, e.Name())
		if err := os.Remove(path); err != nil {
			s.log.Warn("policy store: removing unreferenced blob", "path", path, "err", err)
			continue
		}
		s.log.Debug("policy store: removed unreferenced blob", "path", path)
	}
}
