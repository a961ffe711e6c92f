package ociwasm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// Media types of the layouts Pull accepts.
const (
	MediaTypeWasmConfig   = "application/vnd.wasm.config.v0+json"
	MediaTypeWasmLayer    = "application/wasm"
	MediaTypeWasmLayerOld = "application/vnd.wasm.content.layer.v1+wasm"
	mediaTypeDockerV2     = "application/vnd.docker.distribution.manifest.v2+json"
	// pluginFile is the file a single-layer image holds the module in.
	pluginFile = "plugin.wasm"
	// maxInflate bounds an image layer's tar stream, as a multiple of the
	// module size cap.
	maxInflate = 4
)

// imageLayerTypes are the layer media types of a container image that
// may hold plugin.wasm.
var imageLayerTypes = []string{
	ocispec.MediaTypeImageLayer, ocispec.MediaTypeImageLayerGzip,
	"application/vnd.docker.image.rootfs.diff.tar.gzip",
}

// Sentinel errors; test for them with errors.Is.
var (
	ErrTooLarge       = errors.New("module too large")
	ErrMediaType      = errors.New("not a Wasm module artifact")
	ErrTagMoved       = errors.New("tag moved")
	ErrDigestMismatch = errors.New("digest mismatch")
	ErrUnreachable    = errors.New("registry unreachable")
)

// DefaultTimeout bounds a pull or a push when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Options configures a pull or a push. The zero value pulls from TLS
// registries (plain HTTP for loopback ones) with the credentials of the
// default Docker config, verifying no signature.
type Options struct {
	// MaxBytes caps the module; a layer the manifest declares larger is
	// refused before it is fetched. 0: 32 MiB.
	MaxBytes int64
	// Insecure lists registries (host or host:port) reached over plain
	// HTTP; loopback registries always are.
	Insecure []string
	// DockerConfig is the path of a Docker config.json to take
	// credentials from; "" means $DOCKER_CONFIG/config.json or
	// ~/.docker/config.json when it exists.
	DockerConfig string
	// Timeout bounds the whole pull or push; 0: DefaultTimeout.
	Timeout time.Duration
	// Keys, when not nil, requires a cosign signature of the manifest by
	// one of them.
	Keys *Keys
}

func (o Options) maxBytes() int64 {
	if o.MaxBytes > 0 {
		return o.MaxBytes
	}
	return 32 << 20
}

// Artifact is a pulled module.
type Artifact struct {
	// Ref is the reference pulled, pinned to the manifest's digest.
	Ref Ref
	// Wasm is the module's bytes; WasmDigest their sha256.
	Wasm       []byte
	WasmDigest string
	// SignedBy is the key ID of the key whose signature was verified.
	SignedBy string
}

// Pull fetches the module ref names, resolving a tag to the manifest's
// digest (which must equal a pinned one), and verifies the signature when
// o.Keys is set. Nothing is returned unless every check passed. Errors
// name the reference.
func Pull(ctx context.Context, ref Ref, o Options) (*Artifact, error) {
	a, err := pull(ctx, ref, o)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, explain(ctx, err))
	}
	return a, nil
}

func pull(ctx context.Context, ref Ref, o Options) (*Artifact, error) {
	ctx, cancel := withTimeout(ctx, o.Timeout)
	defer cancel()
	repo, err := o.repository(ref)
	if err != nil {
		return nil, err
	}
	desc, raw, err := fetchManifest(ctx, repo, ref)
	if err != nil {
		return nil, err
	}
	layer, err := wasmLayer(desc.MediaType, raw)
	if err != nil {
		return nil, err
	}
	if layer.Size > o.maxBytes() {
		return nil, fmt.Errorf("%w: layer %s is %d bytes, more than max_module_bytes %d", ErrTooLarge, layer.Digest, layer.Size, o.maxBytes())
	}
	a := &Artifact{Ref: ref.Pinned(desc.Digest.String())}
	if o.Keys != nil {
		if a.SignedBy, err = o.Keys.verify(ctx, repo, ref, desc); err != nil {
			return nil, err
		}
	}
	rc, err := repo.Blobs().Fetch(ctx, layer)
	if err != nil {
		return nil, fmt.Errorf("fetching layer %s: %w", layer.Digest, err)
	}
	defer rc.Close()
	b, err := content.ReadAll(rc, layer)
	if err != nil {
		return nil, fmt.Errorf("fetching layer %s: %w", layer.Digest, err)
	}
	if !isWasmType(layer.MediaType) {
		if b, err = extractPlugin(b, layer.MediaType, o.maxBytes()); err != nil {
			return nil, fmt.Errorf("layer %s: %w", layer.Digest, err)
		}
	}
	sum := sha256.Sum256(b)
	a.Wasm, a.WasmDigest = b, "sha256:"+hex.EncodeToString(sum[:])
	return a, nil
}

// fetchManifest resolves ref and returns the manifest's descriptor and
// bytes, checked against the descriptor and a pinned digest.
func fetchManifest(ctx context.Context, repo *remote.Repository, ref Ref) (ocispec.Descriptor, []byte, error) {
	desc, rc, err := repo.FetchReference(ctx, ref.target())
	if err != nil {
		return desc, nil, fmt.Errorf("fetching manifest: %w", err)
	}
	defer rc.Close()
	raw, err := content.ReadAll(rc, desc)
	if err != nil {
		return desc, nil, fmt.Errorf("fetching manifest: %w", err)
	}
	if ref.Digest != "" && desc.Digest.String() != ref.Digest {
		if ref.Tag != "" {
			return desc, nil, fmt.Errorf("%w: %s now resolves to %s, pinned %s", ErrTagMoved, ref.Tag, desc.Digest, ref.Digest)
		}
		return desc, nil, fmt.Errorf("%w: manifest is %s, want %s", ErrDigestMismatch, desc.Digest, ref.Digest)
	}
	return desc, raw, nil
}

// wasmLayer picks the layer holding the module from a manifest.
func wasmLayer(mediaType string, raw []byte) (ocispec.Descriptor, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%w: manifest: %v", ErrMediaType, err)
	}
	if mediaType == "" {
		mediaType = m.MediaType
	}
	if mediaType != ocispec.MediaTypeImageManifest && mediaType != mediaTypeDockerV2 {
		return ocispec.Descriptor{}, fmt.Errorf("%w: manifest media type %q, want %s", ErrMediaType, mediaType, ocispec.MediaTypeImageManifest)
	}
	var found []ocispec.Descriptor
	for _, l := range m.Layers {
		if isWasmType(l.MediaType) {
			found = append(found, l)
		}
	}
	if len(found) == 0 && len(m.Layers) == 1 && slices.Contains(imageLayerTypes, m.Layers[0].MediaType) {
		found = m.Layers
	}
	types := make([]string, len(m.Layers))
	for i, l := range m.Layers {
		types[i] = l.MediaType
	}
	switch {
	case len(found) == 0:
		return ocispec.Descriptor{}, fmt.Errorf("%w: config %q, layers %q: want a layer %s or %s, or one image layer holding %s",
			ErrMediaType, m.Config.MediaType, types, MediaTypeWasmLayer, MediaTypeWasmLayerOld, pluginFile)
	case len(found) > 1:
		return ocispec.Descriptor{}, fmt.Errorf("%w: %d Wasm layers, want one", ErrMediaType, len(found))
	}
	if found[0].Size < 0 {
		return ocispec.Descriptor{}, fmt.Errorf("%w: layer size %d", ErrMediaType, found[0].Size)
	}
	if err := found[0].Digest.Validate(); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%w: layer digest: %v", ErrMediaType, err)
	}
	return found[0], nil
}

func isWasmType(t string) bool { return t == MediaTypeWasmLayer || t == MediaTypeWasmLayerOld }

// extractPlugin returns plugin.wasm from a (gzipped) tar layer, reading at
// most max bytes of it.
func extractPlugin(layer []byte, mediaType string, max int64) ([]byte, error) {
	var r io.Reader = bytes.NewReader(layer)
	if mediaType != ocispec.MediaTypeImageLayer {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMediaType, err)
		}
		defer zr.Close()
		r = zr
	}
	// The whole image is read through to find plugin.wasm: bound what it
	// inflates to, so a gzip bomb costs no more than a bounded read.
	limit := max * maxInflate
	lr := &io.LimitedReader{R: r, N: limit}
	tr := tar.NewReader(lr)
	for {
		if lr.N <= 0 {
			return nil, fmt.Errorf("%w: the image layer inflates beyond %d bytes without %s", ErrTooLarge, limit, pluginFile)
		}
		h, err := tr.Next()
		if lr.N <= 0 {
			return nil, fmt.Errorf("%w: the image layer inflates beyond %d bytes without %s", ErrTooLarge, limit, pluginFile)
		}
		if err == io.EOF {
			return nil, fmt.Errorf("%w: the image holds no %s", ErrMediaType, pluginFile)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading the image layer: %v", ErrMediaType, err)
		}
		if h.Typeflag != tar.TypeReg || strings.TrimPrefix(filepath.ToSlash(filepath.Clean("/"+h.Name)), "/") != pluginFile {
			continue
		}
		if h.Size > max {
			return nil, fmt.Errorf("%w: %s is %d bytes, more than max_module_bytes %d", ErrTooLarge, pluginFile, h.Size, max)
		}
		return io.ReadAll(io.LimitReader(tr, h.Size))
	}
}

// repository opens ref's repository with the options' transport and
// credentials.
func (o Options) repository(ref Ref) (*remote.Repository, error) {
	repo, err := remote.NewRepository(ref.Registry + "/" + ref.Repository)
	if err != nil {
		return nil, err
	}
	repo.PlainHTTP = o.plainHTTP(ref.Registry)
	client := &auth.Client{Client: &http.Client{Transport: http.DefaultTransport}, Cache: auth.NewCache()}
	path := o.DockerConfig
	if path == "" {
		path = defaultDockerConfig()
	}
	if path != "" {
		store, err := credentials.NewFileStore(path)
		if err != nil {
			return nil, fmt.Errorf("reading credentials from %s: %w", path, err)
		}
		client.Credential = credentials.Credential(store)
	}
	repo.Client = client
	return repo, nil
}

// plainHTTP reports whether registry is reached over plain HTTP: only
// loopback registries and those listed in o.Insecure.
func (o Options) plainHTTP(registry string) bool {
	if slices.Contains(o.Insecure, registry) {
		return true
	}
	host, _, err := net.SplitHostPort(registry)
	if err != nil {
		host = registry
	}
	if slices.Contains(o.Insecure, host) {
		return true
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// defaultDockerConfig is $DOCKER_CONFIG/config.json or
// ~/.docker/config.json, when it exists.
func defaultDockerConfig() string {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".docker")
	}
	p := filepath.Join(dir, "config.json")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		d = DefaultTimeout
	}
	return context.WithTimeout(ctx, d)
}

// explain turns a deadline or a refused connection into a reason an
// operator reads at once.
func explain(ctx context.Context, err error) error {
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("%w: no answer within the timeout: %v", ErrUnreachable, err)
	case errors.As(err, &op) && op.Op == "dial":
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return err
}
