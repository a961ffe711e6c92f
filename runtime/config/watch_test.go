package config

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatch: writing the file and replacing it (as editors do: a
// temporary file, then a rename) are reported, debounced; other files in
// the folder are not; the watch ends with its context.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "edge-mcp.json")
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	var changes atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done, err := Watch(ctx, path, func(err error) { t.Errorf("watcher: %v", err) }, func() { changes.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	wait := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for changes.Load() < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * debounce) // nothing more comes
		if got := changes.Load(); got != want {
			t.Fatalf("%d changes reported, want %d", got, want)
		}
	}
	for range 3 { // one burst: one change
		if err := os.WriteFile(path, []byte(`{"a":1}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wait(1)
	if err := os.WriteFile(filepath.Join(dir, "other.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".edge-mcp.json.swp")
	if err := os.WriteFile(tmp, []byte(`{"b":2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	wait(2)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end with its context")
	}
	if _, err := Watch(context.Background(), filepath.Join(dir, "missing", "x.json"), func(error) {}, func() {}); err == nil {
		t.Fatal("watching a file in a missing folder: no error")
	}
}

func TestRestartNeeded(t *testing.T) {
	base := func() *Config { return &Config{Listen: "127.0.0.1:8080"} }
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   []string
	}{
		{"nothing", func(*Config) {}, nil},
		{"listen", func(c *Config) { c.Listen = ":9000" }, []string{"listen"}},
		{"hosts", func(c *Config) { c.AllowedHosts = []string{"x"} }, []string{"allowed_origins/allowed_hosts"}},
		{"admin", func(c *Config) { c.Admin.StateDir = "/tmp/x" }, []string{"admin.listen/admin.state_dir"}},
		{"client memory", func(c *Config) { c.Limits.ClientMemory = 1 << 20 }, []string{"limits.client_memory/limits.client_memory_per_identity"}},
		{"two", func(c *Config) { c.Listen, c.MaxBodyBytes = ":1", 5 }, []string{"listen", "max_body_bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.change(cfg)
			if got := RestartNeeded(base(), cfg); !slices.Equal(got, tc.want) {
				t.Fatalf("RestartNeeded = %v, want %v", got, tc.want)
			}
		})
	}
}
