package ociwasm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
)

// module is the bytes pushed as a module: a Wasm header and a body, no
// need to compile here.
var module = append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte{0x42}, 1000)...)

// newRegistry starts an in-memory registry on loopback and returns its
// host:port.
func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func mustRef(t *testing.T, s string) Ref {
	t.Helper()
	r, err := ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newKey(t *testing.T) (*ecdsa.PrivateKey, *Keys) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	keys, err := ParseKeys(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	if err != nil {
		t.Fatal(err)
	}
	return k, keys
}

// pushLayout pushes module under tag in one of the accepted layouts, or
// a foreign one, with the test's own manifest writer.
func pushLayout(t *testing.T, ref Ref, configType string, layers ...blob) {
	t.Helper()
	repo, err := Options{}.repository(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := pushManifest(context.Background(), repo, configType, []byte("{}"), layers, ref.Tag); err != nil {
		t.Fatal(err)
	}
}

func layer(mediaType string, b []byte) blob {
	return blob{content.NewDescriptorFromBytes(mediaType, b), b}
}

func tarLayer(t *testing.T, name string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "etc/motd", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	tw.Write([]byte("hi"))
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
	tw.Write(b)
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// TestPullLayouts pulls the three accepted layouts and records the
// manifest digest a tag resolved to.
func TestPullLayouts(t *testing.T) {
	host := newRegistry(t)
	ctx := context.Background()
	cases := []struct {
		name string
		push func(Ref)
	}{
		{"cncf", func(r Ref) {
			if _, err := Push(ctx, module, r, Options{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"older-layer", func(r Ref) { pushLayout(t, r, ocispec.MediaTypeImageConfig, layer(MediaTypeWasmLayerOld, module)) }},
		{"image-plugin", func(r Ref) {
			pushLayout(t, r, ocispec.MediaTypeImageConfig, layer(ocispec.MediaTypeImageLayerGzip, tarLayer(t, "./plugin.wasm", module)))
		}},
		{"docker-image-plugin", func(r Ref) { pushDockerImage(t, r, tarLayer(t, "plugin.wasm", module)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := mustRef(t, "oci://"+host+"/policies/"+c.name+":v1")
			c.push(ref)
			a, err := Pull(ctx, ref, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Wasm, module) {
				t.Fatalf("pulled %d bytes, want the %d pushed", len(a.Wasm), len(module))
			}
			if a.Ref.Tag != "v1" || !strings.HasPrefix(a.Ref.Digest, "sha256:") {
				t.Fatalf("pulled ref %s: want the tag pinned to a digest", a.Ref)
			}
			// The pinned reference pulls the same bytes, by digest alone too.
			byDigest := a.Ref
			byDigest.Tag = ""
			for _, r := range []Ref{a.Ref, byDigest} {
				b, err := Pull(ctx, r, Options{})
				if err != nil || !bytes.Equal(b.Wasm, module) {
					t.Fatalf("pulling %s: %v", r, err)
				}
			}
		})
	}
}

// TestPullRefused covers what must be refused, with the reference and
// the reason in the error.
func TestPullRefused(t *testing.T) {
	host := newRegistry(t)
	ctx := context.Background()
	key, keys := newKey(t)
	_, otherKeys := newKey(t)

	big := mustRef(t, "oci://"+host+"/p/big:v1")
	if _, err := Push(ctx, bytes.Repeat([]byte{1}, 4096), big, Options{}); err != nil {
		t.Fatal(err)
	}
	foreign := mustRef(t, "oci://"+host+"/p/foreign:v1")
	pushLayout(t, foreign, ocispec.MediaTypeImageConfig, layer("application/vnd.example.thing", module))
	noPlugin := mustRef(t, "oci://"+host+"/p/noplugin:v1")
	pushLayout(t, noPlugin, ocispec.MediaTypeImageConfig, layer(ocispec.MediaTypeImageLayerGzip, tarLayer(t, "other.wasm", module)))
	index := mustRef(t, "oci://"+host+"/p/index:v1")
	{
		repo, _ := Options{}.repository(index)
		raw, _ := json.Marshal(ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}})
		raw = append(raw[:len(raw)-1], []byte(`,"schemaVersion":2}`)...)
		if err := repo.PushReference(ctx, content.NewDescriptorFromBytes(ocispec.MediaTypeImageIndex, raw), bytes.NewReader(raw), "v1"); err != nil {
			t.Fatal(err)
		}
	}
	moved := mustRef(t, "oci://"+host+"/p/moved:v1")
	first, err := Push(ctx, module, moved, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Push(ctx, append([]byte{}, module[:100]...), moved, Options{}); err != nil {
		t.Fatal(err)
	}
	signed := mustRef(t, "oci://"+host+"/p/signed:v1")
	pinned, err := Push(ctx, module, signed, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Sign(ctx, pinned, key, Options{}); err != nil {
		t.Fatal(err)
	}
	unsigned := mustRef(t, "oci://"+host+"/p/unsigned:v1")
	if _, err := Push(ctx, module, unsigned, Options{}); err != nil {
		t.Fatal(err)
	}
	// A signature by the trusted key, but of another manifest.
	elsewhere := mustRef(t, "oci://"+host+"/p/elsewhere:v1")
	ep, err := Push(ctx, append([]byte("x"), module...), elsewhere, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sign(ctx, ep, first.Digest, key, Options{}); err != nil {
		t.Fatal(err)
	}

	// A registry that accepts connections and never answers, and one
	// that is not there.
	slow, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	go func() {
		for {
			c, err := slow.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	gone, _ := net.Listen("tcp", "127.0.0.1:0")
	goneAddr := gone.Addr().String()
	gone.Close()

	cases := []struct {
		name   string
		ref    Ref
		o      Options
		is     error
		reason string
	}{
		{"too-large", big, Options{MaxBytes: 1024}, ErrTooLarge, "more than max_module_bytes 1024"},
		{"foreign-layer", foreign, Options{}, ErrMediaType, "application/vnd.example.thing"},
		{"image-without-plugin", noPlugin, Options{}, ErrMediaType, "no plugin.wasm"},
		{"index-manifest", index, Options{}, ErrMediaType, ocispec.MediaTypeImageIndex},
		{"tag-moved", moved.Pinned(first.Digest), Options{}, ErrTagMoved, "pinned " + first.Digest},
		{"digest-not-there", Ref{Registry: host, Repository: "p/moved", Digest: "sha256:" + strings.Repeat("0", 64)}, Options{}, nil, "not found"},
		{"unsigned", unsigned, Options{Keys: keys}, ErrUnsigned, "has none"},
		{"other-key", signed, Options{Keys: otherKeys}, ErrBadSignature, "not trusted"},
		{"signature-for-another-digest", elsewhere, Options{Keys: keys}, ErrBadSignature, "is for " + first.Digest},
		{"slow-registry", mustRef(t, "oci://"+slow.Addr().String()+"/p/x:v1"), Options{Timeout: 300 * time.Millisecond}, ErrUnreachable, "no answer within the timeout"},
		{"registry-down", mustRef(t, "oci://"+goneAddr+"/p/x:v1"), Options{}, ErrUnreachable, "connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := Pull(ctx, c.ref, c.o)
			if err == nil {
				t.Fatalf("pulled %s (%d bytes), want an error", a.Ref, len(a.Wasm))
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v: want %v", err, c.is)
			}
			if !strings.Contains(err.Error(), c.ref.String()) || !strings.Contains(err.Error(), c.reason) {
				t.Errorf("error %q: want the reference %s and %q", err, c.ref, c.reason)
			}
		})
	}
	// The trusted key's signature of the right manifest passes.
	a, err := Pull(ctx, signed, Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if a.SignedBy != KeyID(&key.PublicKey) {
		t.Fatalf("signed by %q, want %q", a.SignedBy, KeyID(&key.PublicKey))
	}
}

// TestCredentials pulls from a registry that wants basic auth, with the
// credentials of a Docker config.json.
func TestCredentials(t *testing.T) {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(basicAuth(h, "ci", "s3cret"))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"auths":{"`+host+`":{"auth":"Y2k6czNjcmV0"}}}`), 0o600) // ci:s3cret
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte(`{}`), 0o600)
	ref := mustRef(t, "oci://"+host+"/p/auth:v1")
	ctx := context.Background()
	if _, err := Push(ctx, module, ref, Options{DockerConfig: cfg}); err != nil {
		t.Fatal(err)
	}
	if _, err := Pull(ctx, ref, Options{DockerConfig: empty}); err == nil || !strings.Contains(err.Error(), "credential") {
		t.Fatalf("pull without credentials: %v, want a credential error", err)
	}
	a, err := Pull(ctx, ref, Options{DockerConfig: cfg})
	if err != nil || !bytes.Equal(a.Wasm, module) {
		t.Fatalf("pull with credentials: %v", err)
	}
}

func TestPlainHTTP(t *testing.T) {
	cases := []struct {
		registry string
		insecure []string
		want     bool
	}{
		{"127.0.0.1:5000", nil, true},
		{"localhost:5000", nil, true},
		{"[::1]:5000", nil, true},
		{"ghcr.io", nil, false},
		{"10.0.0.7:5000", nil, false},
		{"10.0.0.7:5000", []string{"10.0.0.7"}, true},
		{"reg.lan:5000", []string{"reg.lan:5000"}, true},
		{"reg.lan:5001", []string{"reg.lan:5000"}, false},
	}
	for _, c := range cases {
		t.Run(c.registry, func(t *testing.T) {
			if got := (Options{Insecure: c.insecure}).plainHTTP(c.registry); got != c.want {
				t.Fatalf("plainHTTP = %v, want %v", got, c.want)
			}
		})
	}
}

// TestTooLargeNotDownloaded: a layer the manifest declares larger than the
// cap is refused without a single request for it.
func TestTooLargeNotDownloaded(t *testing.T) {
	var blobGets atomic.Int32
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			blobGets.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ref := mustRef(t, "oci://"+strings.TrimPrefix(srv.URL, "http://")+"/p/big:v1")
	ctx := context.Background()
	if _, err := Push(ctx, bytes.Repeat([]byte{7}, 1<<20), ref, Options{}); err != nil {
		t.Fatal(err)
	}
	_, err := Pull(ctx, ref, Options{MaxBytes: 64 << 10})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1048576 bytes, more than max_module_bytes 65536") {
		t.Fatalf("pull: %v, want too large", err)
	}
	if n := blobGets.Load(); n != 0 {
		t.Fatalf("%d blob downloads for a refused layer, want 0", n)
	}
}

// pushDockerImage pushes a Docker schema 2 image of one layer.
func pushDockerImage(t *testing.T, ref Ref, tgz []byte) {
	t.Helper()
	ctx := context.Background()
	repo, err := Options{}.repository(ref)
	if err != nil {
		t.Fatal(err)
	}
	cfg := layer("application/vnd.docker.container.image.v1+json", []byte(`{"architecture":"amd64","os":"linux"}`))
	l := layer("application/vnd.docker.image.rootfs.diff.tar.gzip", tgz)
	for _, b := range []blob{cfg, l} {
		if err := pushBlob(ctx, repo, b); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaTypeDockerV2, "config": cfg.desc, "layers": []any{l.desc}})
	if err := repo.PushReference(ctx, content.NewDescriptorFromBytes(mediaTypeDockerV2, raw), bytes.NewReader(raw), ref.Tag); err != nil {
		t.Fatal(err)
	}
}

// TestImageLayerBomb: an image layer that inflates far beyond the cap
// without plugin.wasm is refused once the bound is read.
func TestImageLayerBomb(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	zeros := make([]byte, 1<<20)
	tw.WriteHeader(&tar.Header{Name: "filler", Mode: 0o644, Size: 8 << 20, Typeflag: tar.TypeReg})
	for range 8 {
		tw.Write(zeros)
	}
	tw.Close()
	zw.Close()
	_, err := extractPlugin(buf.Bytes(), ocispec.MediaTypeImageLayerGzip, 64<<10)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "inflates beyond") {
		t.Fatalf("extract: %v, want too large", err)
	}
}
