package store

import (
	"errors"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy"
)

// TestReplace: a whole state from elsewhere replaces the store's in one
// write; one naming bytes the store neither has nor is given changes
// nothing; blobs of the previous state survive until GC, so it can be put
// back.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 5)
	if _, err := s.Commit("old", mod(0), Version{}); err != nil {
		t.Fatal(err)
	}
	prevMods, prevAtts := s.List(), s.Attachments()
	v := func(n int) Version { return Version{Digest: Digest(mod(n)), Size: int64(len(mod(n)))} }
	mods := []Module{{Name: "m", Active: v(2), History: []Version{v(1)}}}
	atts := []policy.Spec{{Name: "p", Module: "m", Tools: []string{"*"}}}

	for _, tc := range []struct {
		name  string
		blobs map[string][]byte
		want  error
	}{
		{"a blob missing", map[string][]byte{Digest(mod(2)): mod(2)}, ErrNotFound},
		{"a blob not matching its digest", map[string][]byte{Digest(mod(2)): mod(3)}, ErrDigestMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Replace(mods, atts, tc.blobs); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if got := s.List(); len(got) != 1 || got[0].Name != "old" {
				t.Errorf("state changed: %+v", got)
			}
		})
	}
	if err := s.Replace(mods, atts, map[string][]byte{Digest(mod(1)): mod(1), Digest(mod(2)): mod(2)}); err != nil {
		t.Fatal(err)
	}
	m, ok := s.Get("m")
	if !ok || m.Active.Digest != Digest(mod(2)) || len(m.History) != 1 || m.History[0].Digest != Digest(mod(1)) || len(s.Attachments()) != 1 {
		t.Fatalf("after Replace: %+v %v", m, s.Attachments())
	}
	if _, ok := s.Get("old"); ok {
		t.Error("the old module is still there")
	}
	// The previous state goes back with its blobs until GC.
	if err := s.Replace(prevMods, prevAtts, nil); err != nil {
		t.Fatalf("putting the previous state back: %v", err)
	}
	if err := s.Replace(mods, atts, nil); err != nil {
		t.Fatal(err)
	}
	s.GC()
	if s.HasBlob(Digest(mod(0))) || !s.HasBlob(Digest(mod(1))) {
		t.Errorf("after GC: old blob kept %v, history blob kept %v", s.HasBlob(Digest(mod(0))), s.HasBlob(Digest(mod(1))))
	}
	// Reopened, the store reads the replaced state.
	s2 := openStore(t, dir, 5)
	if b, _, err := s2.ActiveWasm("m"); err != nil || string(b) != string(mod(2)) {
		t.Fatalf("reopened: %q %v", b, err)
	}
}

// TestReplaceKeepsPulled: a module Resolve pulled (the cache of a
// config's oci:// module) survives a Replace that does not name it, and
// GC keeps its blob; one the new state names is replaced like any other.
func TestReplaceKeepsPulled(t *testing.T) {
	s := openStore(t, t.TempDir(), 5)
	if _, err := s.Commit("oci-redact-0000", mod(1), Version{UploadedBy: UploadedByOCI, Source: "oci://r/p/redact:v1@sha256:" + Digest(mod(1))[7:]}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit("uploaded", mod(2), Version{}); err != nil {
		t.Fatal(err)
	}
	v3 := Version{Digest: Digest(mod(3)), Size: int64(len(mod(3)))}
	if err := s.Replace([]Module{{Name: "m", Active: v3}}, nil, map[string][]byte{Digest(mod(3)): mod(3)}); err != nil {
		t.Fatal(err)
	}
	s.GC()
	names := []string{}
	for _, m := range s.List() {
		names = append(names, m.Name)
	}
	if len(names) != 2 || names[0] != "m" || names[1] != "oci-redact-0000" {
		t.Fatalf("modules after Replace: %v; want m and the pulled oci-redact-0000", names)
	}
	if _, err := s.Blob(Digest(mod(1))); err != nil {
		t.Fatalf("the pulled module's blob after GC: %v", err)
	}
}
