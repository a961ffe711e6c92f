// Command image assembles the edge-mcp container image from a release
// binary and the Dockerfile's final stage (internal/ociimage), checks its
// config and writes it as an image archive for `podman load -i` or
// `docker load -i`. CI uses it because its sandbox has no container engine
// that can pull the Dockerfile's base images.
//
//	go run ./internal/cmd/image --binary bin/release/edge-mcp-linux-amd64 --out bin/edge-mcp-image.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/edge-mcp/edge-mcp/internal/ociimage"
)

func main() {
	bin := flag.String("binary", "bin/release/edge-mcp-linux-amd64", "the static release binary")
	arch := flag.String("arch", runtime.GOARCH, "its GOARCH")
	dockerfile := flag.String("dockerfile", "Dockerfile", "the Dockerfile whose final stage the image follows")
	version := flag.String("version", "dev", "VERSION build argument (label org.opencontainers.image.version)")
	commit := flag.String("commit", "unknown", "COMMIT build argument (label org.opencontainers.image.revision)")
	cacerts := flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to include (\"\": none)")
	out := flag.String("out", "bin/edge-mcp-image.tar", "where the image archive goes")
	flag.Parse()
	if err := build(*bin, *arch, *dockerfile, *version, *commit, *cacerts, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(bin, arch, dockerfile, version, commit, cacerts, out string) error {
	f, err := os.Open(dockerfile)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := ociimage.ParseDockerfile(f, map[string]string{"VERSION": version, "COMMIT": commit})
	if err != nil {
		return err
	}
	in := ociimage.Inputs{Arch: arch}
	if in.Binary, err = os.ReadFile(bin); err != nil {
		return err
	}
	if cacerts != "" {
		if in.CACerts, err = os.ReadFile(cacerts); err != nil {
			return err
		}
	}
	img, err := ociimage.Build(st, in)
	if err != nil {
		return err
	}
	if err := ociimage.Check(img, ociimage.Release); err != nil {
		return fmt.Errorf("the image fails its checks:\n%w", err)
	}
	tag, err := name.NewTag("edge-mcp:" + version)
	if err != nil {
		tag, _ = name.NewTag("edge-mcp:dev")
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	d, _ := img.Digest()
	fmt.Printf("image %s (%s, base %s stood in for) written to %s; checks passed: user %s, entrypoint %v, no shell, labels, volume, port\n",
		tag, d, st.From, out, ociimage.Release.User, ociimage.Release.Entrypoint)
	return nil
}
