package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/edge-mcp/edge-mcp/policy"
)

func openStore(t *testing.T, dir string, keep int) *Store {
	t.Helper()
	s, err := Open(dir, Options{Keep: keep})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

// mod returns distinct module bytes for n.
func mod(n int) []byte { return []byte(fmt.Sprintf("\x00asm\x01\x00\x00\x00 module %d", n)) }

// blobFiles lists the files in the blob directory, as digests.
func blobFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, "sha256:"+e.Name())
	}
	return out
}

func digests(vs ...[]byte) []string {
	var out []string
	for _, v := range vs {
		out = append(out, Digest(v))
	}
	slices.Sort(out)
	return out
}

func historyDigests(m Module) []string {
	var out []string
	for _, v := range m.History {
		out = append(out, v.Digest)
	}
	return out
}

func mustCommit(t *testing.T, s *Store, name string, wasm []byte) Version {
	t.Helper()
	v, err := s.Commit(name, wasm, Version{UploadedBy: "tester"})
	if err != nil {
		t.Fatalf("Commit(%q): %v", name, err)
	}
	return v
}

func TestCommitRollbackRemove(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 0)

	v1 := mustCommit(t, s, "pii", mod(1))
	if v1.Digest != Digest(mod(1)) || v1.Size != int64(len(mod(1))) || v1.UploadedBy != "tester" {
		t.Fatalf("Commit returned %+v", v1)
	}
	if v1.UploadedAt.IsZero() || v1.ActivatedAt.IsZero() {
		t.Fatalf("Commit did not fill in times: %+v", v1)
	}
	mustCommit(t, s, "pii", mod(2))
	mustCommit(t, s, "pii", mod(3))

	m, ok := s.Get("pii")
	if !ok {
		t.Fatal("Get: module missing")
	}
	if m.Name != "pii" || m.Active.Digest != Digest(mod(3)) {
		t.Fatalf("active = %+v, want mod 3", m)
	}
	if got, want := historyDigests(m), []string{Digest(mod(2)), Digest(mod(1))}; !slices.Equal(got, want) {
		t.Fatalf("history = %v, want newest first %v", got, want)
	}
	if got, want := blobFiles(t, dir), digests(mod(1), mod(2), mod(3)); !slices.Equal(got, want) {
		t.Fatalf("blobs on disk = %v, want %v", got, want)
	}

	back, err := s.Rollback("pii")
	if err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if back.Digest != Digest(mod(2)) {
		t.Fatalf("Rollback activated %s, want mod 2", back.Digest)
	}
	wasm, v, err := s.ActiveWasm("pii")
	if err != nil || string(wasm) != string(mod(2)) || v.Digest != back.Digest {
		t.Fatalf("ActiveWasm after rollback = %q, %+v, %v", wasm, v, err)
	}
	if got, want := blobFiles(t, dir), digests(mod(1), mod(2)); !slices.Equal(got, want) {
		t.Fatalf("blob of the version rolled back from not collected: %v, want %v", got, want)
	}
	if _, err := s.Rollback("pii"); err != nil {
		t.Fatalf("second Rollback: %v", err)
	}
	if _, err := s.Rollback("pii"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("Rollback with empty history: %v, want ErrNoPrevious", err)
	}
	if _, err := s.Rollback("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Rollback of unknown module: %v, want ErrNotFound", err)
	}

	if err := s.Remove("pii"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, ok := s.Get("pii"); ok {
		t.Fatal("module still there after Remove")
	}
	if got := blobFiles(t, dir); len(got) != 0 {
		t.Fatalf("blobs left after Remove: %v", got)
	}
	if err := s.Remove("pii"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Remove: %v, want ErrNotFound", err)
	}
	if _, _, err := s.ActiveWasm("pii"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ActiveWasm of removed module: %v, want ErrNotFound", err)
	}
}

func TestHistoryTrimmedToKeep(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 2)
	for i := 1; i <= 5; i++ {
		mustCommit(t, s, "m", mod(i))
	}
	m, _ := s.Get("m")
	if got, want := historyDigests(m), []string{Digest(mod(4)), Digest(mod(3))}; !slices.Equal(got, want) {
		t.Fatalf("history = %v, want %v", got, want)
	}
	if got, want := blobFiles(t, dir), digests(mod(3), mod(4), mod(5)); !slices.Equal(got, want) {
		t.Fatalf("blobs on disk = %v, want %v", got, want)
	}

	// The default keeps five previous versions.
	s = openStore(t, t.TempDir(), 0)
	for i := 1; i <= 8; i++ {
		mustCommit(t, s, "m", mod(i))
	}
	if m, _ := s.Get("m"); len(m.History) != 5 {
		t.Fatalf("default Keep: history has %d versions, want 5", len(m.History))
	}
}

func TestCommitKnownBytes(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 0)
	v1 := mustCommit(t, s, "m", mod(1))
	mustCommit(t, s, "m", mod(2))

	// Re-committing the active bytes changes nothing.
	again, err := s.Commit("m", mod(2), Version{UploadedBy: "someone else"})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := s.Get("m")
	if again != m.Active || again.UploadedBy != "tester" || len(m.History) != 1 {
		t.Fatalf("re-commit of the active version changed the module: %+v / %+v", again, m)
	}

	// Committing an older version's bytes moves it out of the history.
	v, err := s.Commit("m", mod(1), Version{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Digest != v1.Digest {
		t.Fatalf("digest %s, want %s", v.Digest, v1.Digest)
	}
	m, _ = s.Get("m")
	if got, want := historyDigests(m), []string{Digest(mod(2))}; !slices.Equal(got, want) {
		t.Fatalf("history = %v, want %v (no duplicate of the active version)", got, want)
	}
}

func TestCommitChecksGivenDigest(t *testing.T) {
	s := openStore(t, t.TempDir(), 0)
	_, err := s.Commit("m", mod(1), Version{Digest: Digest(mod(2))})
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Commit with a wrong digest: %v, want ErrDigestMismatch", err)
	}
	if _, ok := s.Get("m"); ok {
		t.Fatal("module stored despite the digest mismatch")
	}
	bare := strings.ToUpper(strings.TrimPrefix(Digest(mod(1)), "sha256:"))
	v, err := s.Commit("m", mod(1), Version{Digest: bare})
	if err != nil {
		t.Fatalf("Commit with bare upper-case hex digest: %v", err)
	}
	if v.Digest != Digest(mod(1)) {
		t.Fatalf("stored digest %q is not canonical", v.Digest)
	}
	if _, err := s.Commit("m", nil, Version{}); err == nil {
		t.Fatal("Commit of an empty module succeeded")
	}
}

func TestSharedBlobsSurviveUntilUnreferenced(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 0)
	mustCommit(t, s, "a", mod(1))
	mustCommit(t, s, "b", mod(1))
	if err := s.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if got := blobFiles(t, dir); !slices.Equal(got, digests(mod(1))) {
		t.Fatalf("blob still used by b was collected: %v", got)
	}
	if _, _, err := s.ActiveWasm("b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("b"); err != nil {
		t.Fatal(err)
	}
	if got := blobFiles(t, dir); len(got) != 0 {
		t.Fatalf("unreferenced blob kept: %v", got)
	}
}

func TestBadNames(t *testing.T) {
	s := openStore(t, t.TempDir(), 0)
	for _, name := range []string{"", ".hidden", "a/b", "../x", "a b", "é", strings.Repeat("x", 65), "a\x00"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			if _, err := s.Commit(name, mod(1), Version{}); !errors.Is(err, ErrBadName) {
				t.Errorf("Commit: %v, want ErrBadName", err)
			}
			if _, err := s.Rollback(name); !errors.Is(err, ErrBadName) {
				t.Errorf("Rollback: %v, want ErrBadName", err)
			}
			if err := s.Remove(name); !errors.Is(err, ErrBadName) {
				t.Errorf("Remove: %v, want ErrBadName", err)
			}
			if _, _, err := s.ActiveWasm(name); !errors.Is(err, ErrBadName) {
				t.Errorf("ActiveWasm: %v, want ErrBadName", err)
			}
		})
	}
	for _, name := range []string{"a", "A.b_c-1", "x.", strings.Repeat("x", 64)} {
		if _, err := s.Commit(name, mod(1), Version{}); err != nil {
			t.Errorf("Commit(%q): %v", name, err)
		}
	}
}

func TestReopenRestoresState(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 3)
	mustCommit(t, s, "b", mod(1))
	mustCommit(t, s, "b", mod(2))
	if _, err := s.Commit("a", mod(3), Version{ABIVersion: "1", SignedBy: "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	specs := []policy.Spec{
		{Name: "pii", Module: "b", Tools: []string{"fs_*"}, Config: json.RawMessage(`{"redact":true}`), OnError: "allow"},
		{Name: "audit", Module: "a", TimeoutMS: 50},
	}
	if err := s.SetAttachments(specs); err != nil {
		t.Fatal(err)
	}
	if err := s.SetExtra("approvals", json.RawMessage(`{"pending": [1, 2]}`)); err != nil {
		t.Fatal(err)
	}

	r := openStore(t, dir, 3)
	if got, want := r.List(), s.List(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen List = %+v\nwant %+v", got, want)
	}
	if got := r.Attachments(); !reflect.DeepEqual(got, specs) {
		t.Fatalf("after reopen Attachments = %+v\nwant %+v", got, specs)
	}
	if got := string(r.Extra("approvals")); got != `{"pending":[1,2]}` {
		t.Fatalf("after reopen Extra = %s", got)
	}
	if wasm, _, err := r.ActiveWasm("b"); err != nil || string(wasm) != string(mod(2)) {
		t.Fatalf("after reopen ActiveWasm = %q, %v", wasm, err)
	}
	if _, err := r.Rollback("b"); err != nil {
		t.Fatalf("rollback after reopen: %v", err)
	}
}

// TestStateFileLayout pins the on-disk form other tools may read:
// state.json lists each module's history oldest first.
func TestStateFileLayout(t *testing.T) {
	s := openStore(t, t.TempDir(), 0)
	for i := 1; i <= 3; i++ {
		mustCommit(t, s, "m", mod(i))
	}
	raw, err := os.ReadFile(filepath.Join(s.Dir(), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk struct {
		Format  int `json:"format"`
		Modules map[string]struct {
			Active  Version   `json:"active"`
			History []Version `json:"history"`
		} `json:"modules"`
	}
	if err := json.Unmarshal(raw, &onDisk); err != nil {
		t.Fatal(err)
	}
	m := onDisk.Modules["m"]
	if onDisk.Format != 1 || m.Active.Digest != Digest(mod(3)) {
		t.Fatalf("state.json = %s", raw)
	}
	if h := m.History; len(h) != 2 || h[0].Digest != Digest(mod(1)) || h[1].Digest != Digest(mod(2)) {
		t.Fatalf("state.json history not oldest first: %+v", h)
	}
}

func TestOpenRejectsCorruptState(t *testing.T) {
	good := Digest(mod(1))
	cases := []struct {
		name, content, reason string
	}{
		{"garbage", "{not json", "invalid character"},
		{"truncated", `{"format":1,"modules":{`, "unexpected EOF"},
		{"trailing data", `{"format":1} {}`, "data after"},
		{"no format", `{"modules":{}}`, "format"},
		{"newer format", `{"format":2}`, "format 2"},
		{"bad name", `{"format":1,"modules":{"../x":{"active":{"digest":"` + good + `","size":1}}}}`, "module name"},
		{"null module", `{"format":1,"modules":{"m":null}}`, "null"},
		{"bad digest", `{"format":1,"modules":{"m":{"active":{"digest":"sha256:zz","size":1}}}}`, "digest"},
		{"upper-case digest", `{"format":1,"modules":{"m":{"active":{"digest":"` + strings.ToUpper(good) + `","size":1}}}}`, "digest"},
		{"bad size", `{"format":1,"modules":{"m":{"active":{"digest":"` + good + `","size":0}}}}`, "size"},
		{"duplicate version", `{"format":1,"modules":{"m":{"active":{"digest":"` + good + `","size":1},"history":[{"digest":"` + good + `","size":1}]}}}`, "twice"},
		{"wrong type", `{"format":1,"attachments":{}}`, "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(dir, Options{})
			if err == nil {
				t.Fatal("Open succeeded on a corrupt state.json")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %v does not wrap ErrCorrupt", err)
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, tc.reason) {
				t.Errorf("error %q should name %s and say %q", msg, path, tc.reason)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.content {
				t.Errorf("Open rewrote the corrupt state.json: %q", b)
			}
		})
	}
}

func TestTamperedBlob(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 0)
	v := mustCommit(t, s, "m", mod(1))
	path := filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(v.Digest, "sha256:"))
	if err := os.WriteFile(path, []byte("\x00asm evil"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ActiveWasm("m"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ActiveWasm of a tampered blob: %v, want ErrCorrupt", err)
	}
	if _, err := s.Blob(v.Digest); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Blob of a tampered blob: %v, want ErrCorrupt", err)
	}
	// Uploading the module again repairs the blob.
	if _, err := s.Commit("m", mod(1), Version{}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Blob(strings.ToUpper(strings.TrimPrefix(v.Digest, "sha256:"))); err != nil || string(b) != string(mod(1)) {
		t.Fatalf("Blob after repair = %q, %v", b, err)
	}

	// Rolling back to a damaged version is refused and changes nothing.
	mustCommit(t, s, "m", mod(2))
	if err := os.WriteFile(path, []byte("\x00asm evil"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rollback("m"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Rollback to a tampered blob: %v, want ErrCorrupt", err)
	}
	if m, _ := s.Get("m"); m.Active.Digest != Digest(mod(2)) || len(m.History) != 1 {
		t.Fatalf("refused Rollback changed the module: %+v", m)
	}
	if err := s.Remove("m"); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "m", mod(1))

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ActiveWasm("m"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ActiveWasm of a missing blob: %v, want ErrNotFound", err)
	}
	if _, err := s.Blob("sha256:nothex"); err == nil {
		t.Fatal("Blob accepted a malformed digest")
	}
}

func TestFailedWriteKeepsState(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 0)
	mustCommit(t, s, "m", mod(1))
	if err := s.SetExtra("k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	before := s.List()
	statePath := filepath.Join(dir, "state.json")
	saved, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	// A non-empty directory in place of state.json makes the rename fail,
	// even for root.
	if err := os.Remove(statePath); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(statePath, "block"), 0o700); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Commit("m", mod(2), Version{}); err == nil {
		t.Fatal("Commit succeeded although state.json could not be written")
	}
	if _, err := s.Rollback("m"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("failed Commit changed the history: Rollback = %v", err)
	}
	if err := s.Remove("m"); err == nil {
		t.Fatal("Remove succeeded although state.json could not be written")
	}
	if err := s.SetExtra("k", json.RawMessage(`2`)); err == nil {
		t.Fatal("SetExtra succeeded although state.json could not be written")
	}
	if err := s.SetAttachments([]policy.Spec{{Name: "x", Module: "m"}}); err == nil {
		t.Fatal("SetAttachments succeeded although state.json could not be written")
	}
	if got := s.List(); !reflect.DeepEqual(got, before) {
		t.Fatalf("in-memory state changed by failed writes: %+v, want %+v", got, before)
	}
	if got := string(s.Extra("k")); got != "1" || s.Attachments() != nil {
		t.Fatalf("in-memory extra/attachments changed by failed writes: %q %v", got, s.Attachments())
	}
	if got, want := blobFiles(t, dir), digests(mod(1)); !slices.Equal(got, want) {
		t.Fatalf("blob of the failed commit left behind: %v", got)
	}
	if temps, _ := filepath.Glob(filepath.Join(dir, ".state.json.tmp-*")); len(temps) != 0 {
		t.Fatalf("temporary files left behind: %v", temps)
	}

	// Restore the file as a crash would have left it: the store reopens
	// at the last good state.
	if err := os.RemoveAll(statePath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statePath, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := openStore(t, dir, 0).List(); !reflect.DeepEqual(got, before) {
		t.Fatalf("reopened state = %+v, want %+v", got, before)
	}
}

func TestAttachmentsAndExtra(t *testing.T) {
	s := openStore(t, t.TempDir(), 0)
	if s.Attachments() != nil || s.Extra("approvals") != nil {
		t.Fatal("new store has attachments or extras")
	}
	specs := []policy.Spec{{Name: "a", Module: "m", Tools: []string{"t1"}}}
	if err := s.SetAttachments(specs); err != nil {
		t.Fatal(err)
	}
	specs[0].Tools[0] = "changed by caller"
	got := s.Attachments()
	if got[0].Tools[0] != "t1" {
		t.Fatal("SetAttachments kept the caller's slice")
	}
	got[0].Tools[0] = "changed again"
	if s.Attachments()[0].Tools[0] != "t1" {
		t.Fatal("Attachments returned the store's own slice")
	}
	if err := s.SetAttachments([]policy.Spec{{Name: "x", Config: json.RawMessage(`{bad`)}}); err == nil {
		t.Fatal("SetAttachments accepted a spec that cannot be encoded")
	}
	if err := s.SetAttachments(nil); err != nil || s.Attachments() != nil {
		t.Fatalf("clearing attachments: %v, %v", err, s.Attachments())
	}

	if err := s.SetExtra("approvals", json.RawMessage(`{"a": 1}`)); err != nil {
		t.Fatal(err)
	}
	e := s.Extra("approvals")
	e[0] = 'X'
	if got := string(s.Extra("approvals")); got != `{"a":1}` {
		t.Fatalf("Extra = %s (caller's change leaked in?)", got)
	}
	if err := s.SetExtra("approvals", json.RawMessage(`{`)); err == nil {
		t.Fatal("SetExtra accepted invalid JSON")
	}
	if err := s.SetExtra("", json.RawMessage(`1`)); err == nil {
		t.Fatal("SetExtra accepted an empty key")
	}
	if err := s.SetExtra("approvals", nil); err != nil || s.Extra("approvals") != nil {
		t.Fatalf("deleting extra: %v, %s", err, s.Extra("approvals"))
	}
}

func TestOpenRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 0)
	mustCommit(t, s, "m", mod(1))
	blobDir := filepath.Join(dir, "blobs", "sha256")
	orphan := filepath.Join(blobDir, strings.TrimPrefix(Digest(mod(9)), "sha256:"))
	for path, data := range map[string]string{
		orphan:                                  string(mod(9)),
		filepath.Join(blobDir, ".tmp-123"):      "partial",
		filepath.Join(dir, ".state.json.tmp-1"): "{",
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	openStore(t, dir, 0)
	if got, want := blobFiles(t, dir), digests(mod(1)); !slices.Equal(got, want) {
		t.Fatalf("blobs after Open = %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, ".state.json.tmp-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover state temp file not removed: %v", err)
	}
}

func TestConcurrentCommits(t *testing.T) {
	const (
		workers = 8
		rounds  = 12
		keep    = 3
	)
	dir := t.TempDir()
	s := openStore(t, dir, keep)
	names := []string{"alpha", "beta", "gamma"}
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*4)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				name := names[(w+r)%len(names)]
				// Some bytes are shared between workers and modules.
				wasm := mod((w*rounds + r) % 40)
				if _, err := s.Commit(name, wasm, Version{UploadedBy: fmt.Sprint("w", w)}); err != nil {
					errs <- fmt.Errorf("Commit: %w", err)
				}
				if r%4 == 3 {
					if _, err := s.Rollback(name); err != nil && !errors.Is(err, ErrNoPrevious) {
						errs <- fmt.Errorf("Rollback: %w", err)
					}
				}
				if b, v, err := s.ActiveWasm(name); err != nil || Digest(b) != v.Digest {
					errs <- fmt.Errorf("ActiveWasm(%s) = %s, %v", name, v.Digest, err)
				}
				for _, m := range s.List() {
					if len(m.History) > keep {
						errs <- fmt.Errorf("%s has %d old versions", m.Name, len(m.History))
					}
				}
				if err := s.SetExtra(fmt.Sprint("w", w), json.RawMessage(fmt.Sprint(r))); err != nil {
					errs <- fmt.Errorf("SetExtra: %w", err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Every referenced blob is intact, and nothing else is on disk.
	var referenced []string
	for _, m := range s.List() {
		seen := map[string]bool{}
		for _, v := range append([]Version{m.Active}, m.History...) {
			if seen[v.Digest] {
				t.Errorf("%s lists %s twice", m.Name, v.Digest)
			}
			seen[v.Digest] = true
			if _, err := s.Blob(v.Digest); err != nil {
				t.Errorf("%s: %v", m.Name, err)
			}
			if !slices.Contains(referenced, v.Digest) {
				referenced = append(referenced, v.Digest)
			}
		}
	}
	slices.Sort(referenced)
	if got := blobFiles(t, dir); !slices.Equal(got, referenced) {
		t.Errorf("blobs on disk %v\nwant referenced %v", got, referenced)
	}
	for w := range workers {
		if got := string(s.Extra(fmt.Sprint("w", w))); got != fmt.Sprint(rounds-1) {
			t.Errorf("extra w%d = %q, want %d", w, got, rounds-1)
		}
	}
	if got, want := openStore(t, dir, keep).List(), s.List(); !reflect.DeepEqual(got, want) {
		t.Errorf("reopened state differs:\n%+v\nwant %+v", got, want)
	}
}

func BenchmarkActiveWasm(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	wasm := make([]byte, 1<<20)
	for i := range wasm {
		wasm[i] = byte(i * 7)
	}
	if _, err := s.Commit("m", wasm, Version{}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, _, err := s.ActiveWasm("m"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		want string // part of the error; empty for a valid name
	}{
		{"a", ""},
		{"A.b_c-1", ""},
		{"x.", ""},
		{"0", ""},
		{strings.Repeat("x", 64), ""},
		{"", "empty"},
		{strings.Repeat("x", 65), "65 bytes long; at most 64"},
		{".hidden", "starts with '.'"},
		{"..", "starts with '.'"},
		{"a\x00b", "NUL at byte 1"},
		{"a\nb", "control character 0x0a at byte 1"},
		{"tab\t", "control character 0x09 at byte 3"},
		{"del\x7f", "control character 0x7f at byte 3"},
		{"a b", "space at byte 1"},
		{"a/b", `'/' at byte 1`},
		{"../x", "starts with '.'"},
		{"é", `'é' at byte 0`},
		{"a:b", `':' at byte 1`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			err := ValidName(tt.name)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidName: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ValidName: %v, want ErrBadName saying %q", err, tt.want)
			}
		})
	}
}
