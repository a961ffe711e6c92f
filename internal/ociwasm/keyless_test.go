package ociwasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm/sigstoretest"
)

// The fixture is sigstoretest's: a private Sigstore made in the test.
type bundleOpts = sigstoretest.Opts

const (
	testSAN    = sigstoretest.SAN
	testIssuer = sigstoretest.Issuer
)

var (
	t0          = sigstoretest.T0
	ecKey       = sigstoretest.ECKey
	newSigstore = sigstoretest.New
)

// TestVerifyKeyless: a keyless bundle verifies offline against a trusted
// root made in the test when the certificate chains to its CA at the time
// the log's signed entry timestamp proves, the log entry records this
// signature, and the identity and issuer match; each broken part is
// refused with its reason.
func TestVerifyKeyless(t *testing.T) {
	f := newSigstore(t)
	root, err := ParseTrustedRoot(f.TrustedRoot)
	if err != nil {
		t.Fatal(err)
	}
	manifest := []byte(`{"schemaVersion":2}`)
	sum := sha256.Sum256(manifest)
	key := ecKey(t)
	cert := f.Leaf(t, key, testSAN, testIssuer)
	ids := []Identity{{SAN: testSAN, Issuer: testIssuer}}
	other := newSigstore(t)
	otherKey := ecKey(t)
	cases := []struct {
		name   string
		bundle []byte
		ids    []Identity
		want   string // "" verifies
	}{
		{"verifies", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{}), ids, ""},
		{"identity by regexp", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{}),
			[]Identity{{SANRegexp: regexp.MustCompile(`^https://github\.com/acme/`), Issuer: testIssuer}}, ""},
		{"another identity", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{}),
			[]Identity{{SAN: "https://github.com/evil/x", Issuer: testIssuer}}, "no configured identity matches"},
		{"another issuer", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{}),
			[]Identity{{SAN: testSAN, Issuer: "https://accounts.google.com"}}, "no configured identity matches"},
		{"certificate of another CA", f.Bundle(t, key, other.Leaf(t, key, testSAN, testIssuer), sha256.Sum256(manifest), bundleOpts{}), ids, "certificate signed by unknown authority"},
		{"signed after the certificate expired", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{At: t0.Add(time.Hour)}), ids, "expired"},
		{"entry timestamp by another key", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{SETKey: otherKey}), ids, "does not verify with the log's key"},
		{"log not trusted", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{LogKeyID: make([]byte, 32)}), ids, "not a transparency log of the trusted root"},
		{"entry of another signature", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{BodySig: []byte("other")}), ids, "records another signature"},
		{"no log entry", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{NoEntry: true}), ids, "no transparency-log entry"},
		{"no entry timestamp", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{NoPromise: true}), ids, "neither a signed entry timestamp nor an inclusion proof"},
		{"inclusion proof and checkpoint", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{Proof: true}), ids, ""},
		{"tampered audit path", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{Proof: true, TamperPath: true}), ids, "does not lead to the checkpoint's root"},
		{"checkpoint of a tree without the entry", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{Proof: true, WrongRoot: true}), ids, "does not lead to the checkpoint's root"},
		{"checkpoint by another key", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{Proof: true, CheckpointKey: otherKey}), ids, "checkpoint is not signed by the log's key"},
		{"Rekor v2 entry without a timestamp", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{V2: true}), ids, "inclusion proofs only, which prove no time"},
		{"Rekor v2 entry, tampered audit path", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{V2: true, TamperPath: true}), ids, "does not lead to the checkpoint's root"},
		{"Rekor v2 entry of another signature", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{V2: true, BodySig: []byte("other")}), ids, "records another signature"},
		{"RFC 3161 timestamp besides the entry's", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{Stamp: true}), ids, ""},
		{"Rekor v2 entry and an RFC 3161 timestamp", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{V2: true, Stamp: true}), ids, ""},
		{"timestamp by another key", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{V2: true, Stamp: true, StampKey: otherKey}), ids, "no certificate of the token or the trusted root's authorities signed it"},
		{"timestamp of another signature", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{V2: true, Stamp: true, StampOf: []byte("other")}), ids, "stamps something else than the bundle's signature"},
		{"timestamp after the certificate expired", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{V2: true, Stamp: true, StampAt: t0.Add(time.Hour)}), ids, "expired"},
		{"timestamp outside the authority's validity", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{V2: true, Stamp: true, StampAt: t0.AddDate(6, 0, 0)}), ids, `signed by "test-tsa"`},
		{"certificate without an SCT", f.Bundle(t, key, f.LeafWith(t, key, testSAN, testIssuer, sigstoretest.LeafOpts{NoSCT: true}), sha256.Sum256(manifest), bundleOpts{}), ids, "the certificate embeds no SCT list"},
		{"SCT by another key", f.Bundle(t, key, f.LeafWith(t, key, testSAN, testIssuer, sigstoretest.LeafOpts{SCTKey: otherKey}), sha256.Sum256(manifest), bundleOpts{}), ids, "the signature does not verify with log"},
		{"SCT of another certificate", f.Bundle(t, key, f.LeafWith(t, key, testSAN, testIssuer, sigstoretest.LeafOpts{SCTOtherTBS: true}), sha256.Sum256(manifest), bundleOpts{}), ids, "the signature does not verify with log"},
		{"signature by another key", f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{SigKey: otherKey}), ids, "does not verify with the certificate's key"},
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
	if _, _, _, err := ParseBundle(f.Bundle(t, key, cert, sha256.Sum256(manifest), bundleOpts{})); err == nil || !strings.Contains(err.Error(), "keyless") {
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
	root, err := ParseTrustedRoot(f.TrustedRoot)
	if err != nil {
		t.Fatal(err)
	}
	key := ecKey(t)
	var d [32]byte
	raw, _ := hex.DecodeString(desc.Digest.Encoded())
	copy(d[:], raw)
	attachBundle(t, ref, desc, f.Bundle(t, key, f.Leaf(t, key, testSAN, testIssuer), d, bundleOpts{}))
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
	// A Rekor v2 bundle (inclusion proof, RFC 3161 timestamp) pulls; one
	// whose audit path is bent is refused naming the reference.
	for _, c := range []struct {
		repo string
		o    bundleOpts
		want string
	}{{"v2", bundleOpts{V2: true, Stamp: true}, ""}, {"v2-bent", bundleOpts{V2: true, Stamp: true, TamperPath: true}, "does not lead to the checkpoint's root"}} {
		r, err := Push(ctx, module, mustRef(t, "oci://"+strings.TrimPrefix(srv.URL, "http://")+"/p/"+c.repo+":v1"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		attachBundle(t, r, desc, f.Bundle(t, key, f.Leaf(t, key, testSAN, testIssuer), d, c.o))
		_, err = Pull(ctx, r, Options{Keys: (*Keys)(nil).WithKeyless(root, id)})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), r.String())) {
			t.Fatalf("pull %s: %v; want %q", r, err, c.want)
		}
	}
}

// FuzzVerifyKeyless: ParseTrustedRoot and VerifyKeyless never panic on
// any input, and whatever verifies against the fixture's root is about
// what the fixture signed.
func FuzzVerifyKeyless(f *testing.F) {
	var t testing.TB = f
	fx := newSigstore(t)
	root, err := ParseTrustedRoot(fx.TrustedRoot)
	if err != nil {
		f.Fatal(err)
	}
	key := ecKey(t)
	good := fx.Bundle(t, key, fx.Leaf(t, key, testSAN, testIssuer), sha256.Sum256([]byte("m")), bundleOpts{})
	f.Add(good)
	f.Add(fx.Bundle(t, key, fx.Leaf(t, key, testSAN, testIssuer), sha256.Sum256([]byte("m")), bundleOpts{Proof: true}))
	f.Add(fx.Bundle(t, key, fx.Leaf(t, key, testSAN, testIssuer), sha256.Sum256([]byte("m")), bundleOpts{V2: true}))
	f.Add(fx.TrustedRoot)
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

// BenchmarkVerifyKeyless: one keyless bundle with everything checked: a
// Rekor v1 entry's signed entry timestamp and inclusion proof to a signed
// checkpoint, an RFC 3161 timestamp, the Fulcio chain and its SCT; and
// one the public good instance made.
func BenchmarkVerifyKeyless(b *testing.B) {
	f := newSigstore(b)
	root, err := ParseTrustedRoot(f.TrustedRoot)
	if err != nil {
		b.Fatal(err)
	}
	key := ecKey(b)
	bundle := f.Bundle(b, key, f.Leaf(b, key, testSAN, testIssuer), sha256.Sum256([]byte("m")), bundleOpts{Proof: true, Stamp: true})
	ids := []Identity{{SAN: testSAN, Issuer: testIssuer}}
	b.Run("fixture", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := VerifyKeyless(bundle, root, ids); err != nil {
				b.Fatal(err)
			}
		}
	})
	pgRoot, _ := os.ReadFile("testdata/public-good/trusted_root.json")
	pg, _ := os.ReadFile("testdata/public-good/sigstore-js-provenance.sigstore.json")
	pgr, err := ParseTrustedRoot(pgRoot)
	if err != nil {
		b.Fatal(err)
	}
	pgIDs := []Identity{{SANRegexp: regexp.MustCompile(`^https://github\.com/sigstore/`), Issuer: "https://token.actions.githubusercontent.com"}}
	b.Run("public-good", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := VerifyKeyless(pg, pgr, pgIDs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestKeylessEntries: of a bundle's log entries, one of a log the trusted
// root does not list is skipped, but one of a listed log that does not
// verify refuses the bundle even when another verifies.
func TestKeylessEntries(t *testing.T) {
	f := newSigstore(t)
	root, err := ParseTrustedRoot(f.TrustedRoot)
	if err != nil {
		t.Fatal(err)
	}
	key := ecKey(t)
	cert := f.Leaf(t, key, testSAN, testIssuer)
	sum := sha256.Sum256([]byte("m"))
	entries := func(b []byte) []any {
		var j map[string]any
		json.Unmarshal(b, &j)
		return j["verificationMaterial"].(map[string]any)["tlogEntries"].([]any)
	}
	// withEntry is good with the first entry of other appended.
	good := f.Bundle(t, key, cert, sum, bundleOpts{Proof: true})
	withEntry := func(other []byte) []byte {
		var j map[string]any
		json.Unmarshal(good, &j)
		vm := j["verificationMaterial"].(map[string]any)
		vm["tlogEntries"] = append(vm["tlogEntries"].([]any), entries(other)[0])
		b, _ := json.Marshal(j)
		return b
	}
	ids := []Identity{{SAN: testSAN, Issuer: testIssuer}}
	if _, _, err := VerifyKeyless(withEntry(f.Bundle(t, key, cert, sum, bundleOpts{LogKeyID: make([]byte, 32)})), root, ids); err != nil {
		t.Fatalf("an entry of an unknown log beside a good one: %v", err)
	}
	_, _, err = VerifyKeyless(withEntry(f.Bundle(t, key, cert, sum, bundleOpts{Proof: true, TamperPath: true})), root, ids)
	if err == nil || !strings.Contains(err.Error(), "tlog entry 1") {
		t.Fatalf("a bad entry of the trusted log beside a good one: %v", err)
	}
}
