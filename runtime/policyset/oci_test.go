package policyset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// ociServer is an in-memory OCI registry on loopback that counts the
// layer downloads (blob GETs) it serves.
type ociServer struct {
	*httptest.Server
	h     http.Handler
	blobs atomic.Int64
}

func newOCIServer(t *testing.T) *ociServer {
	t.Helper()
	s := &ociServer{h: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			s.blobs.Add(1)
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

func activeDigest(t *testing.T, p *Set, name string) string {
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
