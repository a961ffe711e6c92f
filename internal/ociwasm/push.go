package ociwasm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
)

// blob is a descriptor and its content.
type blob struct {
	desc ocispec.Descriptor
	data []byte
}

// Push uploads wasm to ref's repository in the CNCF Wasm artifact layout
// (config application/vnd.wasm.config.v0+json, one layer
// application/wasm) and tags it with ref's tag. It returns ref pinned to
// the manifest's digest.
func Push(ctx context.Context, wasm []byte, ref Ref, o Options) (Ref, error) {
	pinned, err := push(ctx, wasm, ref, o)
	if err != nil {
		return Ref{}, fmt.Errorf("pushing to %s: %w", ref, explain(ctx, err))
	}
	return pinned, nil
}

func push(ctx context.Context, wasm []byte, ref Ref, o Options) (Ref, error) {
	if ref.Tag == "" {
		return Ref{}, fmt.Errorf("a push needs a tag")
	}
	ctx, cancel := withTimeout(ctx, o.Timeout)
	defer cancel()
	repo, err := o.repository(ref)
	if err != nil {
		return Ref{}, err
	}
	layer := content.NewDescriptorFromBytes(MediaTypeWasmLayer, wasm)
	config, _ := json.Marshal(map[string]any{
		"architecture": "wasm", "os": "wasip1",
		"layerDigests": []string{layer.Digest.String()},
	})
	desc, err := pushManifestDesc(ctx, repo, MediaTypeWasmConfig, config, []blob{{layer, wasm}}, ref.Tag)
	if err != nil {
		return Ref{}, err
	}
	if ref.Digest != "" && ref.Digest != desc.Digest.String() {
		return Ref{}, fmt.Errorf("%w: pushed %s, the reference pins %s", ErrDigestMismatch, desc.Digest, ref.Digest)
	}
	return ref.Pinned(desc.Digest.String()), nil
}

// pushManifest pushes the blobs, a config of configType and an OCI image
// manifest of them, tagged tag.
func pushManifest(ctx context.Context, repo *remote.Repository, configType string, config []byte, layers []blob, tag string) error {
	_, err := pushManifestDesc(ctx, repo, configType, config, layers, tag)
	return err
}

func pushManifestDesc(ctx context.Context, repo *remote.Repository, configType string, config []byte, layers []blob, tag string) (ocispec.Descriptor, error) {
	cfg := content.NewDescriptorFromBytes(configType, config)
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfg,
	}
	if err := pushBlob(ctx, repo, blob{cfg, config}); err != nil {
		return ocispec.Descriptor{}, err
	}
	for _, b := range layers {
		if err := pushBlob(ctx, repo, b); err != nil {
			return ocispec.Descriptor{}, err
		}
		m.Layers = append(m.Layers, b.desc)
	}
	raw, _ := json.Marshal(m)
	desc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, raw)
	if err := repo.PushReference(ctx, desc, bytes.NewReader(raw), tag); err != nil {
		return desc, fmt.Errorf("pushing the manifest: %w", err)
	}
	return desc, nil
}

func pushBlob(ctx context.Context, repo *remote.Repository, b blob) error {
	ok, err := repo.Blobs().Exists(ctx, b.desc)
	if err != nil {
		return fmt.Errorf("pushing blob %s: %w", b.desc.Digest, err)
	}
	if ok {
		return nil
	}
	if err := repo.Blobs().Push(ctx, b.desc, bytes.NewReader(b.data)); err != nil {
		return fmt.Errorf("pushing blob %s: %w", b.desc.Digest, err)
	}
	return nil
}
