package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
)

// Pull policies of an oci:// module.
const (
	// PullIfNotPresent pulls only when the store holds no version of the
	// reference (the default).
	PullIfNotPresent = "if_not_present"
	// PullAlways resolves the reference at every load; a tag that moved
	// brings the new version.
	PullAlways = "always"
)

// UploadedByOCI is the UploadedBy of a version Resolve pulled: this
// store's cache of a config's oci:// module, not an uploaded module
// (Replace keeps it; a fleet does not share it as one).
const UploadedByOCI = "oci"

// Pulled reports whether v is a version Resolve pulled.
func (v Version) Pulled() bool { return v.UploadedBy == UploadedByOCI }

// OCIOptions configures Resolve.
type OCIOptions struct {
	// Options is how the registry is reached and which signatures are
	// required.
	ociwasm.Options
	// PullPolicy is PullIfNotPresent ("" too) or PullAlways.
	PullPolicy string
	// Check validates the module (compiles it, reads its ABI) before it
	// is stored; nil stores it unchecked. It returns the ABI version.
	Check func(wasm []byte) (abiVersion string, err error)
}

// OCIName is the store name of the module an oci:// reference names: oci-,
// the repository's last element, and a short hash of registry and
// repository, so that two repositories never share a name.
func OCIName(ref ociwasm.Ref) string {
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, path.Base(ref.Repository))
	if len(base) > 40 {
		base = base[:40]
	}
	sum := sha256.Sum256([]byte(ref.Registry + "/" + ref.Repository))
	return "oci-" + base + "-" + hex.EncodeToString(sum[:4])
}

// Resolve returns the store name and version of the module reference
// names, pulling it when the pull policy asks: with PullIfNotPresent a
// stored version pulled from the same reference (the same tag, or the
// same pinned digest) is used without asking the registry. A pulled
// module is checked (digest, size, signature, o.Check) before anything
// is stored; an error names the reference and leaves the store as it was.
func (s *Store) Resolve(ctx context.Context, reference string, o OCIOptions) (string, Version, error) {
	ref, err := ociwasm.ParseRef(reference)
	if err != nil {
		return "", Version{}, err
	}
	name := OCIName(ref)
	m, stored := s.Get(name)
	stored = stored && o.Reuses(m.Active, reference)
	switch o.PullPolicy {
	case "", PullIfNotPresent:
		if stored {
			return name, m.Active, nil
		}
	case PullAlways:
		if stored {
			// Ask which manifest the reference names now; the module
			// of an unchanged digest is not downloaded again.
			now, err := ociwasm.Resolve(ctx, ref, o.Options)
			if err != nil {
				return "", Version{}, err
			}
			if sameSource(m.Active.Source, now) {
				return name, m.Active, nil
			}
		}
	default:
		return "", Version{}, fmt.Errorf("module %s: pull policy %q: want %s or %s", ref, o.PullPolicy, PullIfNotPresent, PullAlways)
	}
	a, err := ociwasm.Pull(ctx, ref, o.Options)
	if err != nil {
		return "", Version{}, err
	}
	v := Version{Source: a.Ref.String(), SignedBy: a.SignedBy, UploadedBy: UploadedByOCI}
	if o.Check != nil {
		if v.ABIVersion, err = o.Check(a.Wasm); err != nil {
			return "", Version{}, fmt.Errorf("module %s (%s): %w", a.Ref, a.WasmDigest, err)
		}
	}
	v, err = s.Commit(name, a.Wasm, v)
	if err != nil {
		return "", Version{}, fmt.Errorf("module %s: %w", a.Ref, err)
	}
	return name, v, nil
}

// Cached returns the stored version of reference that the pull policy
// if_not_present would use without asking the registry.
func (s *Store) Cached(reference string, o OCIOptions) (Version, bool) {
	ref, err := ociwasm.ParseRef(reference)
	if err != nil {
		return Version{}, false
	}
	m, ok := s.Get(OCIName(ref))
	return m.Active, ok && o.Reuses(m.Active, reference)
}

// Reuses reports whether v, pulled earlier (here, or by another replica
// of a fleet), may stand for reference: pulled from a source that
// satisfies it, and verified with one of the keys o requires now.
func (o OCIOptions) Reuses(v Version, reference string) bool {
	return v.Satisfies(reference) && signedByOneOf(v, o.Keys)
}

// Satisfies reports whether v was pulled from a source that satisfies the
// oci:// reference (see Resolve): a fleet replica can use a version
// another one pulled instead of pulling it again.
func (v Version) Satisfies(reference string) bool {
	ref, err := ociwasm.ParseRef(reference)
	return err == nil && sameSource(v.Source, ref)
}

// sameSource reports whether a version pulled from source satisfies ref:
// same registry and repository, the same tag when ref has one, the same
// digest when ref pins one.
func sameSource(source string, ref ociwasm.Ref) bool {
	got, err := ociwasm.ParseRef(source)
	if err != nil || got.Registry != ref.Registry || got.Repository != ref.Repository {
		return false
	}
	if ref.Tag != "" && got.Tag != ref.Tag {
		return false
	}
	return ref.Digest == "" || got.Digest == ref.Digest
}

// signedByOneOf reports whether v may be used where keys are required:
// no keys, or v was verified with one of them when it was pulled.
func signedByOneOf(v Version, keys *ociwasm.Keys) bool {
	return keys == nil || slices.Contains(keys.IDs(), v.SignedBy)
}
