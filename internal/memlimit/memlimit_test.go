package memlimit

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// fakeCgroup points the package at a temporary cgroup tree holding files
// (path relative to the root → contents) and a /proc/self/cgroup naming
// self, and restores the memory limit after the test.
func fakeCgroup(t *testing.T, self string, files map[string]string, env string) {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proc := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(proc, []byte("0::"+self+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oldRoot, oldProc, oldGetenv := cgroupRoot, procCgroup, getenv
	cgroupRoot, procCgroup = root, proc
	getenv = func(k string) string {
		if k == "GOMEMLIMIT" {
			return env
		}
		return ""
	}
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		cgroupRoot, procCgroup, getenv = oldRoot, oldProc, oldGetenv
		debug.SetMemoryLimit(prev)
	})
}

func TestApply(t *testing.T) {
	const unit = "/system.slice/edge-mcp.service"
	tests := []struct {
		name       string
		configured int64
		self       string
		files      map[string]string
		env        string
		wantLimit  int64 // -1: the limit in force before, unchanged
		wantSource string
	}{
		{"configured wins over the cgroup", 50 << 20, "/", map[string]string{"memory.max": "104857600\n"}, "", 50 << 20, SourceConfig},
		{"cgroup v2 at the root (container)", 0, "/", map[string]string{"memory.max": "104857600\n"}, "", 94371840, SourceCgroupV2},
		{"cgroup v2 of a systemd unit", 0, unit, map[string]string{
			"memory.max":                               "max\n",
			"system.slice/memory.max":                  "max\n",
			"system.slice/edge-mcp.service/memory.max": "67108864\n",
		}, "", 60397977, SourceCgroupV2},
		{"smallest limit among the ancestors", 0, unit, map[string]string{
			"system.slice/memory.max":                  "33554432\n",
			"system.slice/edge-mcp.service/memory.max": "max\n",
		}, "", 30198988, SourceCgroupV2},
		{"cgroup v1", 0, "/", map[string]string{"memory/memory.limit_in_bytes": "209715200\n"}, "", 188743680, SourceCgroupV1},
		{"cgroup v1 unlimited", 0, "/", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, "", -1, SourceDefault},
		{"cgroup v2 max", 0, "/", map[string]string{"memory.max": "max\n"}, "", -1, SourceDefault},
		{"no cgroup files", 0, "/", nil, "", -1, SourceDefault},
		{"unparsable file", 0, "/", map[string]string{"memory.max": "lots\n"}, "", -1, SourceDefault},
		{"GOMEMLIMIT is left alone", 0, "/", map[string]string{"memory.max": "104857600\n"}, "80MiB", -1, SourceGOMEMLIMIT},
		{"negative leaves the default", -1, "/", map[string]string{"memory.max": "104857600\n"}, "", -1, SourceDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeCgroup(t, tt.self, tt.files, tt.env)
			before := debug.SetMemoryLimit(-1)
			limit, source := Apply(tt.configured, slog.New(slog.DiscardHandler))
			want := tt.wantLimit
			if want == -1 {
				want = before
			}
			if limit != want || source != tt.wantSource {
				t.Errorf("Apply = %d, %q; want %d, %q", limit, source, want, tt.wantSource)
			}
			if got := debug.SetMemoryLimit(-1); got != want {
				t.Errorf("runtime memory limit = %d, want %d", got, want)
			}
		})
	}
}

func TestUnifiedPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0::/system.slice/edge-mcp.service\n", "/system.slice/edge-mcp.service"},
		{"12:memory:/docker/abc\n0::/\n", "/"},
		{"12:memory:/docker/abc\n", "/"},
		{"", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := unifiedPath([]byte(tt.in)); got != tt.want {
				t.Errorf("unifiedPath(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func ExampleApply() {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)

	// 0 would derive the limit from the cgroup; a configured size wins.
	limit, source := Apply(48<<20, slog.New(slog.DiscardHandler))
	fmt.Println(limit, source)
	// Output: 50331648 config
}
