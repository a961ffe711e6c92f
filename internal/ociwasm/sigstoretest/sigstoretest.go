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

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

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
	// A timestamp authority: its root and its time-stamping certificate.
	TSARootKey, TSAKey *ecdsa.PrivateKey
	TSARoot, TSA       *x509.Certificate
	// A certificate transparency log, whose SCT Leaf embeds.
	CTKey       *ecdsa.PrivateKey
	TrustedRoot []byte
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
	f := &Sigstore{RootKey: ECKey(t), InterKey: ECKey(t), LogKey: ECKey(t), TSARootKey: ECKey(t), TSAKey: ECKey(t), CTKey: ECKey(t)}
	ca := func(n int64, cn string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: cn}, NotBefore: T0.AddDate(-1, 0, 0),
			NotAfter: T0.AddDate(5, 0, 0), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	var rootDER, interDER []byte
	f.Root, rootDER = MustCert(t, ca(1, "test-fulcio-root"), ca(1, "test-fulcio-root"), &f.RootKey.PublicKey, f.RootKey)
	f.Inter, interDER = MustCert(t, ca(2, "test-fulcio-intermediate"), f.Root, &f.InterKey.PublicKey, f.RootKey)
	var tsaRootDER, tsaDER []byte
	f.TSARoot, tsaRootDER = MustCert(t, ca(4, "test-tsa-root"), ca(4, "test-tsa-root"), &f.TSARootKey.PublicKey, f.TSARootKey)
	f.TSA, tsaDER = MustCert(t, &x509.Certificate{SerialNumber: big.NewInt(5), Subject: pkix.Name{CommonName: "test-tsa"},
		NotBefore: T0.AddDate(-1, 0, 0), NotAfter: T0.AddDate(5, 0, 0), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}}, f.TSARoot, &f.TSAKey.PublicKey, f.TSARootKey)
	logDER, _ := x509.MarshalPKIXPublicKey(&f.LogKey.PublicKey)
	logID := sha256.Sum256(logDER)
	ctDER, _ := x509.MarshalPKIXPublicKey(&f.CTKey.PublicKey)
	ctID := sha256.Sum256(ctDER)
	f.TrustedRoot, _ = json.Marshal(map[string]any{
		"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
		"tlogs": []any{map[string]any{"baseUrl": "https://rekor.test", "hashAlgorithm": "SHA2_256",
			"publicKey": map[string]any{"rawBytes": b64(logDER), "keyDetails": "PKIX_ECDSA_P256_SHA_256"},
			"logId":     map[string]any{"keyId": b64(logID[:])}}},
		"certificateAuthorities": []any{map[string]any{"uri": "https://fulcio.test",
			"certChain": map[string]any{"certificates": []any{map[string]any{"rawBytes": b64(interDER)}, map[string]any{"rawBytes": b64(rootDER)}}}}},
		"ctlogs": []any{map[string]any{"baseUrl": "https://ctfe.test", "hashAlgorithm": "SHA2_256",
			"publicKey": map[string]any{"rawBytes": b64(ctDER), "keyDetails": "PKIX_ECDSA_P256_SHA_256"},
			"logId":     map[string]any{"keyId": b64(ctID[:])}}},
		"timestampAuthorities": []any{map[string]any{"uri": "https://tsa.test", "subject": map[string]any{"commonName": "test-tsa"},
			"certChain": map[string]any{"certificates": []any{map[string]any{"rawBytes": b64(tsaDER)}, map[string]any{"rawBytes": b64(tsaRootDER)}}}}},
	})
	return f
}

// Leaf issues a short-lived signing certificate for key, san and issuer,
// as Fulcio does, signed by the intermediate, with the SCT of the
// fixture's CT log embedded.
func (f *Sigstore) Leaf(t testing.TB, key *ecdsa.PrivateKey, san, issuer string) []byte {
	return f.LeafWith(t, key, san, issuer, LeafOpts{})
}

// LeafOpts bends a leaf's embedded SCT.
type LeafOpts struct {
	NoSCT       bool              // embed none
	SCTKey      *ecdsa.PrivateKey // signs the SCT (nil: the CT log's key)
	SCTOtherTBS bool              // the SCT signs another certificate
}

var oidSCTList = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}

// LeafWith is Leaf with its SCT bent by o. The SCT signs the TBS of the
// same certificate issued without the SCT extension (what a
// precertificate is without its poison), and the intermediate's key hash.
func (f *Sigstore) LeafWith(t testing.TB, key *ecdsa.PrivateKey, san, issuer string, o LeafOpts) []byte {
	u, _ := url.Parse(san)
	iss, _ := asn1.MarshalWithParams(issuer, "utf8")
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), NotBefore: T0, NotAfter: T0.Add(10 * time.Minute),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}, URIs: []*url.URL{u},
		ExtraExtensions: []pkix.Extension{{Id: oidIssuerV2, Value: iss}}}
	pre, der := MustCert(t, tmpl, f.Inter, &key.PublicKey, f.InterKey)
	if o.NoSCT {
		return der
	}
	tbs := pre.RawTBSCertificate
	if o.SCTOtherTBS {
		other := *tmpl
		other.SerialNumber = big.NewInt(4)
		c, _ := MustCert(t, &other, f.Inter, &key.PublicKey, f.InterKey)
		tbs = c.RawTBSCertificate
	}
	ctKey := f.CTKey
	if o.SCTKey != nil {
		ctKey = o.SCTKey
	}
	ts := uint64(T0.Add(time.Second).UnixMilli())
	keyHash := sha256.Sum256(f.Inter.RawSubjectPublicKeyInfo)
	var signed cryptobyte.Builder
	signed.AddUint8(0)
	signed.AddUint8(0)
	signed.AddUint64(ts)
	signed.AddUint16(1)
	signed.AddBytes(keyHash[:])
	signed.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(tbs) })
	signed.AddUint16(0)
	sum := sha256.Sum256(signed.BytesOrPanic())
	sig, err := ecdsa.SignASN1(rand.Reader, ctKey, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	ctDER, _ := x509.MarshalPKIXPublicKey(&f.CTKey.PublicKey)
	logID := sha256.Sum256(ctDER)
	var list cryptobyte.Builder
	list.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			b.AddUint8(0)
			b.AddBytes(logID[:])
			b.AddUint64(ts)
			b.AddUint16(0)
			b.AddUint8(4) // sha256
			b.AddUint8(3) // ecdsa
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(sig) })
		})
	})
	ext, _ := asn1.Marshal(list.BytesOrPanic())
	tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: oidSCTList, Value: ext})
	_, der = MustCert(t, tmpl, f.Inter, &key.PublicKey, f.InterKey)
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

	Proof         bool              // an inclusion proof (leaf 5 of a tree of 7) and its signed checkpoint
	V2            bool              // Rekor v2: a hashedrekord 0.0.2 body, an inclusion proof, no signed entry timestamp
	TamperPath    bool              // flip a bit of the audit path
	WrongRoot     bool              // the proof and the checkpoint name another tree's root (validly signed)
	CheckpointKey *ecdsa.PrivateKey // signs the checkpoint (nil: the log's key)

	Stamp    bool              // an RFC 3161 timestamp of the signature by the fixture's TSA
	StampAt  time.Time         // its time (zero: 2.25 s after the integrated time)
	StampKey *ecdsa.PrivateKey // signs it (nil: the TSA's key)
	StampOf  []byte            // what it stamps (nil: the bundle's signature)
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
	body, _ := json.Marshal(map[string]any{"apiVersion": "0.0.2", "kind": "hashedrekord", "spec": map[string]any{"hashedRekordV002": map[string]any{
		"data":      map[string]any{"algorithm": "SHA2_256", "digest": b64(digest[:])},
		"signature": map[string]any{"content": b64(bodySig), "verifier": map[string]any{"x509Certificate": map[string]any{"rawBytes": b64(certDER)}, "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}}}})
	if !o.V2 {
		body = f.bodyV1(digest, bodySig, certPEM)
	}
	return f.bundleWith(t, certDER, digest, sig, body, o)
}

// bodyV1 is a Rekor v1 hashedrekord entry body.
func (f *Sigstore) bodyV1(digest [32]byte, sig, certPEM []byte) []byte {
	body, _ := json.Marshal(map[string]any{"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": map[string]any{
		"data":      map[string]any{"hash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(digest[:])}},
		"signature": map[string]any{"content": b64(sig), "publicKey": map[string]any{"content": b64(certPEM)}}}})
	return body
}

// bundleWith is a bundle whose log entry records body.
func (f *Sigstore) bundleWith(t testing.TB, certDER []byte, digest [32]byte, sig, body []byte, o Opts) []byte {
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
	if o.V2 {
		entry["kindVersion"] = map[string]any{"kind": "hashedrekord", "version": "0.0.2"}
		entry["integratedTime"] = "0"
	}
	if !o.NoPromise && !o.V2 {
		entry["inclusionPromise"] = map[string]any{"signedEntryTimestamp": b64(set)}
	}
	if o.Proof || o.V2 {
		entry["inclusionProof"] = f.proof(t, body, o)
	}
	entries := []any{entry}
	if o.NoEntry {
		entries = nil
	}
	vm := map[string]any{"certificate": map[string]any{"rawBytes": b64(certDER)}, "tlogEntries": entries}
	if o.Stamp {
		of, when := sig, o.StampAt
		if o.StampOf != nil {
			of = o.StampOf
		}
		if when.IsZero() {
			when = at.Add(2250 * time.Millisecond)
		}
		vm["timestampVerificationData"] = map[string]any{"rfc3161Timestamps": []any{map[string]any{"signedTimestamp": b64(f.Timestamp(t, of, when, o.StampKey))}}}
	}
	b, _ := json.Marshal(map[string]any{"mediaType": MediaTypeBundle,
		"verificationMaterial": vm,
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

// MerkleRoot is RFC 6962's Merkle tree hash of leaves (section 2.1),
// computed recursively, as the RFC defines it.
func MerkleRoot(leaves [][]byte) []byte { return mth(leaves) }

// AuditPath is RFC 6962's audit path of leaf m (section 2.1.1).
func AuditPath(m int, leaves [][]byte) [][]byte { return auditPath(m, leaves) }

func mth(leaves [][]byte) []byte {
	switch len(leaves) {
	case 0:
		s := sha256.Sum256(nil)
		return s[:]
	case 1:
		s := sha256.Sum256(append([]byte{0}, leaves[0]...))
		return s[:]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	s := sha256.Sum256(append(append([]byte{1}, mth(leaves[:k])...), mth(leaves[k:])...))
	return s[:]
}

// auditPath is RFC 6962's PATH(m, D[n]) (section 2.1.1).
func auditPath(m int, leaves [][]byte) [][]byte {
	if len(leaves) <= 1 {
		return nil
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	if m < k {
		return append(auditPath(m, leaves[:k]), mth(leaves[k:]))
	}
	return append(auditPath(m-k, leaves[k:]), mth(leaves[:k]))
}

// proof is an inclusion proof of body as leaf 5 of a tree of 7, with the
// checkpoint the log signs for that tree.
func (f *Sigstore) proof(t testing.TB, body []byte, o Opts) map[string]any {
	leaves := make([][]byte, 7)
	for i := range leaves {
		leaves[i] = []byte("entry " + strconv.Itoa(i))
	}
	const index = 5
	leaves[index] = body
	root, path := mth(leaves), auditPath(index, leaves)
	if o.TamperPath {
		path[1] = bytes.Clone(path[1])
		path[1][0] ^= 1
	}
	if o.WrongRoot {
		root = mth(leaves[:6])
	}
	hashes := []any{}
	for _, h := range path {
		hashes = append(hashes, b64(h))
	}
	origin := "rekor.test"
	if !o.V2 {
		origin += " - 1193050959916656506"
	}
	return map[string]any{"logIndex": strconv.Itoa(index), "treeSize": strconv.Itoa(len(leaves)), "rootHash": b64(root), "hashes": hashes,
		"checkpoint": map[string]any{"envelope": f.Checkpoint(t, origin, uint64(len(leaves)), root, o.CheckpointKey)}}
}

// Checkpoint is a signed note of a tree head, as Rekor signs it: by key
// (nil: the log's), its key hint the first 4 bytes of the SHA-256 of the
// key's PKIX encoding.
func (f *Sigstore) Checkpoint(t testing.TB, origin string, size uint64, root []byte, key *ecdsa.PrivateKey) string {
	if key == nil {
		key = f.LogKey
	}
	text := origin + "\n" + strconv.FormatUint(size, 10) + "\n" + b64(root) + "\n"
	sum := sha256.Sum256([]byte(text))
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	hint := sha256.Sum256(der)
	return text + "\n\u2014 rekor.test " + b64(append(hint[:4:4], sig...)) + "\n"
}

// Object identifiers of an RFC 3161 token.
var (
	oidSignedData    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidTSTInfo       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 1, 4}
	oidContentType   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	oidMessageDigest = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
	oidSHA256        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidECDSASHA256   = asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
)

// Timestamp is a DER RFC 3161 TimeStampResp by the fixture's TSA (signed
// by key; nil: the TSA's) stamping the SHA-256 of of at the time at, its
// certificate in the token.
func (f *Sigstore) Timestamp(t testing.TB, of []byte, at time.Time, key *ecdsa.PrivateKey) []byte {
	if key == nil {
		key = f.TSAKey
	}
	imprint := sha256.Sum256(of)
	var info cryptobyte.Builder
	info.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1Int64(1)
		b.AddASN1ObjectIdentifier(asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 2})
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oidSHA256); b.AddASN1NULL() })
			b.AddASN1OctetString(imprint[:])
		})
		b.AddASN1Int64(7)
		b.AddASN1(cbasn1.GeneralizedTime, func(b *cryptobyte.Builder) { b.AddBytes([]byte(at.UTC().Format("20060102150405.999Z"))) })
	})
	tst := info.BytesOrPanic()
	digest := sha256.Sum256(tst)
	attrs := func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1ObjectIdentifier(oidContentType)
			b.AddASN1(cbasn1.SET, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oidTSTInfo) })
		})
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1ObjectIdentifier(oidMessageDigest)
			b.AddASN1(cbasn1.SET, func(b *cryptobyte.Builder) { b.AddASN1OctetString(digest[:]) })
		})
	}
	var signedAttrs cryptobyte.Builder
	signedAttrs.AddASN1(cbasn1.SET, attrs)
	sum := sha256.Sum256(signedAttrs.BytesOrPanic())
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	var resp cryptobyte.Builder
	resp.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1Int64(0) })
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1ObjectIdentifier(oidSignedData)
			b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					b.AddASN1Int64(3)
					b.AddASN1(cbasn1.SET, func(b *cryptobyte.Builder) {
						b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oidSHA256) })
					})
					b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
						b.AddASN1ObjectIdentifier(oidTSTInfo)
						b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) { b.AddASN1OctetString(tst) })
					})
					b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes(f.TSA.Raw) })
					b.AddASN1(cbasn1.SET, func(b *cryptobyte.Builder) {
						b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
							b.AddASN1Int64(1)
							b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
								b.AddBytes(f.TSA.RawIssuer)
								b.AddASN1BigInt(f.TSA.SerialNumber)
							})
							b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oidSHA256) })
							b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), attrs)
							b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oidECDSASHA256) })
							b.AddASN1OctetString(sig)
						})
					})
				})
			})
		})
	})
	return resp.BytesOrPanic()
}
