package ociwasm

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
)

// Sigstore bundles attached as OCI 1.1 referrers of the signed manifest
// (cosign's BUNDLE_SPEC: an artifact of type
// application/vnd.dev.sigstore.bundle.v0.3+json whose one layer is the
// bundle), verified offline by public key: a DSSE envelope of an in-toto
// statement whose subject is the manifest, or a message signature over
// the manifest. Transparency-log entries of a key-pair bundle are not
// checked; keyless bundles are verified by Keys with keyless rules
// (keyless.go), and refused otherwise.
const (
	MediaTypeBundle = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// maxBundle bounds a bundle; a key-signed one is a few KB.
	maxBundle = 1 << 20
	// maxReferrers bounds how many bundles of one manifest are tried.
	maxReferrers = 16
)

// errNotBundle: a referrer with an empty config that holds no bundle.
var errNotBundle = errors.New("not a Sigstore bundle")

// sigBundle is the part of a Sigstore bundle (v0.3, protobuf JSON) that
// key-pair verification reads.
type sigBundle struct {
	MediaType            string `json:"mediaType"`
	VerificationMaterial struct {
		Certificate json.RawMessage `json:"certificate"`
	} `json:"verificationMaterial"`
	DSSEEnvelope *struct {
		Payload     string `json:"payload"`
		PayloadType string `json:"payloadType"`
		Signatures  []struct {
			Sig string `json:"sig"`
		} `json:"signatures"`
	} `json:"dsseEnvelope"`
	MessageSignature *struct {
		MessageDigest struct {
			Algorithm string `json:"algorithm"`
			Digest    string `json:"digest"`
		} `json:"messageDigest"`
		Signature string `json:"signature"`
	} `json:"messageSignature"`
}

// statement is the part of an in-toto statement that names what it is
// about.
type statement struct {
	Subject []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
}

// ParseBundle decodes a Sigstore bundle and returns what a key signed and
// the signatures over it: for a DSSE envelope the PAE encoding, for a
// message signature the message digest. subjects are the sha256 hex
// digests the bundle is about.
func ParseBundle(b []byte) (signed [32]byte, sigs [][]byte, subjects []string, err error) {
	var sb sigBundle
	if err := json.Unmarshal(b, &sb); err != nil {
		return signed, nil, nil, fmt.Errorf("bundle: %w", err)
	}
	if len(sb.VerificationMaterial.Certificate) > 0 {
		return signed, nil, nil, errors.New("bundle: keyless (a certificate): verified only against a trusted root and identity (VerifyKeyless)")
	}
	return parseSigned(b)
}

// parseSigned is ParseBundle for a bundle with or without a certificate.
func parseSigned(b []byte) (signed [32]byte, sigs [][]byte, subjects []string, err error) {
	var sb sigBundle
	if err := json.Unmarshal(b, &sb); err != nil {
		return signed, nil, nil, fmt.Errorf("bundle: %w", err)
	}
	switch {
	case sb.DSSEEnvelope != nil:
		env := sb.DSSEEnvelope
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			return signed, nil, nil, fmt.Errorf("bundle: DSSE payload: %w", err)
		}
		pae := "DSSEv1 " + strconv.Itoa(len(env.PayloadType)) + " " + env.PayloadType + " " + strconv.Itoa(len(payload)) + " " + string(payload)
		signed = sha256.Sum256([]byte(pae))
		for _, s := range env.Signatures {
			if raw, err := base64.StdEncoding.DecodeString(s.Sig); err == nil {
				sigs = append(sigs, raw)
			}
		}
		var st statement
		if err := json.Unmarshal(payload, &st); err != nil {
			return signed, nil, nil, fmt.Errorf("bundle: in-toto statement: %w", err)
		}
		for _, s := range st.Subject {
			if d := s.Digest["sha256"]; d != "" {
				subjects = append(subjects, d)
			}
		}
	case sb.MessageSignature != nil:
		ms := sb.MessageSignature
		d, err := base64.StdEncoding.DecodeString(ms.MessageDigest.Digest)
		if ms.MessageDigest.Algorithm != "SHA2_256" || err != nil || len(d) != sha256.Size {
			return signed, nil, nil, fmt.Errorf("bundle: message digest %s: want a SHA2_256 digest", ms.MessageDigest.Algorithm)
		}
		copy(signed[:], d)
		if raw, err := base64.StdEncoding.DecodeString(ms.Signature); err == nil {
			sigs = append(sigs, raw)
		}
		subjects = []string{hex.EncodeToString(d)}
	default:
		return signed, nil, nil, errors.New("bundle: neither a DSSE envelope nor a message signature")
	}
	if len(sigs) == 0 {
		return signed, nil, nil, errors.New("bundle: no signature")
	}
	return signed, sigs, subjects, nil
}

// verifyBundles looks for Sigstore bundles attached to desc and returns
// the key ID of one a trusted key signed for desc, or why each found was
// refused.
func (k *Keys) verifyBundles(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) (id string, reasons []string, err error) {
	var refs []ocispec.Descriptor
	// Not filtered by the registry: some (go-containerregistry's) report
	// the config's media type as the artifact type, the empty one for a
	// bundle; the manifest itself is checked in verifyBundle.
	err = repo.Referrers(ctx, desc, "", func(page []ocispec.Descriptor) error {
		for _, r := range page {
			if (r.ArtifactType == MediaTypeBundle || r.ArtifactType == ocispec.MediaTypeEmptyJSON) && len(refs) < maxReferrers {
				refs = append(refs, r)
			}
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("listing the referrers of %s: %w", desc.Digest, err)
	}
	for _, r := range refs {
		id, err := k.verifyBundle(ctx, repo, r, desc.Digest.Encoded())
		if err == nil {
			return id, nil, nil
		}
		if errors.Is(err, errNotBundle) {
			continue
		}
		reasons = append(reasons, fmt.Sprintf("bundle %s: %v", r.Digest, err))
	}
	return "", reasons, nil
}

func (k *Keys) verifyBundle(ctx context.Context, repo *remote.Repository, ref ocispec.Descriptor, wantHex string) (string, error) {
	if ref.Size > maxBundle {
		return "", fmt.Errorf("manifest of %d bytes", ref.Size)
	}
	raw, err := content.FetchAll(ctx, repo, ref)
	if err != nil {
		return "", err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil || len(m.Layers) != 1 || m.Layers[0].MediaType != MediaTypeBundle {
		return "", errNotBundle
	}
	if m.Layers[0].Size < 0 || m.Layers[0].Size > maxBundle {
		return "", fmt.Errorf("bundle of %d bytes", m.Layers[0].Size)
	}
	b, err := content.FetchAll(ctx, repo.Blobs(), m.Layers[0])
	if err != nil {
		return "", err
	}
	if k.keylessBundle(b) {
		return k.verifyKeyless(b, wantHex)
	}
	signed, sigs, subjects, err := ParseBundle(b)
	if err != nil {
		return "", err
	}
	id := ""
	for _, pk := range k.keys {
		for _, s := range sigs {
			if ecdsa.VerifyASN1(pk.key, signed[:], s) {
				id = pk.id
			}
		}
	}
	if id == "" {
		return "", errors.New("signed by a key that is not trusted")
	}
	for _, s := range subjects {
		if s == wantHex {
			return id, nil
		}
	}
	for i := range subjects {
		subjects[i] = "sha256:" + subjects[i]
	}
	return "", fmt.Errorf("the bundle signed by key %s is for %s, not this manifest sha256:%s", id, strings.Join(subjects, ", "), wantHex)
}

// keylessBundle reports whether b carries a signing certificate and k
// has keyless rules to check it with.
func (k *Keys) keylessBundle(b []byte) bool {
	if len(k.keyless) == 0 {
		return false
	}
	var kb keylessBundle
	der, err := kb.leafOf(b)
	return err == nil && der != nil
}

// verifyKeyless checks a keyless bundle against each keyless rule and
// returns the identity that signed wantHex.
func (k *Keys) verifyKeyless(b []byte, wantHex string) (string, error) {
	var reasons []string
	for _, r := range k.keyless {
		subjects, id, err := VerifyKeyless(b, r.root, r.ids)
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		if slices.Contains(subjects, wantHex) {
			return id.String(), nil
		}
		reasons = append(reasons, fmt.Sprintf("the bundle signed by %s is for sha256:%s, not this manifest sha256:%s", id, strings.Join(subjects, ", sha256:"), wantHex))
	}
	return "", errors.New("keyless: " + strings.Join(reasons, "; "))
}
