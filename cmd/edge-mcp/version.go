package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/edge-mcp/edge-mcp/runtime/gateway"
)

// Set by the release build (go tool task release):
//
//	-ldflags "-X main.version=v1.2.3 -X main.commit=0123abc"
//
// Empty in other builds, which fall back to what the Go toolchain
// recorded (see buildInfoOf).
var (
	version string
	commit  string
)

// buildInfo is what `edge-mcp version` prints.
type buildInfo struct {
	Version   string // release version, e.g. v0.4.0-3-g0123abc
	Commit    string // git commit the binary was built from
	GoVersion string // toolchain, e.g. go1.26.8
	Tags      string // the -tags build setting, "" for none
	Platform  string // GOOS/GOARCH, with GOARM etc. when set
}

// buildInfoOf combines the link-time version and commit (either may be
// empty) with the toolchain's build information bi (nil when the binary has
// none). Without a link-time version the module version is used when it is
// a real one (go install module@version), else gateway.Version; without a
// link-time commit, the VCS revision the toolchain stamped, if any.
func buildInfoOf(bi *debug.BuildInfo, version, commit string) buildInfo {
	info := buildInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = gateway.Version
	}
	var revision, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "-tags":
			info.Tags = s.Value
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		case "GOARM", "GOARM64", "GOAMD64", "GO386":
			info.Platform += " " + s.Key + "=" + s.Value
		}
	}
	if info.Commit == "" && revision != "" {
		info.Commit = revision
		if modified == "true" {
			info.Commit += "-dirty"
		}
	}
	return info
}

// printVersion writes the build information of this binary.
// currentVersion is the version this binary reports everywhere: edge-mcp
// version, the banner and the serverInfo/clientInfo peers see.
func currentVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi)
}

// versionOf is the version of a binary built as bi says, with this
// binary's link-time version and commit.
func versionOf(bi *debug.BuildInfo) string { return buildInfoOf(bi, version, commit).Version }

func printVersion(w io.Writer) error {
	bi, _ := debug.ReadBuildInfo()
	info := buildInfoOf(bi, version, commit)
	orNone := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}
	_, err := fmt.Fprintf(w, "edge-mcp %s\ncommit:   %s\ngo:       %s\ntags:     %s\nplatform: %s\n",
		info.Version, orNone(info.Commit, "unknown"), info.GoVersion, orNone(info.Tags, "none"), info.Platform)
	if err != nil {
		return fmt.Errorf("writing the version: %w", err)
	}
	return nil
}
