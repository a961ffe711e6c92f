package store

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
)

// ociRegistry starts an in-memory registry on loopback; stop closes it.
func ociRegistry(t *testing.T) (host string, stop func()) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), srv.Close
}

func ociPush(t *testing.T, wasm []byte, ref string) ociwasm.Ref {
	t.Helper()
	r, err := ociwasm.ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := ociwasm.Push(context.Background(), wasm, r, ociwasm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pinned
}

// TestResolvePullPolicy: if_not_present uses the stored version without
// the registry; always follows a moved tag; a pinned digest that the tag
// no longer has is refused and the store keeps what it had.
func TestResolvePullPolicy(t *testing.T) {
	host, stop := ociRegistry(t)
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 0)
	ref := "oci://" + host + "/policies/redact:v1"
	first := ociPush(t, mod(1), ref)

	name, v, err := s.Resolve(ctx, ref, OCIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Source != first.String() || v.Digest != Digest(mod(1)) || v.UploadedBy != "oci" {
		t.Fatalf("version %+v: want source %s, digest of module 1", v, first)
	}
	for r, want := range map[string]bool{
		ref: true, first.String(): true, "oci://" + host + "/policies/redact@" + first.Digest: true,
		"oci://" + host + "/policies/redact:v2": false, "oci://" + host + "/policies/other:v1": false,
		"oci://" + host + "/policies/redact@sha256:" + strings.Repeat("0", 64): false, "redact": false,
	} {
		if v.Satisfies(r) != want {
			t.Errorf("version from %s satisfies %s: %v, want %v", v.Source, r, !want, want)
		}
	}
	ociPush(t, mod(2), ref) // the tag moves
	if _, v, err = s.Resolve(ctx, ref, OCIOptions{}); err != nil || v.Digest != Digest(mod(1)) {
		t.Fatalf("if_not_present: %+v, %v: want the stored module 1", v, err)
	}
	if _, v, err = s.Resolve(ctx, ref, OCIOptions{PullPolicy: PullAlways}); err != nil || v.Digest != Digest(mod(2)) {
		t.Fatalf("always: %+v, %v: want module 2", v, err)
	}
	if _, _, err = s.Resolve(ctx, first.String(), OCIOptions{PullPolicy: PullAlways}); !errors.Is(err, ociwasm.ErrTagMoved) {
		t.Fatalf("pinned to the old digest: %v, want %v", err, ociwasm.ErrTagMoved)
	}
	if m, _ := s.Get(name); m.Active.Digest != Digest(mod(2)) {
		t.Fatalf("active %s after a refused pull, want module 2", m.Active.Digest)
	}
	stop()
	if _, v, err = s.Resolve(ctx, ref, OCIOptions{}); err != nil || v.Digest != Digest(mod(2)) {
		t.Fatalf("registry down, if_not_present: %+v, %v: want the stored module 2", v, err)
	}
	if _, _, err = s.Resolve(ctx, ref, OCIOptions{PullPolicy: PullAlways}); !errors.Is(err, ociwasm.ErrUnreachable) || !strings.Contains(err.Error(), ref) {
		t.Fatalf("registry down, always: %v: want unreachable, naming %s", err, ref)
	}
}

// TestResolveStoresNothingRefused: a bad signature or a module the check
// refuses leaves no module and no blob.
func TestResolveStoresNothingRefused(t *testing.T) {
	host, _ := ociRegistry(t)
	ctx := context.Background()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&other.PublicKey)
	otherKeys, err := ociwasm.ParseKeys(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	if err != nil {
		t.Fatal(err)
	}
	ref := "oci://" + host + "/policies/signed:v1"
	pinned := ociPush(t, mod(1), ref)
	if err := ociwasm.Sign(ctx, pinned, key, ociwasm.Options{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, want string
		o          OCIOptions
	}{
		{"another-key", "not trusted", OCIOptions{Options: ociwasm.Options{Keys: otherKeys}}},
		{"check-refuses", "no edge_abi_version", OCIOptions{Check: func(b []byte) (string, error) {
			if !bytes.HasPrefix(b, []byte("\x00asm")) {
				return "", errors.New("not wasm")
			}
			return "", errors.New("no edge_abi_version export")
		}}},
		{"too-large", "max_module_bytes", OCIOptions{Options: ociwasm.Options{MaxBytes: 4}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, 0)
			_, _, err := s.Resolve(ctx, ref, c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), ref) {
				t.Fatalf("error %v: want %q naming %s", err, c.want, ref)
			}
			if len(s.List()) != 0 || len(blobFiles(t, dir)) != 0 {
				t.Fatalf("stored %d modules, blobs %v after a refused pull", len(s.List()), blobFiles(t, dir))
			}
		})
	}
}

func TestOCIName(t *testing.T) {
	a, _ := ociwasm.ParseRef("oci://ghcr.io/acme/redact:v1")
	b, _ := ociwasm.ParseRef("oci://ghcr.io/other/redact@sha256:" + strings.Repeat("0", 64))
	c, _ := ociwasm.ParseRef("oci://ghcr.io/acme/redact:v2")
	if OCIName(a) == OCIName(b) || OCIName(a) != OCIName(c) {
		t.Fatalf("names %s %s %s: want one per repository", OCIName(a), OCIName(b), OCIName(c))
	}
	if err := ValidName(OCIName(a)); err != nil {
		t.Fatal(err)
	}
}

// blobCounter counts the layer downloads (blob GETs) a registry serves.
type blobCounter struct {
	h http.Handler
	n atomic.Int64
}

func (c *blobCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
		c.n.Add(1)
	}
	c.h.ServeHTTP(w, r)
}

// TestResolveAlwaysUnchangedDigest: with pull policy always, a reference
// whose manifest did not change is not downloaded again; a moved tag is.
// A stored version verified with a key no longer trusted is pulled again
// (and refused) even under if_not_present.
func TestResolveAlwaysUnchangedDigest(t *testing.T) {
	c := &blobCounter{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	s := openStore(t, t.TempDir(), 0)
	ref := "oci://" + host + "/policies/redact:v1"
	pinned := ociPush(t, mod(1), ref)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err := ociwasm.Sign(ctx, pinned, key, ociwasm.Options{}); err != nil {
		t.Fatal(err)
	}
	keys := func(k *ecdsa.PrivateKey) *ociwasm.Keys {
		der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		ks, err := ociwasm.ParseKeys(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	always := OCIOptions{PullPolicy: PullAlways, Options: ociwasm.Options{Keys: keys(key)}}
	if _, v, err := s.Resolve(ctx, ref, always); err != nil || v.Digest != Digest(mod(1)) {
		t.Fatalf("first pull: %+v, %v", v, err)
	}
	first := c.n.Load()
	for range 3 {
		if _, v, err := s.Resolve(ctx, ref, always); err != nil || v.Digest != Digest(mod(1)) {
			t.Fatalf("again: %+v, %v", v, err)
		}
	}
	if got := c.n.Load(); got != first {
		t.Fatalf("unchanged digest: %d blob downloads after the first pull's %d, want none", got-first, first)
	}
	ociPush(t, mod(2), ref) // the tag moves, unsigned
	if _, _, err := s.Resolve(ctx, ref, always); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("moved tag, unsigned: %v, want a signature error", err)
	}
	if _, v, err := s.Resolve(ctx, ref, OCIOptions{PullPolicy: PullAlways}); err != nil || v.Digest != Digest(mod(2)) {
		t.Fatalf("moved tag: %+v, %v: want module 2", v, err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, _, err := s.Resolve(ctx, ref, OCIOptions{Options: ociwasm.Options{Keys: keys(other)}}); err == nil {
		t.Fatal("stored unsigned version used where another key is required")
	}
}
