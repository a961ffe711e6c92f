package config

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"time"

	"github.com/fsnotify/fsnotify"
)

// debounce is how long Watch waits after a change before it reports it.
const debounce = 200 * time.Millisecond

// Watch calls changed whenever the file at path changes, until ctx ends;
// done is closed once it has stopped. Editors that replace the file
// (write a temporary file, then rename it) are handled by watching the
// folder. Changes are debounced; changed runs on Watch's goroutine, so
// changes during a call are reported once after it. Errors of the
// watcher go to failed.
func Watch(ctx context.Context, path string, failed func(error), changed func()) (done <-chan struct{}, _ error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer w.Close()
		var timer *time.Timer
		fire := make(chan struct{}, 1)
		for {
			select {
			case <-ctx.Done():
				if timer != nil {
					timer.Stop()
				}
				return
			case err := <-w.Errors:
				failed(err)
			case ev := <-w.Events:
				if filepath.Clean(ev.Name) != abs || ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) == 0 {
					continue
				}
				if timer == nil {
					timer = time.AfterFunc(debounce, func() {
						select {
						case fire <- struct{}{}:
						default:
						}
					})
				} else {
					timer.Reset(debounce)
				}
			case <-fire:
				changed()
			}
		}
	}()
	return stopped, nil
}

// RestartNeeded lists the settings that changed from old to cfg but take
// effect only when the process restarts.
func RestartNeeded(old, cfg *Config) []string {
	var out []string
	if old.Listen != cfg.Listen {
		out = append(out, "listen")
	}
	if old.MaxBodyBytes != cfg.MaxBodyBytes {
		out = append(out, "max_body_bytes")
	}
	if !reflect.DeepEqual(old.AllowedOrigins, cfg.AllowedOrigins) || !reflect.DeepEqual(old.AllowedHosts, cfg.AllowedHosts) {
		out = append(out, "allowed_origins/allowed_hosts")
	}
	if old.Admin.Listen != cfg.Admin.Listen || old.Admin.StateDir != cfg.Admin.StateDir {
		out = append(out, "admin.listen/admin.state_dir")
	}
	if old.OAuth != cfg.OAuth {
		out = append(out, "oauth")
	}
	if old.Limits.ClientMemory != cfg.Limits.ClientMemory || old.Limits.ClientMemoryPerIdentity != cfg.Limits.ClientMemoryPerIdentity {
		out = append(out, "limits.client_memory/limits.client_memory_per_identity")
	}
	if old.Audit != cfg.Audit || !reflect.DeepEqual(old.Telemetry, cfg.Telemetry) || !reflect.DeepEqual(old.Observability.Metrics, cfg.Observability.Metrics) {
		out = append(out, "audit/telemetry/metrics")
	}
	return out
}
