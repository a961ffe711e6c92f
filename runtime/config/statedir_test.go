package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// The state folder of a config is derived from its path.
func TestStateDir(t *testing.T) {
	t.Parallel()
	base := "/state/edge-mcp"
	tests := []struct {
		name, a, b string
		same       bool
	}{
		{"same file", "/etc/edge/gw.json", "/etc/edge/gw.json", true},
		{"same file, another spelling", "/etc/edge/gw.json", "/etc/edge/../edge/gw.json", true},
		{"same name, other folder", "/etc/edge/gw.json", "/home/u/gw.json", false},
		{"other name, same folder", "/etc/edge/gw.json", "/etc/edge/gw2.json", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := StateDir(base, tc.a), StateDir(base, tc.b)
			if (a == b) != tc.same {
				t.Fatalf("%s → %s, %s → %s; same = %v, want %v", tc.a, a, tc.b, b, a == b, tc.same)
			}
			if filepath.Dir(a) != base || !strings.HasPrefix(filepath.Base(a), "gw") {
				t.Errorf("%s: want <base>/<name>-<hash>", a)
			}
		})
	}
	if got := StateDir(base, "/etc/edge/gw.json"); got != base+"/gw-86af13923ac9" {
		t.Errorf("/etc/edge/gw.json → %s, want the README's example %s/gw-86af13923ac9", got, base)
	}
	for path, prefix := range map[string]string{"/x/my config!.json": "my_config_-", "/x/.json": "config-", "/x/a.b.yaml": "a_b-"} {
		if got := filepath.Base(StateDir(base, path)); !strings.HasPrefix(got, prefix) || len(got) != len(prefix)+12 {
			t.Errorf("%s → %s, want %s<12 hex digits>", path, got, prefix)
		}
	}
}

func TestStateDirUnder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		base string
		want string
	}{
		{"admin.state_dir wins", Config{Path: "/etc/edge/gw.json", Admin: Admin{StateDir: "/var/edge"}}, "/state", "/var/edge"},
		{"derived from the path", Config{Path: "/etc/edge/gw.json"}, "/state", "/state/gw-86af13923ac9"},
		{"no base", Config{Path: "/etc/edge/gw.json"}, "", ""},
		{"built-in config", Config{}, "/state", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.StateDirUnder(tc.base); got != tc.want {
				t.Errorf("StateDirUnder(%q) = %q, want %q", tc.base, got, tc.want)
			}
		})
	}
}
