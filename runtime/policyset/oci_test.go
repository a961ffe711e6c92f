package policyset

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// ociServer is an in-memory OCI registry on loopback that counts the
// layer downloads (blob GETs) it serves.
type ociServer struct {
	*httptest.Server
	h                http.Handler
	blobs, manifests atomic.Int64
}

func newOCIServer(t *testing.T) *ociServer {
	t.Helper()
	s := &ociServer{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			s.blobs.Add(1)
		}
		if strings.Contains(r.URL.Path, "/manifests/") {
			s.manifests.Add(1)
		}
		s.h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *ociServer) host() string { return strings.TrimPrefix(s.URL, "http://") }

func (s *ociServer) push(t *testing.T, wasm []byte, ref string) {
	t.Helper()
	r, err := ociwasm.ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ociwasm.Push(context.Background(), wasm, r, ociwasm.Options{}); err != nil {
		t.Fatal(err)
	}
}

// withSection appends a custom section to a module: another valid module
// with another digest.
func withSection(wasm []byte, name string) []byte {
	body := append([]byte{byte(len(name))}, name...)
	return append(append(append([]byte{}, wasm...), 0, byte(len(body))), body...)
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func openSet(t *testing.T, stateDir string, reg *config.Admin, specs ...policy.Spec) (*Set, error) {
	t.Helper()
	cache, err := wasmtest.CompileCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	p := &Set{}
	err = p.Open(Options{Log: slog.New(slog.DiscardHandler), CacheDir: cache, StateDir: stateDir, Admin: reg}, specs)
	if err == nil {
		t.Cleanup(func() { p.Close() })
	}
	return p, err
}

func activeDigest(t testing.TB, p *Set, name string) string {
	t.Helper()
	_, infos := p.Policies()
	for _, in := range infos {
		if in.Spec.Name == name {
			return in.Digest
		}
	}
	t.Fatalf("policy %q not active", name)
	return ""
}

// TestOCIModuleInConfig: a policy whose module is an oci:// reference is
// pulled from a real registry, checked, cached by digest in the state
// folder and loaded; a rebuild with the digest unchanged downloads
// nothing, even with pull policy always; a moved tag is followed under
// always; a restart with the registry down loads the cached module; a
// reference the registry does not have fails naming it, storing nothing.
func TestOCIModuleInConfig(t *testing.T) {
	wasm := wasmtest.Port(t, "c")
	reg := newOCIServer(t)
	ref := "oci://" + reg.host() + "/policies/redact:v1"
	reg.push(t, wasm, ref)
	state := t.TempDir()
	sp := policy.Spec{Name: "redact", Module: ref}

	p, err := openSet(t, state, &config.Admin{}, sp)
	if err != nil {
		t.Fatal(err)
	}
	if got := activeDigest(t, p, "redact"); got != digestOf(wasm) {
		t.Fatalf("active digest %s, want the pushed module's %s", got, digestOf(wasm))
	}
	pulled := reg.blobs.Load()
	if pulled == 0 {
		t.Fatal("no layer downloaded")
	}

	always := &config.Admin{PullPolicy: "always"}
	rebuild := func(a *config.Admin, specs ...policy.Spec) error {
		p.Lock()
		defer p.Unlock()
		pg, err := p.BuildLocked(context.Background(), specs, a)
		if err != nil {
			return err
		}
		p.CommitLocked(specs, pg)
		return nil
	}
	sp.OnError = "allow" // another attachment of the same reference
	for _, a := range []*config.Admin{{}, always} {
		if err := rebuild(a, sp); err != nil {
			t.Fatal(err)
		}
	}
	if got := reg.blobs.Load(); got != pulled {
		t.Fatalf("rebuilds with an unchanged digest downloaded %d layers, want none", got-pulled)
	}

	moved := withSection(wasm, "v2")
	reg.push(t, moved, ref)
	if err := rebuild(&config.Admin{}, sp); err != nil || activeDigest(t, p, "redact") != digestOf(wasm) {
		t.Fatalf("if_not_present after the tag moved: %v; want the cached module", err)
	}
	if err := rebuild(always, sp); err != nil || activeDigest(t, p, "redact") != digestOf(moved) {
		t.Fatalf("always after the tag moved: %v; want the moved module", err)
	}

	missing := policy.Spec{Name: "gone", Module: "oci://" + reg.host() + "/policies/none:v1"}
	err = rebuild(&config.Admin{}, sp, missing)
	if err == nil || !strings.Contains(err.Error(), missing.Module) || !strings.Contains(err.Error(), `policy "gone"`) {
		t.Fatalf("missing reference: %v; want an error naming the policy and %s", err, missing.Module)
	}
	if activeDigest(t, p, "redact") != digestOf(moved) || len(p.Store().List()) != 1 {
		t.Fatalf("after a failed pull: %d modules stored; want the running generation untouched", len(p.Store().List()))
	}
	p.Close()

	reg.Close()
	p2, err := openSet(t, state, &config.Admin{}, sp)
	if err != nil {
		t.Fatalf("restart with the registry down: %v; want the cached module", err)
	}
	if got := activeDigest(t, p2, "redact"); got != digestOf(moved) {
		t.Fatalf("restart: active %s, want the cached %s", got, digestOf(moved))
	}
	if _, err := openSet(t, "", &config.Admin{}, sp); err == nil || !strings.Contains(err.Error(), "admin.state_dir") {
		t.Fatalf("without a state folder: %v; want an error naming admin.state_dir", err)
	}
}

// TestOCIModuleFleetPullsOnce: three replicas of a fleet (in-process
// NATS) start together with the same oci:// policy: one pulls from the
// registry, the others take its bytes from the fleet's object store; a
// fourth starts with the registry gone and loads the fleet's copy. A
// replica that requires a signature the fleet's pull was not verified with
// does not use it.
func TestOCIModuleFleetPullsOnce(t *testing.T) {
	wasm := wasmtest.Port(t, "c")
	reg := newOCIServer(t)
	ref := "oci://" + reg.host() + "/policies/redact:v1"
	reg.push(t, wasm, ref)
	pushed := reg.manifests.Load()
	nats := natstest.Start(t)
	sp := policy.Spec{Name: "redact", Module: ref}
	replica := func(name string, a *config.Admin) (*Set, error) {
		cfg := &config.Config{Listen: "127.0.0.1:0", Cluster: &config.Cluster{NatsURL: nats.ClientURL(), Name: "t",
			Replica: name, Secrets: []string{"0123456789abcdef0123456789abcdef"}, AllowAnonymousNATS: true}}
		fl, err := fleet.New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		cache, _ := wasmtest.CompileCacheDir()
		p := &Set{}
		err = p.Open(Options{Log: slog.New(slog.DiscardHandler), CacheDir: cache, StateDir: t.TempDir(), Admin: a, Fleet: fl}, []policy.Spec{sp})
		if err == nil {
			t.Cleanup(func() { p.Close() })
		}
		return p, err
	}

	sets := make([]*Set, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range sets {
		wg.Go(func() { sets[i], errs[i] = replica(fmt.Sprintf("r%d", i), &config.Admin{}) })
	}
	wg.Wait()
	for i, p := range sets {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if got := activeDigest(t, p, "redact"); got != digestOf(wasm) {
			t.Fatalf("replica %d: active %s, want %s", i, got, digestOf(wasm))
		}
	}
	if b, m := reg.blobs.Load(), reg.manifests.Load()-pushed; b != 1 || m != 1 {
		t.Fatalf("three replicas made %d manifest and %d blob requests to the registry; want one pull (1 and 1)", m, b)
	}

	reg.Close()
	p, err := replica("r3", &config.Admin{})
	if err != nil {
		t.Fatalf("a replica starting with the registry down: %v; want the fleet's copy", err)
	}
	if got := activeDigest(t, p, "redact"); got != digestOf(wasm) {
		t.Fatalf("replica r3: active %s, want %s", got, digestOf(wasm))
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	signed := &config.Admin{RequireSignature: []config.SignatureRule{{Prefix: reg.host(),
		CosignKeys: []string{string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}}}}
	if _, err := replica("r4", signed); err == nil || !strings.Contains(err.Error(), ref) {
		t.Fatalf("a replica requiring a signature: %v; want the unsigned fleet copy refused, naming %s", err, ref)
	}
}
