package ociwasm

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm/sigstoretest"
)

// dsseBundle is a key-pair Sigstore bundle: a DSSE envelope of an in-toto
// statement about subjectHex, signed with key.
func dsseBundle(t *testing.T, key *ecdsa.PrivateKey, subjectHex string) []byte {
	t.Helper()
	stmt, _ := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": "module", "digest": map[string]string{"sha256": subjectHex}}},
		"predicateType": "https://sigstore.dev/cosign/sign/v1", "predicate": map[string]any{},
	})
	const pt = "application/vnd.in-toto+json"
	pae := "DSSEv1 " + strconv.Itoa(len(pt)) + " " + pt + " " + strconv.Itoa(len(stmt)) + " " + string(stmt)
	sum := sha256.Sum256([]byte(pae))
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{
		"mediaType":            MediaTypeBundle,
		"verificationMaterial": map[string]any{"publicKey": map[string]string{"hint": "test"}},
		"dsseEnvelope": map[string]any{"payload": base64.StdEncoding.EncodeToString(stmt), "payloadType": pt,
			"signatures": []any{map[string]string{"sig": base64.StdEncoding.EncodeToString(sig)}}},
	})
	return b
}

// attachBundle pushes bundle as a referrer of subject, the way cosign's
// BUNDLE_SPEC lays it out (sigstoretest.Attach, on ref's registry).
func attachBundle(t *testing.T, ref Ref, subject ocispec.Descriptor, bundle []byte) {
	t.Helper()
	sigstoretest.Attach(t, ref.Registry, ref.Repository, subject.Digest.String(), bundle)
}

// TestSigstoreBundles verifies key-pair Sigstore bundles attached as
// referrers, on a registry with the referrers API and on one without
// (oras falls back to the referrers tag).
func TestSigstoreBundles(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		t.Run("referrers-api="+strconv.FormatBool(referrers), func(t *testing.T) {
			srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(referrers)))
			t.Cleanup(srv.Close)
			host := strings.TrimPrefix(srv.URL, "http://")
			ctx := context.Background()
			key, keys := newKey(t)
			other, _ := newKey(t)
			push := func(name string, wasm []byte) (Ref, ocispec.Descriptor) {
				r, err := Push(ctx, wasm, mustRef(t, "oci://"+host+"/p/"+name+":v1"), Options{})
				if err != nil {
					t.Fatal(err)
				}
				repo, _ := Options{}.repository(r)
				desc, err := repo.Resolve(ctx, r.Digest)
				if err != nil {
					t.Fatal(err)
				}
				return r, desc
			}
			good, gd := push("good", module)
			attachBundle(t, good, gd, dsseBundle(t, key, gd.Digest.Encoded()))
			byOther, od := push("other", module)
			attachBundle(t, byOther, od, dsseBundle(t, other, od.Digest.Encoded()))
			elsewhere, ed := push("elsewhere", append([]byte("y"), module...))
			attachBundle(t, elsewhere, ed, dsseBundle(t, key, gd.Digest.Encoded()))

			a, err := Pull(ctx, good, Options{Keys: keys})
			if err != nil || a.SignedBy != KeyID(&key.PublicKey) {
				t.Fatalf("pull of a module with a good bundle: %v", err)
			}
			for _, c := range []struct {
				ref    Ref
				reason string
			}{
				{byOther, "not trusted"},
				{elsewhere, "is for " + gd.Digest.String()},
			} {
				_, err := Pull(ctx, c.ref, Options{Keys: keys})
				if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), c.reason) || !strings.Contains(err.Error(), c.ref.String()) {
					t.Errorf("pull %s: %v: want a bad signature, %q", c.ref, err, c.reason)
				}
			}
		})
	}
}
