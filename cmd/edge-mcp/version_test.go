package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/runtime/gateway"
)

func TestBuildInfoOf(t *testing.T) {
	t.Parallel()
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	tests := []struct {
		name            string
		bi              *debug.BuildInfo
		version, commit string
		want            buildInfo
	}{
		{"release build", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("-tags", "netgo,osusergo", "vcs.revision", "ffff", "GOARM", "7")},
			"v0.4.0", "0123abc",
			buildInfo{Version: "v0.4.0", Commit: "0123abc", GoVersion: "go1.26.8", Tags: "netgo,osusergo", Platform: platform + " GOARM=7"}},
		{"plain build with VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "0123abc", "vcs.modified", "true")},
			"", "",
			buildInfo{Version: gateway.Version, Commit: "0123abc-dirty", GoVersion: "go1.26.8", Platform: platform}},
		{"go install module@version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1"}},
			"", "",
			buildInfo{Version: "v0.3.1", GoVersion: "go1.26.8", Platform: platform}},
		{"no build info", nil, "", "",
			buildInfo{Version: gateway.Version, GoVersion: runtime.Version(), Platform: platform}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildInfoOf(tt.bi, tt.version, tt.commit); got != tt.want {
				t.Errorf("buildInfoOf = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "edge-mcp ") || !strings.HasPrefix(lines[2], "go:       go1.") {
		t.Errorf("edge-mcp version printed:\n%s", out.String())
	}
}

// TestVersionLinkFlags builds the binary the way the release task does and
// checks that the -X flags and -tags reach `edge-mcp version`.
func TestVersionLinkFlags(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "edge-mcp")
	build := exec.Command("go", "build", "-trimpath", "-tags", "edgetest",
		"-ldflags", "-s -w -X main.version=v9.8.7-test -X main.commit=cafe123", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("edge-mcp version: %v\n%s", err, out)
	}
	for _, want := range []string{"edge-mcp v9.8.7-test\n", "commit:   cafe123\n", "tags:     edgetest\n", "go:       " + runtime.Version() + "\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
