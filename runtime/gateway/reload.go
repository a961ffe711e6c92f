package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/fsnotify/fsnotify"
)

// This file reloads the configuration without a restart. A reload builds
// and validates the next generation aside, then swaps it in: upstreams
// whose settings did not change keep their connection and session; added
// ones connect; removed (or changed) ones leave the catalogue at once and
// close once their calls in flight have finished; policies swap by
// generation. An invalid config changes nothing.

// ReloadResult says what a reload changed.
type ReloadResult struct {
	Added    []string `json:"added,omitempty"`
	Removed  []string `json:"removed,omitempty"`
	Changed  []string `json:"changed,omitempty"`
	Kept     []string `json:"kept,omitempty"`
	Policies bool     `json:"policies_changed"`
	// RestartNeeded lists settings that changed but take effect only on
	// restart (the listen address, for one).
	RestartNeeded []string `json:"restart_needed,omitempty"`
}

func (r ReloadResult) String() string {
	return fmt.Sprintf("added %v, removed %v, changed %v, kept %d, policies changed %v, restart needed for %v",
		r.Added, r.Removed, r.Changed, len(r.Kept), r.Policies, r.RestartNeeded)
}

// ReloadFile reads the running configuration's file again and applies it.
func (g *Gateway) ReloadFile(ctx context.Context) (ReloadResult, error) {
	path := g.config().Path
	if path == "" {
		return ReloadResult{}, errors.New("the running configuration is built in, not read from a file: nothing to reload")
	}
	cfg, err := config.Load(path)
	if err != nil {
		return ReloadResult{}, err
	}
	return g.Reload(ctx, cfg)
}

// Reload applies cfg to the running gateway. It is serialized with other
// reloads; on error the running configuration stays as it was.
func (g *Gateway) Reload(ctx context.Context, cfg *config.Config) (ReloadResult, error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	old := g.config()
	var res ReloadResult
	if old.Listen != cfg.Listen {
		res.RestartNeeded = append(res.RestartNeeded, "listen")
	}
	if old.MaxBodyBytes != cfg.MaxBodyBytes {
		res.RestartNeeded = append(res.RestartNeeded, "max_body_bytes")
	}
	if !reflect.DeepEqual(old.AllowedOrigins, cfg.AllowedOrigins) || !reflect.DeepEqual(old.AllowedHosts, cfg.AllowedHosts) {
		res.RestartNeeded = append(res.RestartNeeded, "allowed_origins/allowed_hosts")
	}
	if old.Admin.Listen != cfg.Admin.Listen || old.Admin.StateDir != cfg.Admin.StateDir {
		res.RestartNeeded = append(res.RestartNeeded, "admin.listen/admin.state_dir")
	}

	// Build the new upstreams aside: this is the part that can fail.
	cur := g.upstreams()
	next := &upstreamSet{byName: make(map[string]*upstream, len(cfg.Servers))}
	var added []*upstream
	for _, sc := range cfg.Servers {
		if u := cur.byName[sc.Name]; u != nil && reflect.DeepEqual(u.orig, sc) {
			next.list = append(next.list, u)
			next.byName[sc.Name] = u
			res.Kept = append(res.Kept, sc.Name)
			continue
		}
		u, err := g.newUpstream(sc)
		if err != nil {
			return ReloadResult{}, err
		}
		if cur.byName[sc.Name] != nil {
			res.Changed = append(res.Changed, sc.Name)
		} else {
			res.Added = append(res.Added, sc.Name)
		}
		next.list = append(next.list, u)
		next.byName[sc.Name] = u
		added = append(added, u)
	}
	var leaving []*upstream
	for _, u := range cur.list {
		if next.byName[u.name] != u {
			leaving = append(leaving, u)
			if next.byName[u.name] == nil {
				res.Removed = append(res.Removed, u.name)
			}
		}
	}

	// Admission settings: auth keys, access lists, limits, tool rules.
	gd, err := newGuard(ctx, cfg, g.opts)
	if err != nil {
		return ReloadResult{}, err
	}
	if old.Audit != cfg.Audit || !reflect.DeepEqual(old.Telemetry, cfg.Telemetry) || !reflect.DeepEqual(old.Observability.Metrics, cfg.Observability.Metrics) {
		res.RestartNeeded = append(res.RestartNeeded, "audit/telemetry/metrics")
	}

	// Policies next: a module that fails to load rejects the reload.
	if !reflect.DeepEqual(old.Policies, cfg.Policies) {
		p := &g.pol
		p.mu.Lock()
		prev := p.fileSpecs
		p.fileSpecs = cfg.Policies
		err := p.rebuildLocked(ctx, p.adminSpecs(), nil)
		if err != nil {
			p.fileSpecs = prev
		}
		p.mu.Unlock()
		if err != nil {
			gd.close()
			return ReloadResult{}, &config.Error{File: cfg.Path, Key: "policies", Reason: err.Error()}
		}
		res.Policies = true
	}

	// Commit: swap the upstream set and the config, publish, start the new
	// upstreams and let the leaving ones drain.
	g.cfgp.Store(cfg)
	g.guard.Swap(gd).close()
	g.mu.Lock()
	g.reserved[kindTools] = cfg.Reserved.Tools
	g.reserved[kindPrompts] = cfg.Reserved.Prompts
	g.ups.Store(next)
	g.publishLocked()
	if !reflect.DeepEqual(old.Access, cfg.Access) || !reflect.DeepEqual(old.ToolRules, cfg.ToolRules) {
		// What each session may see changed without the catalogue changing.
		g.mu.Lock()
		for s := range g.sessions {
			go s.listChanged(listKinds[kindTools].changed)
		}
		g.mu.Unlock()
	}
	for _, u := range added {
		g.startUpstream(u)
	}
	for _, u := range leaving {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			u.drainAndStop(g.ctx)
		}()
	}
	g.log.Info("configuration reloaded", "file", cfg.Path, "added", res.Added, "removed", res.Removed,
		"changed", res.Changed, "kept", len(res.Kept), "policies_changed", res.Policies, "restart_needed", res.RestartNeeded)
	return res, nil
}

// drainAndStop waits (at most the upstream's timeout) for the calls in
// flight on u to finish, then disconnects it.
func (u *upstream) drainAndStop(ctx context.Context) {
	deadline := time.Now().Add(u.cfg.Timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		l := u.current()
		if l == nil || l.forwarded() == 0 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if u.stopRun != nil {
		u.stopRun()
		<-u.done
	}
	u.log.Info("upstream removed by a reload")
}

// forwarded counts the calls of downstream sessions waiting on l.
func (l *link) forwarded() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.pending {
		if c.sess != nil {
			n++
		}
	}
	return n
}

// WatchConfig reloads the configuration whenever its file changes, until
// ctx ends. Editors that replace the file (write a temporary file, then
// rename it) are handled by watching the folder. Changes are debounced.
func (g *Gateway) WatchConfig(ctx context.Context) error {
	path := g.config().Path
	if path == "" {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", path, err)
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return fmt.Errorf("watching %s: %w", path, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer w.Close()
		var timer *time.Timer
		fire := make(chan struct{}, 1)
		for {
			select {
			case <-g.ctx.Done():
				if timer != nil {
					timer.Stop()
				}
				return
			case <-ctx.Done():
				if timer != nil {
					timer.Stop()
				}
				return
			case err := <-w.Errors:
				g.log.Warn("watching the config file", "file", path, "err", err)
			case ev := <-w.Events:
				if filepath.Clean(ev.Name) != abs || ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) == 0 {
					continue
				}
				if timer == nil {
					timer = time.AfterFunc(200*time.Millisecond, func() {
						select {
						case fire <- struct{}{}:
						default:
						}
					})
				} else {
					timer.Reset(200 * time.Millisecond)
				}
			case <-fire:
				if _, err := g.ReloadFile(ctx); err != nil {
					g.log.Error("config reload rejected; the running configuration stays", "err", err)
					g.audit(AuditAdmin{Time: time.Now().UTC(), Identity: "file-watch", Action: "config.reload.rejected", Target: path, Detail: err.Error()})
				} else {
					g.audit(AuditAdmin{Time: time.Now().UTC(), Identity: "file-watch", Action: "config.reload", Target: path})
				}
			}
		}
	}()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		wg.Wait()
	}()
	return nil
}
