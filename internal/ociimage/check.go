package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Want is what Check requires of the image.
type Want struct {
	User       string   // "65532:65532"
	Entrypoint []string // ["/usr/local/bin/edge-mcp"]
	Labels     []string // label keys that must be set and not empty
	Volume     string   // a declared volume the user owns
	Port       string   // "8080/tcp"
}

// Release is what the release image must be.
var Release = Want{
	User:       "65532:65532",
	Entrypoint: []string{"/usr/local/bin/edge-mcp"},
	Labels: []string{"org.opencontainers.image.title", "org.opencontainers.image.source",
		"org.opencontainers.image.version", "org.opencontainers.image.revision"},
	Volume: "/var/lib/edge-mcp",
	Port:   "8080/tcp",
}

// shells are the names of programs that would let a container be entered
// with a command line.
var shells = []string{"sh", "bash", "ash", "dash", "zsh", "busybox", "toybox"}

// Check verifies img's config and files against w: the user, the
// entrypoint (an executable file of the image), the labels, the volume
// (owned by the user), the port, and that no shell is in the image. It
// returns every problem at once.
func Check(img v1.Image, w Want) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("reading the image config: %w", err)
	}
	c := cf.Config
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.User != w.User {
		bad("user %q, want %q", c.User, w.User)
	}
	if !slices.Equal(c.Entrypoint, w.Entrypoint) {
		bad("entrypoint %q, want %q", c.Entrypoint, w.Entrypoint)
	}
	for _, k := range w.Labels {
		if c.Labels[k] == "" {
			bad("label %s missing", k)
		}
	}
	if _, ok := c.Volumes[w.Volume]; !ok {
		bad("volume %s not declared (have %v)", w.Volume, c.Volumes)
	}
	if _, ok := c.ExposedPorts[w.Port]; !ok {
		bad("port %s not exposed (have %v)", w.Port, c.ExposedPorts)
	}
	files, err := listFiles(img)
	if err != nil {
		return err
	}
	if len(w.Entrypoint) > 0 {
		if h, ok := files[w.Entrypoint[0]]; !ok || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
			bad("entrypoint %s is not an executable file of the image", w.Entrypoint[0])
		}
	}
	if h, ok := files[w.Volume]; !ok || fmt.Sprintf("%d:%d", h.Uid, h.Gid) != w.User {
		bad("volume %s is not a folder of user %s", w.Volume, w.User)
	}
	for name, h := range files {
		if slices.Contains(shells, path.Base(name)) && h.Typeflag != tar.TypeDir {
			bad("the image has a shell: %s", name)
		}
	}
	return errors.Join(errs...)
}

// listFiles returns the headers of the image's flattened file system, by
// absolute path.
func listFiles(img v1.Image) (map[string]*tar.Header, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the image's files: %w", err)
		}
		files["/"+strings.Trim(h.Name, "/")] = h
	}
}
