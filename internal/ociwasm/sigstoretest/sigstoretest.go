// Package sigstoretest is a private Sigstore made in a test: a Fulcio-like
// certificate authority (root and intermediate), a Rekor-like log key, and
// the keyless bundles they would issue, with parts bent on demand, so that
// tests of keyless verification need no network and no sigstore code.
package sigstoretest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/url"
	"strconv"
	"testing"
	"time"

	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
)

const (
	// SAN and Issuer are the identity a fixture's Leaf is usually issued to.
	SAN    = "https://github.com/acme/policies/.github/workflows/release.yml@refs/heads/main"
	Issuer = "https://token.actions.githubusercontent.com"
	// MediaTypeBundle is a Sigstore bundle's media type.
	MediaTypeBundle = "application/vnd.dev.sigstore.bundle.v0.3+json"
)

// T0 is when a fixture's leaf certificates start being valid.
var T0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// oidIssuerV2 is Fulcio's OIDC issuer extension.
var oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}

// Sigstore is a certificate authority and a transparency log key with the
// trusted root (trusted_root.json) that names them.
type Sigstore struct {
	RootKey, InterKey, LogKey *ecdsa.PrivateKey
	Root, Inter               *x509.Certificate
	TrustedRoot               []byte
}

// ECKey is a new ECDSA P-256 key.
func ECKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// MustCert issues tmpl for pub, signed by signer as parent.
func MustCert(t testing.TB, tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, der
}

var b64 = base64.StdEncoding.EncodeToString

// New makes a Sigstore with fresh keys.
func New(t testing.TB) *Sigstore {
	f := &Sigstore{RootKey: ECKey(t), InterKey: ECKey(t), LogKey: ECKey(t)}
	ca := func(n int64, cn string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: cn}, NotBefore: T0.AddDate(-1, 0, 0),
			NotAfter: T0.AddDate(5, 0, 0), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	var rootDER, interDER []byte
	f.Root, rootDER = MustCert(t, ca(1, "test-fulcio-root"), ca(1, "test-fulcio-root"), &f.RootKey.PublicKey, f.RootKey)
	f.Inter, interDER = MustCert(t, ca(2, "test-fulcio-intermediate"), f.Root, &f.InterKey.PublicKey, f.RootKey)
	logDER, _ := x509.MarshalPKIXPublicKey(&f.LogKey.PublicKey)
	logID := sha256.Sum256(logDER)
	f.TrustedRoot, _ = json.Marshal(map[string]any{
		"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
		"tlogs": []any{map[string]any{"baseUrl": "https://rekor.test", "hashAlgorithm": "SHA2_256",
			"publicKey": map[string]any{"rawBytes": b64(logDER), "keyDetails": "PKIX_ECDSA_P256_SHA_256"},
			"logId":     map[string]any{"keyId": b64(logID[:])}}},
		"certificateAuthorities": []any{map[string]any{"uri": "https://fulcio.test",
			"certChain": map[string]any{"certificates": []any{map[string]any{"rawBytes": b64(interDER)}, map[string]any{"rawBytes": b64(rootDER)}}}}},
	})
	return f
}

// Leaf issues a short-lived signing certificate for key, san and issuer,
// as Fulcio does, signed by the intermediate.
func (f *Sigstore) Leaf(t testing.TB, key *ecdsa.PrivateKey, san, issuer string) []byte {
	u, _ := url.Parse(san)
	iss, _ := asn1.MarshalWithParams(issuer, "utf8")
	_, der := MustCert(t, &x509.Certificate{SerialNumber: big.NewInt(3), NotBefore: T0, NotAfter: T0.Add(10 * time.Minute),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}, URIs: []*url.URL{u},
		ExtraExtensions: []pkix.Extension{{Id: oidIssuerV2, Value: iss}}}, f.Inter, &key.PublicKey, f.InterKey)
	return der
}

// Opts bends one part of a bundle; the zero value is a good bundle.
type Opts struct {
	At                 time.Time         // integrated time (zero: 2 minutes into the certificate)
	SETKey             *ecdsa.PrivateKey // signs the entry timestamp (nil: the log's key)
	LogKeyID           []byte            // nil: the trusted log's ID
	BodySig            []byte            // the signature the log records (nil: the bundle's)
	NoEntry, NoPromise bool
	SigKey             *ecdsa.PrivateKey // signs the manifest digest (nil: the certificate's key)
}

// setPayload is what Rekor's signed entry timestamp signs.
type setPayload struct {
	Body           string `json:"body"`
	IntegratedTime int64  `json:"integratedTime"`
	LogID          string `json:"logID"`
	LogIndex       int64  `json:"logIndex"`
}

// Bundle is a keyless message-signature bundle over digest (a manifest's
// SHA-256), signed by certKey, whose certificate is certDER.
func (f *Sigstore) Bundle(t testing.TB, certKey *ecdsa.PrivateKey, certDER []byte, digest [32]byte, o Opts) []byte {
	sk := certKey
	if o.SigKey != nil {
		sk = o.SigKey
	}
	sig, err := ecdsa.SignASN1(rand.Reader, sk, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	bodySig := sig
	if o.BodySig != nil {
		bodySig = o.BodySig
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
	body, _ := json.Marshal(map[string]any{"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": map[string]any{
		"data":      map[string]any{"hash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(digest[:])}},
		"signature": map[string]any{"content": b64(bodySig), "publicKey": map[string]any{"content": b64(certPEM)}}}})
	at := o.At
	if at.IsZero() {
		at = T0.Add(2 * time.Minute)
	}
	logDER, _ := x509.MarshalPKIXPublicKey(&f.LogKey.PublicKey)
	id := sha256.Sum256(logDER)
	logID := id[:]
	if o.LogKeyID != nil {
		logID = o.LogKeyID
	}
	payload, _ := json.Marshal(setPayload{Body: b64(body), IntegratedTime: at.Unix(), LogID: hex.EncodeToString(logID), LogIndex: 42})
	ps := sha256.Sum256(payload)
	setKey := f.LogKey
	if o.SETKey != nil {
		setKey = o.SETKey
	}
	set, _ := ecdsa.SignASN1(rand.Reader, setKey, ps[:])
	entry := map[string]any{"logIndex": "42", "logId": map[string]any{"keyId": b64(logID)}, "kindVersion": map[string]any{"kind": "hashedrekord", "version": "0.0.1"},
		"integratedTime": strconv.FormatInt(at.Unix(), 10), "canonicalizedBody": b64(body)}
	if !o.NoPromise {
		entry["inclusionPromise"] = map[string]any{"signedEntryTimestamp": b64(set)}
	}
	entries := []any{entry}
	if o.NoEntry {
		entries = nil
	}
	b, _ := json.Marshal(map[string]any{"mediaType": MediaTypeBundle,
		"verificationMaterial": map[string]any{"certificate": map[string]any{"rawBytes": b64(certDER)}, "tlogEntries": entries},
		"messageSignature":     map[string]any{"messageDigest": map[string]any{"algorithm": "SHA2_256", "digest": b64(digest[:])}, "signature": b64(sig)}})
	return b
}

// Attach pushes bundle to the plain-HTTP registry host as a referrer of
// the manifest repository@manifestDigest, as cosign attaches bundles.
func Attach(t testing.TB, host, repository, manifestDigest string, bundle []byte) {
	t.Helper()
	ctx := context.Background()
	repo, err := remote.NewRepository(host + "/" + repository)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	subject, err := repo.Resolve(ctx, manifestDigest)
	if err != nil {
		t.Fatal(err)
	}
	empty := content.NewDescriptorFromBytes(ocispec.MediaTypeEmptyJSON, []byte("{}"))
	layer := content.NewDescriptorFromBytes(MediaTypeBundle, bundle)
	for _, b := range []struct {
		d   ocispec.Descriptor
		raw []byte
	}{{empty, []byte("{}")}, {layer, bundle}} {
		if err := repo.Push(ctx, b.d, bytes.NewReader(b.raw)); err != nil {
			t.Fatal(err)
		}
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: MediaTypeBundle, Config: empty, Layers: []ocispec.Descriptor{layer}, Subject: &subject}
	raw, _ := json.Marshal(m)
	if err := repo.Push(ctx, content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, raw), bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
}
