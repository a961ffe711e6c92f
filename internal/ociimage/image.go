package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Inputs are what the image is made of besides the Dockerfile.
type Inputs struct {
	Binary []byte // the release binary (linux, static), the build stage's /out/edge-mcp
	Arch   string // its GOARCH
	// CACerts is the CA bundle distroless ships (the build machine's
	// /etc/ssl/certs/ca-certificates.crt); nil leaves it out.
	CACerts []byte
}

// baseEnv is what distroless static sets before the Dockerfile's ENV.
var baseEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}

// epoch is the time of every file and of the image: builds are
// reproducible.
var epoch = time.Unix(0, 0).UTC()

// Build assembles the image of st from in.
func Build(st *Stage, in Inputs) (v1.Image, error) {
	if len(in.Binary) == 0 {
		return nil, errors.New("image: no binary")
	}
	base, err := layer(baseFiles(in.CACerts))
	if err != nil {
		return nil, err
	}
	var files []file
	for _, c := range st.Copies {
		uid, gid, err := owner(c.Chown)
		if err != nil {
			return nil, fmt.Errorf("COPY %s: %w", c.Src, err)
		}
		switch c.Src {
		case "/out/edge-mcp":
			files = append(files, file{name: c.Dst, mode: 0o755, data: in.Binary, uid: uid, gid: gid})
		case "/out/state": // mkdir -p /out/state/cache in the build stage
			files = append(files, file{name: c.Dst, dir: true, mode: 0o755, uid: uid, gid: gid},
				file{name: path.Join(c.Dst, "cache"), dir: true, mode: 0o755, uid: uid, gid: gid})
		default:
			return nil, fmt.Errorf("COPY %s: a source internal/ociimage does not know", c.Src)
		}
	}
	app, err := layer(files)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, base, app)
	if err != nil {
		return nil, err
	}
	cfg := &v1.ConfigFile{Architecture: in.Arch, OS: "linux", Created: v1.Time{Time: epoch}, Config: v1.Config{
		User: st.User, Env: append(slices.Clone(baseEnv), st.Env...), Entrypoint: st.Entrypoint, Cmd: st.Cmd,
		Labels: st.Labels, Volumes: set(st.Volumes), ExposedPorts: set(st.Expose), WorkingDir: "/",
	}}
	cfg.RootFS.Type = "layers"
	for _, l := range []v1.Layer{base, app} {
		d, err := l.DiffID()
		if err != nil {
			return nil, err
		}
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, d)
	}
	return mutate.ConfigFile(img, cfg)
}

// baseFiles stand in for distroless static:nonroot.
func baseFiles(caCerts []byte) []file {
	fs := []file{
		{name: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "/tmp", dir: true, mode: 0o1777},
		{name: "/home/nonroot", dir: true, mode: 0o700, uid: 65532, gid: 65532},
	}
	if caCerts != nil {
		fs = append(fs, file{name: "/etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: caCerts})
	}
	return fs
}

func set(xs []string) map[string]struct{} {
	if len(xs) == 0 {
		return nil
	}
	m := make(map[string]struct{}, len(xs))
	for _, x := range xs {
		m[x] = struct{}{}
	}
	return m
}

func owner(chown string) (int, int, error) {
	if chown == "" {
		return 0, 0, nil
	}
	u, g, _ := strings.Cut(chown, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("--chown=%s: want numeric UID:GID", chown)
	}
	return uid, gid, nil
}

// file is one entry of a layer.
type file struct {
	name     string
	dir      bool
	mode     int64
	data     []byte
	uid, gid int
}

// layer makes an uncompressed-tar layer of files, with their parent
// folders (root's, 0755) first.
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	done := map[string]bool{}
	var parents func(string) error
	parents = func(dir string) error {
		if dir == "/" || done[dir] {
			return nil
		}
		if err := parents(path.Dir(dir)); err != nil {
			return err
		}
		done[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
	}
	for _, f := range files {
		if err := parents(path.Dir(f.name)); err != nil {
			return nil, err
		}
		h := &tar.Header{Name: strings.TrimPrefix(f.name, "/"), Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: epoch, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			done[f.name] = true
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
