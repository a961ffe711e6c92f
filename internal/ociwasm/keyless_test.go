package ociwasm

import (
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
	"errors"
	"io"
	"log"
	"math/big"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// sigstoreFixture is a private Sigstore made in the test: a Fulcio-like CA
// (root and intermediate) and a Rekor-like log key, as a trusted root.
type sigstoreFixture struct {
	rootKey, interKey, logKey *ecdsa.PrivateKey
	root, inter               *x509.Certificate
	trustedRoot               []byte
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustCert(t testing.TB, tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
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

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func newSigstore(t testing.TB) *sigstoreFixture {
	f := &sigstoreFixture{rootKey: ecKey(t), interKey: ecKey(t), logKey: ecKey(t)}
	ca := func(n int64, cn string) *x509.Certificate {
		return &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: cn}, NotBefore: t0.AddDate(-1, 0, 0),
			NotAfter: t0.AddDate(5, 0, 0), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	var rootDER, interDER []byte
	f.root, rootDER = mustCert(t, ca(1, "test-fulcio-root"), ca(1, "test-fulcio-root"), &f.rootKey.PublicKey, f.rootKey)
	f.inter, interDER = mustCert(t, ca(2, "test-fulcio-intermediate"), f.root, &f.interKey.PublicKey, f.rootKey)
	logDER, _ := x509.MarshalPKIXPublicKey(&f.logKey.PublicKey)
	logID := sha256.Sum256(logDER)
	b64 := base64.StdEncoding.EncodeToString
	f.trustedRoot, _ = json.Marshal(map[string]any{
		"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
		"tlogs": []any{map[string]any{"baseUrl": "https://rekor.test", "hashAlgorithm": "SHA2_256",
			"publicKey": map[string]any{"rawBytes": b64(logDER), "keyDetails": "PKIX_ECDSA_P256_SHA_256"},
			"logId":     map[string]any{"keyId": b64(logID[:])}}},
		"certificateAuthorities": []any{map[string]any{"uri": "https://fulcio.test",
			"certChain": map[string]any{"certificates": []any{map[string]any{"rawBytes": b64(interDER)}, map[string]any{"rawBytes": b64(rootDER)}}}}},
	})
	return f
}

const (
	testSAN    = "https://github.com/acme/policies/.github/workflows/release.yml@refs/heads/main"
	testIssuer = "https://token.actions.githubusercontent.com"
)

// leaf issues a short-lived signing certificate for san and issuer, as
// Fulcio does, signed by the intermediate (or by signer's own CA).
func (f *sigstoreFixture) leaf(t testing.TB, key *ecdsa.PrivateKey, san, issuer string) []byte {
	u, _ := url.Parse(san)
	iss, _ := asn1.MarshalWithParams(issuer, "utf8")
	_, der := mustCert(t, &x509.Certificate{SerialNumber: big.NewInt(3), NotBefore: t0, NotAfter: t0.Add(10 * time.Minute),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}, URIs: []*url.URL{u},
		ExtraExtensions: []pkix.Extension{{Id: oidIssuerV2, Value: iss}}}, f.inter, &key.PublicKey, f.interKey)
	return der
}

// bundleOpts bends one part of a bundle.
type bundleOpts struct {
	at                 time.Time         // integrated time (zero: 2 minutes into the certificate)
	setKey             *ecdsa.PrivateKey // signs the entry timestamp (nil: the log's key)
	logKeyID           []byte            // nil: the trusted log's ID
	bodySig            []byte            // the signature the log records (nil: the bundle's)
	noEntry, noPromise bool
	sigKey             *ecdsa.PrivateKey // signs the manifest digest (nil: the certificate's key)
}

// bundle is a keyless message-signature bundle over manifest.
func (f *sigstoreFixture) bundle(t testing.TB, certKey *ecdsa.PrivateKey, certDER, manifest []byte, o bundleOpts) []byte {
	return f.bundleOf(t, certKey, certDER, sha256.Sum256(manifest), o)
}

// bundleOf is a keyless message-signature bundle over a manifest digest.
func (f *sigstoreFixture) bundleOf(t testing.TB, certKey *ecdsa.PrivateKey, certDER []byte, digest [32]byte, o bundleOpts) []byte {
	sk := certKey
	if o.sigKey != nil {
		sk = o.sigKey
	}
	sig, err := ecdsa.SignASN1(rand.Reader, sk, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	bodySig := sig
	if o.bodySig != nil {
		bodySig = o.bodySig
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
	body, _ := json.Marshal(map[string]any{"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": map[string]any{
		"data":      map[string]any{"hash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(digest[:])}},
		"signature": map[string]any{"content": b64(bodySig), "publicKey": map[string]any{"content": b64(certPEM)}}}})
	at := o.at
	if at.IsZero() {
		at = t0.Add(2 * time.Minute)
	}
	logDER, _ := x509.MarshalPKIXPublicKey(&f.logKey.PublicKey)
	id := sha256.Sum256(logDER)
	logID := id[:]
	if o.logKeyID != nil {
		logID = o.logKeyID
	}
	payload, _ := json.Marshal(setPayload{Body: b64(body), IntegratedTime: at.Unix(), LogID: hex.EncodeToString(logID), LogIndex: 42})
	ps := sha256.Sum256(payload)
	setKey := f.logKey
	if o.setKey != nil {
		setKey = o.setKey
	}
	set, _ := ecdsa.SignASN1(rand.Reader, setKey, ps[:])
	entry := map[string]any{"logIndex": "42", "logId": map[string]any{"keyId": b64(logID)}, "kindVersion": map[string]any{"kind": "hashedrekord", "version": "0.0.1"},
		"integratedTime": strconv.FormatInt(at.Unix(), 10), "canonicalizedBody": b64(body)}
	if !o.noPromise {
		entry["inclusionPromise"] = map[string]any{"signedEntryTimestamp": b64(set)}
	}
	entries := []any{entry}
	if o.noEntry {
		entries = nil
	}
	b, _ := json.Marshal(map[string]any{"mediaType": MediaTypeBundle,
		"verificationMaterial": map[string]any{"certificate": map[string]any{"rawBytes": b64(certDER)}, "tlogEntries": entries},
		"messageSignature":     map[string]any{"messageDigest": map[string]any{"algorithm": "SHA2_256", "digest": b64(digest[:])}, "signature": b64(sig)}})
	return b
}

// TestVerifyKeyless: a keyless bundle verifies offline against a trusted
// root made in the test when the certificate chains to its CA at the time
// the log's signed entry timestamp proves, the log entry records this
// signature, and the identity and issuer match; each broken part is
// refused with its reason.
func TestVerifyKeyless(t *testing.T) {
	f := newSigstore(t)
	root, err := ParseTrustedRoot(f.trustedRoot)
	if err != nil {
		t.Fatal(err)
	}
	manifest := []byte(`{"schemaVersion":2}`)
	sum := sha256.Sum256(manifest)
	key := ecKey(t)
	cert := f.leaf(t, key, testSAN, testIssuer)
	ids := []Identity{{SAN: testSAN, Issuer: testIssuer}}
	other := newSigstore(t)
	otherKey := ecKey(t)
	cases := []struct {
		name   string
		bundle []byte
		ids    []Identity
		want   string // "" verifies
	}{
		{"verifies", f.bundle(t, key, cert, manifest, bundleOpts{}), ids, ""},
		{"identity by regexp", f.bundle(t, key, cert, manifest, bundleOpts{}),
			[]Identity{{SANRegexp: regexp.MustCompile(`^https://github\.com/acme/`), Issuer: testIssuer}}, ""},
		{"another identity", f.bundle(t, key, cert, manifest, bundleOpts{}),
			[]Identity{{SAN: "https://github.com/evil/x", Issuer: testIssuer}}, "no configured identity matches"},
		{"another issuer", f.bundle(t, key, cert, manifest, bundleOpts{}),
			[]Identity{{SAN: testSAN, Issuer: "https://accounts.google.com"}}, "no configured identity matches"},
		{"certificate of another CA", f.bundle(t, key, other.leaf(t, key, testSAN, testIssuer), manifest, bundleOpts{}), ids, "certificate signed by unknown authority"},
		{"signed after the certificate expired", f.bundle(t, key, cert, manifest, bundleOpts{at: t0.Add(time.Hour)}), ids, "expired"},
		{"entry timestamp by another key", f.bundle(t, key, cert, manifest, bundleOpts{setKey: otherKey}), ids, "does not verify with the log's key"},
		{"log not trusted", f.bundle(t, key, cert, manifest, bundleOpts{logKeyID: make([]byte, 32)}), ids, "not a transparency log of the trusted root"},
		{"entry of another signature", f.bundle(t, key, cert, manifest, bundleOpts{bodySig: []byte("other")}), ids, "records another signature"},
		{"no log entry", f.bundle(t, key, cert, manifest, bundleOpts{noEntry: true}), ids, "no transparency-log entry"},
		{"no entry timestamp", f.bundle(t, key, cert, manifest, bundleOpts{noPromise: true}), ids, "no signed entry timestamp"},
		{"signature by another key", f.bundle(t, key, cert, manifest, bundleOpts{sigKey: otherKey}), ids, "does not verify with the certificate's key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			subjects, by, err := VerifyKeyless(c.bundle, root, c.ids)
			if c.want == "" {
				if err != nil || len(subjects) != 1 || subjects[0] != hex.EncodeToString(sum[:]) || by.Issuer != testIssuer {
					t.Fatalf("got %v, %v, %v; want the manifest's digest", subjects, by, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want %q", err, c.want)
			}
		})
	}
	if _, _, _, err := ParseBundle(f.bundle(t, key, cert, manifest, bundleOpts{})); err == nil || !strings.Contains(err.Error(), "keyless") {
		t.Fatalf("ParseBundle of a keyless bundle: %v", err)
	}
}

// TestKeylessFromRegistry: a module whose manifest carries a keyless
// bundle as a referrer is pulled with keyless rules only; its signer is
// the identity; a rule for another identity refuses it.
func TestKeylessFromRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	ref, err := Push(ctx, module, mustRef(t, "oci://"+strings.TrimPrefix(srv.URL, "http://")+"/p/keyless:v1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := Options{}.repository(ref)
	desc, err := repo.Resolve(ctx, ref.Digest)
	if err != nil {
		t.Fatal(err)
	}
	f := newSigstore(t)
	root, err := ParseTrustedRoot(f.trustedRoot)
	if err != nil {
		t.Fatal(err)
	}
	key := ecKey(t)
	var d [32]byte
	raw, _ := hex.DecodeString(desc.Digest.Encoded())
	copy(d[:], raw)
	attachBundle(t, ref, desc, f.bundleOf(t, key, f.leaf(t, key, testSAN, testIssuer), d, bundleOpts{}))
	id := Identity{SAN: testSAN, Issuer: testIssuer}
	a, err := Pull(ctx, ref, Options{Keys: (*Keys)(nil).WithKeyless(root, id)})
	if err != nil || a.SignedBy != id.String() {
		t.Fatalf("pull: %v, signed by %q; want %q", err, a.SignedBy, id)
	}
	if !slices.Contains((*Keys)(nil).WithKeyless(root, id).IDs(), a.SignedBy) {
		t.Fatal("the identity is not among the keys' IDs")
	}
	_, err = Pull(ctx, ref, Options{Keys: (*Keys)(nil).WithKeyless(root, Identity{SAN: "https://github.com/evil/x", Issuer: testIssuer})})
	if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "no configured identity matches") || !strings.Contains(err.Error(), ref.String()) {
		t.Fatalf("pull with another identity: %v", err)
	}
}

// FuzzVerifyKeyless: ParseTrustedRoot and VerifyKeyless never panic on
// any input, and whatever verifies against the fixture's root is about
// what the fixture signed.
func FuzzVerifyKeyless(f *testing.F) {
	var t testing.TB = f
	fx := newSigstore(t)
	root, err := ParseTrustedRoot(fx.trustedRoot)
	if err != nil {
		f.Fatal(err)
	}
	key := ecKey(t)
	good := fx.bundle(t, key, fx.leaf(t, key, testSAN, testIssuer), []byte("m"), bundleOpts{})
	f.Add(good)
	f.Add(fx.trustedRoot)
	f.Add([]byte(`{"verificationMaterial":{"certificate":{"rawBytes":"AAAA"},"tlogEntries":[{"logIndex":"x","inclusionPromise":{}}]}}`))
	ids := []Identity{{SAN: testSAN, Issuer: testIssuer}}
	sum := sha256.Sum256([]byte("m"))
	signed := hex.EncodeToString(sum[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseTrustedRoot(b)
		if subjects, _, err := VerifyKeyless(b, root, ids); err == nil && (len(subjects) != 1 || subjects[0] != signed) {
			t.Fatalf("verified a bundle about %v: %s", subjects, b)
		}
	})
}
