// Package ociwasm pulls Wasm policy modules from OCI registries and pushes
// them there, with oras-go: the CNCF Wasm artifact layout, the older
// Wasm layer media type and a single-layer image holding plugin.wasm;
// tags resolved to digests; cosign key-pair signatures verified before
// a module is handed on.
package ociwasm

import (
	"errors"
	"fmt"
	"strings"

	"oras.land/oras-go/v2/registry"
)

// Scheme prefixes a module reference in a config or on the command line.
const Scheme = "oci://"

// Ref is a parsed oci:// reference: a registry, a repository, and a tag,
// a digest or both (a tag pinned to a digest).
type Ref struct {
	Registry   string // host[:port]
	Repository string
	Tag        string // "" when only a digest is given
	Digest     string // "sha256:<hex>"; "" when only a tag is given
}

// IsRef reports whether s is written as an oci:// reference (it may still
// fail to parse).
func IsRef(s string) bool { return strings.HasPrefix(s, Scheme) }

// ParseRef parses oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]. A reference
// without tag or digest means the tag "latest".
func ParseRef(s string) (Ref, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Ref{}, fmt.Errorf("reference %q: want oci://HOST/REPOSITORY[:TAG][@sha256:DIGEST]", s)
	}
	var r Ref
	if name, dig, ok := strings.Cut(rest, "@"); ok {
		rest, r.Digest = name, dig
	}
	host, repo, ok := strings.Cut(rest, "/")
	if !ok || host == "" || repo == "" {
		return Ref{}, fmt.Errorf("reference %q: no repository: want oci://HOST/REPOSITORY[:TAG][@sha256:DIGEST]", s)
	}
	if i := strings.LastIndexByte(repo, ':'); i >= 0 {
		repo, r.Tag = repo[:i], repo[i+1:]
		if r.Tag == "" {
			return Ref{}, fmt.Errorf("reference %q: empty tag", s)
		}
	}
	r.Registry, r.Repository = host, repo
	if r.Tag == "" && r.Digest == "" {
		r.Tag = "latest"
	}
	if err := r.validate(); err != nil {
		return Ref{}, fmt.Errorf("reference %q: %w", s, err)
	}
	return r, nil
}

func (r Ref) validate() error {
	o := registry.Reference{Registry: r.Registry, Repository: r.Repository}
	if err := o.ValidateRegistry(); err != nil {
		return err
	}
	if err := o.ValidateRepository(); err != nil {
		return err
	}
	if r.Tag != "" {
		o.Reference = r.Tag
		if err := o.ValidateReferenceAsTag(); err != nil {
			return err
		}
	}
	if r.Digest != "" {
		if !strings.HasPrefix(r.Digest, "sha256:") {
			return errors.New("digest must be sha256:<64 hex digits>")
		}
		o.Reference = r.Digest
		if err := o.ValidateReferenceAsDigest(); err != nil {
			return err
		}
	}
	return nil
}

// String writes the reference back as oci://HOST/REPO[:TAG][@DIGEST].
func (r Ref) String() string {
	s := Scheme + r.Registry + "/" + r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Pinned returns the reference pinned to digest, keeping its tag.
func (r Ref) Pinned(digest string) Ref {
	r.Digest = digest
	return r
}

// target is what the registry is asked for: the tag when there is one
// (a pinned digest is then checked against what it resolves to), else
// the digest.
func (r Ref) target() string {
	if r.Tag != "" {
		return r.Tag
	}
	return r.Digest
}
