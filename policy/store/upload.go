package store

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

const digestPrefix = "sha256:"

// minZstdWindow is the largest zstd window ReadBody accepts for small
// limits: the default window of common encoders, 8 MiB. For larger limits
// the window may be as large as the limit. The decoder allocates the
// window up front, so this bounds its memory.
const minZstdWindow = 8 << 20

// ReadBody reads an upload body, decoding Content-Encoding "" or
// "identity", "gzip" (or "x-gzip") and "zstd". It fails with ErrTooLarge
// as soon as the decoded size passes maxSize, so a compression bomb is never
// inflated in full: at most maxSize+1 decoded bytes are held. Unknown
// encodings are an error naming the encoding.
func ReadBody(r io.Reader, contentEncoding string, maxSize int64) ([]byte, error) {
	if maxSize < 0 {
		return nil, fmt.Errorf("reading body: negative limit %d", maxSize)
	}
	var src io.Reader
	switch enc := strings.ToLower(strings.TrimSpace(contentEncoding)); enc {
	case "", "identity":
		src = r
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("reading gzip body: %w", err)
		}
		defer zr.Close()
		src = zr
	case "zstd":
		window := uint64(max(maxSize, minZstdWindow))
		window = min(window, zstd.MaxWindowSize)
		zr, err := zstd.NewReader(r,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(window),
			zstd.WithDecoderMaxMemory(window))
		if err != nil {
			return nil, fmt.Errorf("reading zstd body: %w", err)
		}
		defer zr.Close()
		src = zr
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %s: want identity, gzip or zstd", quoteShort(contentEncoding))
	}
	limit := maxSize
	if limit < math.MaxInt64 {
		limit++
	}
	b, err := io.ReadAll(io.LimitReader(src, limit))
	if int64(len(b)) > maxSize {
		return nil, fmt.Errorf("reading body: %w: decoded size exceeds %d bytes", ErrTooLarge, maxSize)
	}
	if err != nil {
		if contentEncoding == "" {
			return nil, fmt.Errorf("reading body: %w", err)
		}
		return nil, fmt.Errorf("reading %s body: %w", strings.ToLower(strings.TrimSpace(contentEncoding)), err)
	}
	return b, nil
}

// Digest returns "sha256:<lowercase hex>" of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// ParseDigest accepts "sha256:<64 hex digits>" or the bare hex digits, in
// any case, and returns the canonical "sha256:<lowercase hex>".
func ParseDigest(s string) (string, error) {
	h := s
	if len(s) >= len(digestPrefix) && strings.EqualFold(s[:len(digestPrefix)], digestPrefix) {
		h = s[len(digestPrefix):]
	}
	if len(h) != 2*sha256.Size {
		return "", fmt.Errorf("digest %s: want sha256:<64 hex digits>", quoteShort(s))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return "", fmt.Errorf("digest %s: %q is not a hex digit", quoteShort(s), c)
		}
	}
	return digestPrefix + strings.ToLower(h), nil
}

// CheckDigest returns nil if b hashes to want (any form ParseDigest
// accepts) and otherwise an error wrapping ErrDigestMismatch that gives
// both digests.
func CheckDigest(b []byte, want string) error {
	w, err := ParseDigest(want)
	if err != nil {
		return err
	}
	if got := Digest(b); got != w {
		return fmt.Errorf("%w: got %s, want %s", ErrDigestMismatch, got, w)
	}
	return nil
}

// ParsePublicKey parses an ed25519 public key given as base64 (standard or
// URL alphabet, padded or not) of its 32 bytes, or as a PEM "PUBLIC KEY"
// (PKIX) block. Surrounding white space is ignored.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-----BEGIN") {
		block, rest := pem.Decode([]byte(s))
		if block == nil {
			return nil, errors.New("public key: invalid PEM")
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("public key: PEM block is %s, want PUBLIC KEY", quoteShort(block.Type))
		}
		if strings.TrimSpace(string(rest)) != "" {
			return nil, errors.New("public key: data after the PEM block")
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("public key: PEM holds a %T, want ed25519", k)
		}
		return ek, nil
	}
	b, ok := decodeBase64(s)
	if !ok {
		return nil, errors.New("public key: neither base64 nor a PEM block")
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key: %d bytes, want %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// KeyID identifies a public key: the first 16 hex digits of its SHA-256.
func KeyID(k ed25519.PublicKey) string {
	sum := sha256.Sum256(k)
	return hex.EncodeToString(sum[:])[:16]
}

// TrustedKeys is a set of ed25519 public keys whose detached signatures
// are accepted. It is immutable and safe for concurrent use; the nil and
// zero values trust no key.
type TrustedKeys struct {
	keys []trustedKey
}

type trustedKey struct {
	id  string
	key ed25519.PublicKey
}

// NewTrustedKeys returns a set of the given keys, dropping duplicates. It
// panics on a key that is not 32 bytes long, which ParsePublicKey never
// returns.
func NewTrustedKeys(keys ...ed25519.PublicKey) *TrustedKeys {
	t := &TrustedKeys{}
	seen := make(map[string]bool)
	for i, k := range keys {
		if len(k) != ed25519.PublicKeySize {
			panic(fmt.Sprintf("store.NewTrustedKeys: key %d is %d bytes, want %d", i, len(k), ed25519.PublicKeySize))
		}
		id := KeyID(k)
		if seen[id] {
			continue
		}
		seen[id] = true
		t.keys = append(t.keys, trustedKey{id: id, key: append(ed25519.PublicKey(nil), k...)})
	}
	return t
}

// IDs returns the KeyIDs of the trusted keys, in the order given.
func (t *TrustedKeys) IDs() []string {
	if t == nil {
		return nil
	}
	ids := make([]string, len(t.keys))
	for i, k := range t.keys {
		ids[i] = k.id
	}
	return ids
}

// Verify checks a detached signature: base64 (any alphabet, padded or
// not) of the 64-byte ed25519 signature over the exact module bytes, that
// is the decoded upload body. It returns the KeyID of the trusted key that
// verifies it. It fails with ErrUnsigned when sig is empty and with
// ErrBadSignature when sig is malformed or no trusted key verifies it.
func (t *TrustedKeys) Verify(wasm []byte, sig string) (keyID string, err error) {
	sig = strings.TrimSpace(sig)
	if sig == "" {
		return "", ErrUnsigned
	}
	raw, ok := decodeBase64(sig)
	if !ok {
		return "", fmt.Errorf("%w: not base64", ErrBadSignature)
	}
	if len(raw) != ed25519.SignatureSize {
		return "", fmt.Errorf("%w: %d bytes, want %d", ErrBadSignature, len(raw), ed25519.SignatureSize)
	}
	if t == nil || len(t.keys) == 0 {
		return "", fmt.Errorf("%w: no trusted keys are configured", ErrBadSignature)
	}
	for _, k := range t.keys {
		if ed25519.Verify(k.key, wasm, raw) {
			return k.id, nil
		}
	}
	return "", fmt.Errorf("%w: no trusted key verifies it", ErrBadSignature)
}

// decodeBase64 decodes standard or URL-alphabet base64, padded or not.
func decodeBase64(s string) ([]byte, bool) {
	for _, enc := range []*base64.Encoding{
		base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding,
	} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}
