package gateway

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/interceptchain"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
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

// Reload applies cfg to the running gateway, in three named steps as Caddy
// does: prepare builds and validates the next configuration aside (nothing
// running changes, and an error leaves everything as it was); commit makes
// it current with atomic swaps; cleanUp then starts what is new and drains
// and closes what the old configuration held. Reloads are serialized with
// each other and with the admin API's policy changes.
func (g *Gateway) Reload(ctx context.Context, cfg *config.Config) (ReloadResult, error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	g.pol.Lock() // the policy generation built aside stays the newest until committed
	defer g.pol.Unlock()
	plan, err := g.prepare(ctx, cfg)
	if err != nil {
		return ReloadResult{}, err
	}
	plan.commit()
	plan.cleanUp()
	res := plan.res
	g.log.Info("configuration reloaded", "file", cfg.Path, "added", res.Added, "removed", res.Removed,
		"changed", res.Changed, "kept", len(res.Kept), "policies_changed", res.Policies, "restart_needed", res.RestartNeeded)
	return res, nil
}

// reloadPlan is the next configuration, built aside by prepare: everything
// it needs to run, nothing of it running yet.
type reloadPlan struct {
	g        *Gateway
	cfg, old *config.Config
	res      ReloadResult
	ups      *upstreamSet
	added    []*upstream // in ups, to start
	leaving  []*upstream // in the old set only, to drain and stop
	guard    *guard
	pol      *policyset.Gen      // the next policy generation, when res.Policies
	icept    *interceptchain.Set // the next interceptor chain (started), nil without one
	oldSet   *interceptchain.Set // the chain it replaces, closed by cleanUp
	views    bool                // access or tool rules changed: sessions re-list tools
	virt     *virtual.Set        // the next virtual servers
}

// prepare builds and validates the next configuration aside. Called with
// g.pol.mu held.
func (g *Gateway) prepare(ctx context.Context, cfg *config.Config) (*reloadPlan, error) {
	if err := oauth.CheckFleetKey(cfg); err != nil {
		return nil, err
	}
	plan := &reloadPlan{g: g, cfg: cfg, old: g.config()}
	plan.res.RestartNeeded = restartNeeded(plan.old, cfg)
	var err error
	if plan.virt, err = virtual.NewSet(cfg.VirtualServers, g.virt.Load()); err != nil {
		return nil, fmt.Errorf("virtual servers: %w", err)
	}
	if err := plan.prepareUpstreams(); err != nil {
		return nil, err
	}
	gd, err := newGuard(ctx, cfg, g.opts)
	if err != nil {
		return nil, err
	}
	shareLimits(g.fleet, gd, cfg)
	plan.guard = gd
	plan.views = !reflect.DeepEqual(plan.old.Access, cfg.Access) || !reflect.DeepEqual(plan.old.ToolRules, cfg.ToolRules)
	if !reflect.DeepEqual(plan.old.Policies, cfg.Policies) {
		// A module that fails to load rejects the reload.
		pg, err := g.pol.BuildLocked(ctx, cfg.Policies, &cfg.Admin)
		if err != nil {
			gd.Close()
			return nil, &config.Error{File: cfg.Path, Key: "policies", Reason: err.Error()}
		}
		plan.pol, plan.res.Policies = pg, true
	}
	pg := g.pol.Current()
	if plan.pol != nil {
		pg = plan.pol
	}
	if plan.icept, err = g.newInterceptSet(ctx, cfg, pg); err != nil {
		gd.Close()
		if plan.pol != nil {
			g.pol.DiscardLocked(plan.pol)
		}
		return nil, err
	}
	return plan, nil
}

// restartNeeded lists the settings that changed but take effect only when
// the process restarts (config.RestartNeeded).
var restartNeeded = config.RestartNeeded

// prepareUpstreams builds the next upstream set: unchanged upstreams are
// kept (same connection), new and changed ones are prepared, not started.
func (plan *reloadPlan) prepareUpstreams() error {
	g := plan.g
	cur := g.route.upstreams()
	g.oauth.Configure(oauth.Servers(plan.cfg)) // before newUpstream: the transports take their handlers
	next := &upstreamSet{byName: make(map[string]*upstream, len(plan.cfg.Servers))}
	res := &plan.res
	for _, sc := range plan.cfg.Servers {
		u := cur.byName[sc.Name]
		switch {
		case u != nil && reflect.DeepEqual(u.orig, sc):
			res.Kept = append(res.Kept, sc.Name)
		default:
			fresh, err := g.newUpstream(sc)
			if err != nil {
				return err
			}
			if u != nil {
				res.Changed = append(res.Changed, sc.Name)
			} else {
				res.Added = append(res.Added, sc.Name)
			}
			u = fresh
			plan.added = append(plan.added, u)
		}
		next.list = append(next.list, u)
		next.byName[sc.Name] = u
	}
	for _, u := range cur.list {
		if next.byName[u.name] != u {
			plan.leaving = append(plan.leaving, u)
			if next.byName[u.name] == nil {
				res.Removed = append(res.Removed, u.name)
			}
		}
	}
	plan.ups = next
	return nil
}

// commit makes the plan current: the config, the admission settings, the
// policy generation and the upstream set (with its catalogue) are each
// swapped atomically. Called with g.pol.mu held.
func (plan *reloadPlan) commit() {
	g := plan.g
	g.cfgp.Store(plan.cfg)
	g.guard.Swap(plan.guard).Close()
	if plan.res.Policies {
		g.pol.CommitLocked(plan.cfg.Policies, plan.pol)
	}
	plan.oldSet = g.icept.Swap(plan.icept)
	g.virt.Store(plan.virt) // before the catalogue: its sessions compare their views
	g.route.replace(plan.ups, reservedOf(plan.cfg))
	if plan.views {
		// What each session may see changed without the catalogue changing.
		for _, s := range g.route.allSessions() {
			go s.listChanged(listKinds[kindTools].Changed)
		}
	}
}

// cleanUp starts the upstreams the plan added and lets the ones it removed
// finish their calls in flight, then stops them.
func (plan *reloadPlan) cleanUp() {
	g := plan.g
	for _, u := range plan.added {
		g.startUpstream(u)
	}
	if old := plan.oldSet; old != nil {
		// Calls in flight keep the old chain; its remote members fail
		// once closed, which their fail_open decides.
		if err := old.Close(); err != nil {
			g.log.Warn("closing the previous interceptor chain", "err", err)
		}
	}
	for _, u := range plan.leaving {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			u.drainAndStop(g.ctx)
		}()
	}
}

// drainAndStop waits (at most the upstream's timeout) for the calls in
// flight on u to finish, then disconnects it.
func (u *upstream) drainAndStop(ctx context.Context) {
	deadline := time.Now().Add(u.cfg.Timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if u.forwarded() == 0 {
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
// ctx ends or the gateway closes (config.Watch: the folder is watched,
// changes are debounced).
func (g *Gateway) WatchConfig(ctx context.Context) error {
	path := g.config().Path
	if path == "" {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(g.ctx, cancel)
	done, err := config.Watch(wctx, path, func(err error) {
		g.log.Warn("watching the config file", "file", path, "err", err)
	}, func() {
		if _, err := g.ReloadFile(ctx); err != nil {
			g.log.Error("config reload rejected; the running configuration stays", "err", err)
			g.audit(AuditAdmin{Time: time.Now().UTC(), Identity: "file-watch", Action: "config.reload.rejected", Target: path, Detail: err.Error()})
		} else {
			g.audit(AuditAdmin{Time: time.Now().UTC(), Identity: "file-watch", Action: "config.reload", Target: path})
		}
	})
	if err != nil {
		stop()
		cancel()
		return err
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		<-done
		stop()
		cancel()
	}()
	return nil
}
