package fleet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/spec"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// This file is the fleet's policy record: the uploaded modules (each
// version named by its digest; the bytes are in the fleet's object store)
// and the run-time attachments in chain order, shadow or enforcing. It is
// one record, key "policy" of the control bucket, so a change is one
// compare-and-set and a generation is one revision. Read from NATS, it is
// untrusted: decodeFleetPolicy checks everything before a replica uses it.

// fleetPolicyKey is the record's key in the control bucket.
const fleetPolicyKey = "policy"

// fleetPolicyFormat is the record layout this build writes and reads.
const fleetPolicyFormat = 1

// Limits of a policy record read from NATS.
const (
	maxFleetPolicyBytes = 4 << 20
	maxFleetModules     = 256
	maxFleetHistory     = 64
	maxFleetAttachments = 256
)

// fleetPolicy is the fleet's policy record.
type fleetPolicy struct {
	Format      int                    `json:"format"`
	Modules     map[string]fleetModule `json:"modules"`
	Attachments []spec.Spec            `json:"attachments"`
	// By says which admin change, through which replica, wrote this
	// revision: the replicas that activate it audit it (control_audit.go).
	By *fleetChange `json:"by,omitempty"`
}

// fleetModule is one module's versions: the active one and the older ones
// kept for rollback, newest first, and the detached signatures uploads
// came with, by digest, so that a replica requiring signed modules checks
// them against its own trusted keys.
type fleetModule struct {
	Active     store.Version     `json:"active"`
	History    []store.Version   `json:"history,omitempty"`
	Signatures map[string]string `json:"signatures,omitempty"`
}

func newFleetPolicy() *fleetPolicy {
	return &fleetPolicy{Format: fleetPolicyFormat, Modules: map[string]fleetModule{}}
}

// decodeFleetPolicy parses and checks a policy record.
func decodeFleetPolicy(b []byte) (*fleetPolicy, error) {
	if len(b) > maxFleetPolicyBytes {
		return nil, fmt.Errorf("policy record of %d bytes; at most %d", len(b), maxFleetPolicyBytes)
	}
	rec := &fleetPolicy{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(rec); err != nil {
		return nil, fmt.Errorf("policy record: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("policy record: data after the JSON object")
	}
	if err := rec.check(); err != nil {
		return nil, fmt.Errorf("policy record: %w", err)
	}
	if rec.Modules == nil {
		rec.Modules = map[string]fleetModule{}
	}
	return rec, nil
}

// check validates a decoded record: format, module names, canonical
// digests, sizes, attachments.
func (r *fleetPolicy) check() error {
	if r.Format != fleetPolicyFormat {
		return fmt.Errorf("format %d, this build reads format %d", r.Format, fleetPolicyFormat)
	}
	if err := r.By.check(); err != nil {
		return err
	}
	if len(r.Modules) > maxFleetModules || len(r.Attachments) > maxFleetAttachments {
		return fmt.Errorf("%d modules and %d attachments; at most %d and %d", len(r.Modules), len(r.Attachments), maxFleetModules, maxFleetAttachments)
	}
	for name, m := range r.Modules {
		if err := store.ValidName(name); err != nil {
			return err
		}
		if len(m.History) > maxFleetHistory {
			return fmt.Errorf("module %q: %d earlier versions; at most %d", name, len(m.History), maxFleetHistory)
		}
		seen := map[string]bool{}
		for _, v := range append([]store.Version{m.Active}, m.History...) {
			if d, err := store.ParseDigest(v.Digest); err != nil || d != v.Digest {
				return fmt.Errorf("module %q: digest %q is not sha256:<64 lowercase hex>", name, v.Digest)
			}
			if v.Size <= 0 {
				return fmt.Errorf("module %q version %s: size %d", name, v.Digest, v.Size)
			}
			if seen[v.Digest] {
				return fmt.Errorf("module %q: version %s listed twice", name, v.Digest)
			}
			seen[v.Digest] = true
		}
		for d, sig := range m.Signatures {
			if !seen[d] || len(sig) > 1024 {
				return fmt.Errorf("module %q: a signature of %d bytes for %q, not one of its versions", name, len(sig), d)
			}
		}
	}
	names := map[string]bool{}
	for i := range r.Attachments {
		sp := &r.Attachments[i]
		if err := sp.Validate(); err != nil {
			return fmt.Errorf("attachments[%d]: %w", i, err)
		}
		if names[sp.Name] {
			return fmt.Errorf("attachments[%d]: policy %q attached twice", i, sp.Name)
		}
		names[sp.Name] = true
	}
	return nil
}

func (r *fleetPolicy) encode() []byte {
	b, _ := json.Marshal(r) // plain data: cannot fail
	return b
}

// clone is a deep copy through the record's JSON form, checked like a
// record read from NATS (a replica's local state may not pass).
func (r *fleetPolicy) clone() (*fleetPolicy, error) {
	return decodeFleetPolicy(r.encode())
}

// digest identifies what the record activates: each module's active
// version and the attachments. Equal digests on two replicas mean the same
// policies decide their calls.
func (r *fleetPolicy) digest() string {
	active := map[string]string{}
	for name, m := range r.Modules {
		active[name] = m.Active.Digest
	}
	b, _ := json.Marshal(struct {
		Modules     map[string]string `json:"modules"`
		Attachments []spec.Spec       `json:"attachments"`
	}{active, r.Attachments})
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// activeDigests maps each module to its active version's digest.
func (r *fleetPolicy) activeDigests() map[string]string {
	out := make(map[string]string, len(r.Modules))
	for name, m := range r.Modules {
		out[name] = m.Active.Digest
	}
	return out
}

// storeModules is the record's modules in the store's form.
func (r *fleetPolicy) storeModules() []store.Module {
	out := make([]store.Module, 0, len(r.Modules))
	for _, name := range slices.Sorted(maps.Keys(r.Modules)) {
		m := r.Modules[name]
		out = append(out, store.Module{Name: name, Active: m.Active, History: slices.Clone(m.History)})
	}
	return out
}

// fleetPolicyOf is the record of a local store's state (to seed a fleet
// from the first replica that has one). Modules pulled for the config's
// oci:// references are the replica's cache, shared otherwise (oci.go).
func fleetPolicyOf(st *store.Store) *fleetPolicy {
	r := newFleetPolicy()
	for _, m := range st.List() {
		if m.Active.Pulled() {
			continue
		}
		r.Modules[m.Name] = fleetModule{Active: m.Active, History: m.History}
	}
	r.Attachments = st.Attachments()
	return r
}

// upload makes v (Digest and Size filled in) the active version of name;
// the previous one moves into the history, which keeps at most keep
// versions. Uploading the active version again changes nothing.
func (r *fleetPolicy) upload(name string, v store.Version, sig string, keep int) {
	old, ok := r.Modules[name]
	if ok && old.Active.Digest == v.Digest {
		return
	}
	m := fleetModule{Active: v}
	if ok {
		m.History = append([]store.Version{old.Active}, slices.DeleteFunc(old.History, func(h store.Version) bool { return h.Digest == v.Digest })...)
		if keep <= 0 {
			keep = 5
		}
		if len(m.History) > keep {
			m.History = m.History[:keep]
		}
	}
	m.Signatures = map[string]string{}
	for _, h := range m.History {
		if s := old.Signatures[h.Digest]; s != "" {
			m.Signatures[h.Digest] = s
		}
	}
	if sig != "" {
		m.Signatures[v.Digest] = sig
	}
	r.Modules[name] = m
}

// rollback makes the newest earlier version of name active; the version
// rolled back from is dropped.
func (r *fleetPolicy) rollback(name string, now time.Time) error {
	m, ok := r.Modules[name]
	if !ok {
		return admin.Errorf(http.StatusNotFound, "not_found", "no module named %q", name)
	}
	if len(m.History) == 0 {
		return admin.Errorf(http.StatusConflict, "no_previous", "module %q has no earlier version to roll back to", name)
	}
	prev := m.History[0]
	prev.ActivatedAt = now.UTC()
	delete(m.Signatures, m.Active.Digest)
	r.Modules[name] = fleetModule{Active: prev, History: m.History[1:], Signatures: m.Signatures}
	return nil
}

// remove forgets name and its versions.
func (r *fleetPolicy) remove(name string) error {
	if _, ok := r.Modules[name]; !ok {
		return admin.Errorf(http.StatusNotFound, "not_found", "no module named %q", name)
	}
	delete(r.Modules, name)
	return nil
}

// versions lists every version of every module, sorted by digest.
func (r *fleetPolicy) versions() []store.Version {
	var out []store.Version
	for _, m := range r.Modules {
		out = append(out, m.Active)
		out = append(out, m.History...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out
}
