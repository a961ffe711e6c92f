package ociwasm

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
)

// cosign's signature layout: a manifest tagged sha256-<hex>.sig beside
// the signed one, each layer a simple-signing payload naming the signed
// manifest's digest, its ECDSA signature in an annotation.
const (
	mediaTypeSimpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json"
	annotationSignature    = "dev.cosignproject.cosign/signature"
	simpleSigningType      = "cosign container image signature"
	// maxPayload bounds a signature payload; cosign's are a few hundred
	// bytes.
	maxPayload = 64 << 10
)

var (
	// ErrUnsigned: a signature is required and the registry holds none.
	ErrUnsigned = errors.New("module is not signed")
	// ErrBadSignature: no trusted key verifies a signature of this
	// manifest.
	ErrBadSignature = errors.New("bad signature")
)

// Keys is a set of cosign public keys (ECDSA P-256) and keyless
// identities (WithKeyless), immutable.
type Keys struct {
	keys    []pubKey
	keyless []keylessRule
}

// keylessRule accepts keyless bundles whose certificate chains to root
// and names one of ids.
type keylessRule struct {
	root *TrustedRoot
	ids  []Identity
}

// WithKeyless returns k (nil: no keys) that also accepts keyless Sigstore
// bundles verified against root whose certificate names one of ids.
func (k *Keys) WithKeyless(root *TrustedRoot, ids ...Identity) *Keys {
	out := &Keys{}
	if k != nil {
		out.keys, out.keyless = k.keys, slices.Clone(k.keyless)
	}
	out.keyless = append(out.keyless, keylessRule{root, ids})
	return out
}

type pubKey struct {
	id  string
	key *ecdsa.PublicKey
}

// ParseKeys parses PEM "PUBLIC KEY" blocks of ECDSA P-256 keys, as
// `cosign generate-key-pair` writes to cosign.pub; one string may hold
// several blocks.
func ParseKeys(pems ...string) (*Keys, error) {
	k := &Keys{}
	for i, s := range pems {
		rest := []byte(strings.TrimSpace(s))
		if len(rest) == 0 {
			return nil, fmt.Errorf("cosign key %d: empty", i)
		}
		for len(bytes.TrimSpace(rest)) > 0 {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil || block.Type != "PUBLIC KEY" {
				return nil, fmt.Errorf("cosign key %d: want a PEM PUBLIC KEY block", i)
			}
			pub, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("cosign key %d: %w", i, err)
			}
			ek, ok := pub.(*ecdsa.PublicKey)
			if !ok || ek.Curve != elliptic.P256() {
				return nil, fmt.Errorf("cosign key %d: a %T, want ECDSA P-256", i, pub)
			}
			k.keys = append(k.keys, pubKey{id: KeyID(ek), key: ek})
		}
	}
	return k, nil
}

// KeyID identifies a public key: the first 16 hex digits of the SHA-256
// of its PKIX encoding.
func KeyID(k *ecdsa.PublicKey) string {
	der, _ := x509.MarshalPKIXPublicKey(k)
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])[:16]
}

// simpleSigning is cosign's signature payload.
type simpleSigning struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]any `json:"optional"`
}

// ParsePayload decodes a cosign simple-signing payload and returns the
// manifest digest it signs.
func ParsePayload(b []byte) (string, error) {
	var p simpleSigning
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("signature payload: %w", err)
	}
	if p.Critical.Type != simpleSigningType {
		return "", fmt.Errorf("signature payload: type %q, want %q", p.Critical.Type, simpleSigningType)
	}
	d, err := digest.Parse(p.Critical.Image.DockerManifestDigest)
	if err != nil {
		return "", fmt.Errorf("signature payload: %w", err)
	}
	return d.String(), nil
}

func signatureTag(d digest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded() + ".sig"
}

// verify finds a signature of desc by one of the keys and returns the key
// ID.
func (k *Keys) verify(ctx context.Context, repo *remote.Repository, ref Ref, desc ocispec.Descriptor) (string, error) {
	if len(k.keys) == 0 && len(k.keyless) == 0 {
		return "", fmt.Errorf("%w: a signature is required and no cosign key is configured", ErrBadSignature)
	}
	id, reasons, err := k.verifyBundles(ctx, repo, desc)
	if id != "" || err != nil {
		return id, err
	}
	tag := signatureTag(desc.Digest)
	sdesc, rc, err := repo.FetchReference(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		if len(reasons) > 0 {
			return "", fmt.Errorf("%w: %s", ErrBadSignature, strings.Join(reasons, "; "))
		}
		return "", fmt.Errorf("%w: a signature is required and the registry has none (no Sigstore bundle referring to %s, no tag %s)", ErrUnsigned, desc.Digest, tag)
	}
	if err != nil {
		return "", fmt.Errorf("fetching signatures %s: %w", tag, err)
	}
	defer rc.Close()
	raw, err := content.ReadAll(rc, sdesc)
	if err != nil {
		return "", fmt.Errorf("fetching signatures %s: %w", tag, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", fmt.Errorf("%w: signatures %s: %v", ErrBadSignature, tag, err)
	}
	for _, l := range m.Layers {
		id, err := k.verifyLayer(ctx, repo, l, desc.Digest.String())
		if err == nil {
			return id, nil
		}
		reasons = append(reasons, err.Error())
	}
	if len(reasons) == 0 {
		reasons = []string{"no signature layers"}
	}
	return "", fmt.Errorf("%w: %s", ErrBadSignature, strings.Join(reasons, "; "))
}

// verifyLayer checks one signature layer against the keys and the signed
// manifest's digest.
func (k *Keys) verifyLayer(ctx context.Context, repo *remote.Repository, l ocispec.Descriptor, want string) (string, error) {
	if l.MediaType != mediaTypeSimpleSigning {
		return "", fmt.Errorf("layer %s: media type %q", l.Digest, l.MediaType)
	}
	if l.Size < 0 || l.Size > maxPayload {
		return "", fmt.Errorf("layer %s: payload of %d bytes", l.Digest, l.Size)
	}
	sig, err := base64.StdEncoding.DecodeString(l.Annotations[annotationSignature])
	if err != nil || len(sig) == 0 {
		return "", fmt.Errorf("layer %s: no base64 signature annotation", l.Digest)
	}
	payload, err := content.FetchAll(ctx, repo.Blobs(), l)
	if err != nil {
		return "", fmt.Errorf("layer %s: %w", l.Digest, err)
	}
	sum := sha256.Sum256(payload)
	id := ""
	for _, pk := range k.keys {
		if ecdsa.VerifyASN1(pk.key, sum[:], sig) {
			id = pk.id
			break
		}
	}
	if id == "" {
		return "", errors.New("signed by a key that is not trusted")
	}
	got, err := ParsePayload(payload)
	if err != nil {
		return "", err
	}
	if got != want {
		return "", fmt.Errorf("the signature by key %s is for %s, not this manifest %s", id, got, want)
	}
	return id, nil
}

// Sign signs the manifest ref is pinned to with key, the way `cosign sign
// --key` does, and pushes the signature beside it. It replaces earlier
// signatures of that manifest.
func Sign(ctx context.Context, ref Ref, key *ecdsa.PrivateKey, o Options) error {
	if err := sign(ctx, ref, ref.Digest, key, o); err != nil {
		return fmt.Errorf("signing %s: %w", ref, explain(ctx, err))
	}
	return nil
}

// sign pushes a signature of the manifest ref is pinned to whose payload
// names signed (the same digest, except in tests).
func sign(ctx context.Context, ref Ref, signed string, key *ecdsa.PrivateKey, o Options) error {
	d, err := digest.Parse(ref.Digest)
	if err != nil {
		return fmt.Errorf("the reference must be pinned to a digest: %w", err)
	}
	ctx, cancel := withTimeout(ctx, o.Timeout)
	defer cancel()
	repo, err := o.repository(ref)
	if err != nil {
		return err
	}
	var p simpleSigning
	p.Critical.Identity.DockerReference = ref.Registry + "/" + ref.Repository
	p.Critical.Image.DockerManifestDigest = signed
	p.Critical.Type = simpleSigningType
	payload, _ := json.Marshal(p)
	sum := sha256.Sum256(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		return err
	}
	layer := content.NewDescriptorFromBytes(mediaTypeSimpleSigning, payload)
	layer.Annotations = map[string]string{annotationSignature: base64.StdEncoding.EncodeToString(sig)}
	return pushManifest(ctx, repo, ocispec.MediaTypeImageConfig, []byte("{}"), []blob{{layer, payload}}, signatureTag(d))
}

// IDs returns the key IDs of the set, in order.
func (k *Keys) IDs() []string {
	if k == nil {
		return nil
	}
	ids := make([]string, 0, len(k.keys))
	for _, pk := range k.keys {
		ids = append(ids, pk.id)
	}
	for _, r := range k.keyless {
		for _, id := range r.ids {
			ids = append(ids, id.String())
		}
	}
	return ids
}
