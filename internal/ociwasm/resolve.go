package ociwasm

import (
	"context"
	"fmt"
)

// Resolve asks the registry which manifest ref names now, fetching no
// layer: ref pinned to the manifest's digest (which must equal a pinned
// one). It lets a caller that holds the module of a digest skip the
// download. Errors name the reference.
func Resolve(ctx context.Context, ref Ref, o Options) (Ref, error) {
	ctx, cancel := withTimeout(ctx, o.Timeout)
	defer cancel()
	repo, err := o.repository(ref)
	if err != nil {
		return Ref{}, fmt.Errorf("resolving %s: %w", ref, err)
	}
	desc, err := repo.Resolve(ctx, ref.target())
	if err != nil {
		return Ref{}, fmt.Errorf("resolving %s: %w", ref, explain(ctx, err))
	}
	if ref.Digest != "" && desc.Digest.String() != ref.Digest {
		if ref.Tag != "" {
			return Ref{}, fmt.Errorf("resolving %s: %w: %s now resolves to %s, pinned %s", ref, ErrTagMoved, ref.Tag, desc.Digest, ref.Digest)
		}
		return Ref{}, fmt.Errorf("resolving %s: %w: manifest is %s, want %s", ref, ErrDigestMismatch, desc.Digest, ref.Digest)
	}
	return ref.Pinned(desc.Digest.String()), nil
}
