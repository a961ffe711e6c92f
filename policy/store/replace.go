package store

import (
	"fmt"
	"slices"

	"github.com/edge-mcp/edge-mcp/policy"
)

// This file lets a store mirror a state kept elsewhere (a fleet's shared
// control plane): the whole set of modules and attachments is replaced in
// one atomic write, and blobs are only collected when the caller says the
// new state is for good, so that a failed activation can put the previous
// state back with its blobs.

// HasBlob reports whether an intact blob of digest is stored.
func (s *Store) HasBlob(digest string) bool {
	d, err := ParseDigest(digest)
	if err != nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, err = s.readBlob(d)
	return err == nil
}

// Replace makes mods (each with its history newest first, as Get returns
// it) and atts the store's whole state. blobs holds module bytes by
// digest; they are verified and stored first. Every version must then have
// an intact blob, else nothing changes (ErrNotFound). Replace keeps blobs
// no version references any more until GC, and the modules Resolve pulled
// (Version.Pulled) that mods does not name: they are this store's cache
// of the config's oci:// modules, not part of the state replaced.
func (s *Store) Replace(mods []Module, atts []policy.Spec, blobs map[string][]byte) error {
	next := newState()
	for _, m := range mods {
		ms := &moduleState{Active: m.Active, History: slices.Clone(m.History)}
		slices.Reverse(ms.History) // stored oldest first
		if _, dup := next.Modules[m.Name]; dup {
			return fmt.Errorf("policy store: replacing state: module %q listed twice", m.Name)
		}
		next.Modules[m.Name] = ms
	}
	specs, err := cloneSpecs(atts)
	if err != nil {
		return fmt.Errorf("policy store: replacing state: %w", err)
	}
	next.Attachments = specs
	if err := next.check(); err != nil {
		return fmt.Errorf("policy store: replacing state: %w: %w", ErrCorrupt, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.st.clone()
	next.Extra = cur.Extra
	for name, ms := range cur.Modules {
		if _, named := next.Modules[name]; !named && ms.Active.Pulled() && s.intactLocked(ms) {
			next.Modules[name] = ms
		}
	}
	for d, b := range blobs {
		if err := CheckDigest(b, d); err != nil {
			return fmt.Errorf("policy store: replacing state: %w", err)
		}
		if err := s.writeBlob(Digest(b), b); err != nil {
			return fmt.Errorf("policy store: replacing state: %w", err)
		}
	}
	for name, ms := range next.Modules {
		for _, v := range append([]Version{ms.Active}, ms.History...) {
			if _, err := s.readBlob(v.Digest); err != nil {
				return fmt.Errorf("policy store: replacing state: module %q: %w", name, err)
			}
		}
	}
	if err := s.updateLocked(func(st *state) error { *st = *next; return nil }); err != nil {
		return fmt.Errorf("policy store: replacing state: %w", err)
	}
	s.log.Info("policy store state replaced", "modules", len(next.Modules), "attachments", len(next.Attachments))
	return nil
}

// GC deletes the blobs no stored version references.
func (s *Store) GC() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gcLocked()
}

// intactLocked reports whether every version of ms has an intact blob.
func (s *Store) intactLocked(ms *moduleState) bool {
	for _, v := range append([]Version{ms.Active}, ms.History...) {
		if _, err := s.readBlob(v.Digest); err != nil {
			return false
		}
	}
	return true
}
