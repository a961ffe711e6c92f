package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

func parseRepoDockerfile(t *testing.T) *Stage {
	t.Helper()
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := ParseDockerfile(f, map[string]string{"VERSION": "v9.9.9", "COMMIT": "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestParseDockerfile(t *testing.T) {
	st := parseRepoDockerfile(t)
	if st.From != "gcr.io/distroless/static:nonroot" || st.User != "65532:65532" ||
		!slices.Equal(st.Entrypoint, []string{"/usr/local/bin/edge-mcp"}) || st.Cmd[0] != "serve" ||
		st.Labels["org.opencontainers.image.version"] != "v9.9.9" || st.Labels["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("final stage: %+v", st)
	}
	if _, err := ParseDockerfile(strings.NewReader("FROM scratch\nHEALTHCHECK CMD true\n"), nil); err == nil {
		t.Error("an instruction the image assembly does not know was accepted")
	}
}

var (
	binOnce []byte
	imgOnce v1.Image
)

// releaseBinary builds the static binary as the release task does.
func releaseBinary(t *testing.T) []byte {
	t.Helper()
	if binOnce != nil {
		return binOnce
	}
	out := filepath.Join(t.TempDir(), "edge-mcp")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "../../cmd/edge-mcp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building edge-mcp: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	binOnce = b
	return b
}

func releaseImage(t *testing.T) v1.Image {
	t.Helper()
	// The image is immutable (mutate makes new ones): TestCheck and
	// TestImageSmoke share one, and its layers are compressed once.
	if imgOnce != nil {
		return imgOnce
	}
	img, err := Build(parseRepoDockerfile(t), Inputs{Binary: releaseBinary(t), Arch: "amd64", CACerts: []byte("certs")})
	if err != nil {
		t.Fatal(err)
	}
	imgOnce = img
	return img
}

// The image made from the Dockerfile passes the release checks, and each
// check fails on an image that breaks it.
func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	img := releaseImage(t)
	if err := Check(img, Release); err != nil {
		t.Fatalf("the release image: %v", err)
	}
	shell, _ := layer([]file{{name: "/bin/sh", mode: 0o755, data: []byte("#!")}})
	withShell, _ := mutate.AppendLayers(img, shell)
	cf, _ := img.ConfigFile()
	edit := func(fn func(*v1.Config)) v1.Image {
		c := cf.DeepCopy()
		fn(&c.Config)
		out, err := mutate.ConfigFile(img, c)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	tests := []struct {
		name string
		img  v1.Image
		want string
	}{
		{"shell", withShell, "has a shell: /bin/sh"},
		{"root", edit(func(c *v1.Config) { c.User = "" }), "user"},
		{"entrypoint", edit(func(c *v1.Config) { c.Entrypoint = []string{"/bin/edge"} }), "entrypoint"},
		{"label", edit(func(c *v1.Config) { delete(c.Labels, "org.opencontainers.image.version") }), "label org.opencontainers.image.version"},
		{"volume", edit(func(c *v1.Config) { c.Volumes = nil }), "volume"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := Check(tc.img, Release); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// TestImageSmoke runs the image with buildah (Debian's, vfs storage in a
// folder of its own, chroot isolation: no daemon, no registry), as its
// config says: the entrypoint and command, the user, the environment,
// deploy/config.example.json at /etc/edge-mcp/config.json; only the
// listen address is moved to a free loopback port and the admin API
// turned off. A client calls a tool with the API key.
func TestImageSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the image")
	}
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		t.Skip("no buildah here (apt-get install buildah)")
	}
	if os.Geteuid() != 0 {
		t.Skip("buildah's chroot isolation needs root here")
	}
	img := releaseImage(t)
	dir := t.TempDir()
	archive := filepath.Join(dir, "image.tar")
	tag, _ := name.NewTag("edge-mcp:smoke")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	store := []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs"}
	bh := func(args ...string) string {
		out, err := exec.Command(buildah, append(slices.Clone(store), args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1]
	}
	bh("pull", "docker-archive:"+archive)
	ctr := bh("from", "edge-mcp:smoke")
	t.Cleanup(func() { exec.Command(buildah, append(slices.Clone(store), "rm", ctr)...).Run() })

	cf, _ := img.ConfigFile()
	c := cf.Config
	port := testenv.FreePort(t)
	const key = "smoke-key-0123456789"
	args := append(slices.Clone(store), "run", "--isolation", "chroot", "--network", "host", "--user", c.User,
		"-v", mustAbs(t, "../../deploy/config.example.json")+":/etc/edge-mcp/config.json:ro",
		"-e", "EDGE_MCP_API_KEY="+key, "-e", "EVERYTHING_URL="+testenv.StartEverythingServerHTTP(t))
	for _, e := range c.Env {
		args = append(args, "-e", e)
	}
	args = append(append(append(args, ctr, "--"), c.Entrypoint...), c.Cmd...)
	args = append(args, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--admin", "off")
	run := exec.Command(buildah, args...)
	var logs bytes.Buffer
	run.Stdout, run.Stderr = &logs, &logs
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-run.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { run.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("the container's output:\n%s", logs.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	testenv.WaitHTTP(t, base+"/healthz")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader("{}")); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the API key: %v %v, want 401", resp, err)
	}
	hc := &http.Client{Transport: bearer(key)}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "smoke", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("test_simple_text through the container: %v %+v", err, res)
	}
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
