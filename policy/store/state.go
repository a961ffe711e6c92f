package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"

	"github.com/edge-mcp/edge-mcp/policy"
)

// stateFormat is the version of the state.json layout this build writes
// and understands.
const stateFormat = 1

// state is the content of state.json.
type state struct {
	Format int `json:"format"`
	// Modules maps a module name to its versions.
	Modules map[string]*moduleState `json:"modules"`
	// Attachments are the run-time policy attachments.
	Attachments []policy.Spec `json:"attachments"`
	// Extra holds other subsystems' data by key.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// moduleState is one module's entry in state.json.
type moduleState struct {
	Active Version `json:"active"`
	// History holds the versions available for rollback, oldest first
	// (newest last).
	History []Version `json:"history,omitempty"`
}

func newState() *state {
	return &state{
		Format:  stateFormat,
		Modules: make(map[string]*moduleState),
		Extra:   make(map[string]json.RawMessage),
	}
}

// clone returns a copy whose maps can be changed without touching st.
// Module entries, attachments and extra values are shared: they are
// replaced, never modified in place.
func (st *state) clone() *state {
	return &state{
		Format:      stateFormat,
		Modules:     maps.Clone(st.Modules),
		Attachments: st.Attachments,
		Extra:       maps.Clone(st.Extra),
	}
}

// snapshot returns the public view of a module, history newest first.
func (ms *moduleState) snapshot(name string) Module {
	var h []Version
	if len(ms.History) > 0 {
		h = slices.Clone(ms.History)
		slices.Reverse(h)
	}
	return Module{Name: name, Active: ms.Active, History: h}
}

// encodeState renders st as state.json.
func encodeState(st *state) ([]byte, error) {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeState parses and checks state.json. Errors wrap ErrCorrupt.
func decodeState(data []byte) (*state, error) {
	st := &state{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrCorrupt)
	}
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if st.Modules == nil {
		st.Modules = make(map[string]*moduleState)
	}
	if st.Extra == nil {
		st.Extra = make(map[string]json.RawMessage)
	}
	for key, v := range st.Extra {
		// state.json is indented; hand values back as they were stored.
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, fmt.Errorf("%w: extra %q: %w", ErrCorrupt, key, err)
		}
		st.Extra[key] = buf.Bytes()
	}
	return st, nil
}

// check validates a decoded state.
func (st *state) check() error {
	switch {
	case st.Format == 0:
		return errors.New(`missing "format"`)
	case st.Format != stateFormat:
		return fmt.Errorf("format %d, this build reads format %d", st.Format, stateFormat)
	}
	for name, ms := range st.Modules {
		if err := ValidName(name); err != nil {
			return err
		}
		if ms == nil {
			return fmt.Errorf("module %q: null entry", name)
		}
		seen := make(map[string]bool, len(ms.History)+1)
		for i, v := range append(slices.Clone(ms.History), ms.Active) {
			what := "active version"
			if i < len(ms.History) {
				what = fmt.Sprintf("history[%d]", i)
			}
			d, err := ParseDigest(v.Digest)
			if err != nil || d != v.Digest {
				return fmt.Errorf("module %q %s: digest %s is not sha256:<64 lowercase hex>", name, what, quoteShort(v.Digest))
			}
			if v.Size <= 0 {
				return fmt.Errorf("module %q %s: size %d", name, what, v.Size)
			}
			if seen[d] {
				return fmt.Errorf("module %q %s: digest %s listed twice", name, what, d)
			}
			seen[d] = true
		}
	}
	for key := range st.Extra {
		if key == "" {
			return errors.New("extra: empty key")
		}
	}
	return nil
}

// loadState reads path; a missing file is an empty state.
func loadState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("policy store: reading %s: %w", path, err)
	}
	st, err := decodeState(data)
	if err != nil {
		return nil, fmt.Errorf("policy store: %s: %w", path, err)
	}
	return st, nil
}

// writeState replaces state.json atomically: temporary file, fsync,
// rename, fsync of the directory. A failure before the rename leaves the
// old file in place and is returned. After the rename the new state is
// what a reader sees, so a failed directory fsync is only logged.
func (s *Store) writeState(st *state) error {
	data, err := encodeState(st)
	if err != nil {
		return fmt.Errorf("encoding state: %w", err)
	}
	if err := writeFileAtomic(s.dir, stateTempPattern, s.statePath, data); err != nil {
		return err
	}
	if err := syncDir(s.dir); err != nil {
		s.log.Warn("policy store: fsync of directory failed; the last change may not survive a crash",
			"dir", s.dir, "err", err)
	}
	return nil
}

// writeFileAtomic writes data to a temporary file in dir, fsyncs it and
// renames it to path. On error the temporary file is removed.
func writeFileAtomic(dir, pattern, path string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return fmt.Errorf("creating temporary file for %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp, path, err)
	}
	return nil
}

// syncDir fsyncs a directory so that renames in it are durable. Windows
// cannot open a directory for syncing and needs no such step.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
