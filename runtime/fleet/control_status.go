package fleet

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// This file is the fleet's view on a replica: the heartbeat that puts
// this replica's record into the members bucket (and, on the same tick,
// checks the fleet's policy record, in case a watcher missed a revision),
// the fleet section of /status and the per-replica lines of
// GET /admin/modules.

// heartbeat is how often a replica beats and checks the fleet's record;
// every listEvery beats it also reads the others' records, so that /status
// has a recent list when NATS goes away.
const (
	heartbeat = time.Second
	listEvery = 5
)

// run beats until ctx ends, then leaves the fleet.
func (fc *Control) run(ctx context.Context) {
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	defer fc.leave()
	seeded := false
	for beats := 0; ; beats++ {
		if fc.node.Connected() {
			seeded = seeded || fc.seed(ctx)
			if fc.poll(ctx) {
				seeded = false // the record is gone: seed it again
			}
			fc.beat(ctx, beats%listEvery == 0)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-fc.kick:
		}
	}
}

// seed gives a fleet without a policy record the state of the first
// replica that has one (a replica that served alone before joining); it
// reports whether the question is settled.
func (fc *Control) seed(ctx context.Context) bool {
	e, err := fc.ctl.Get(ctx, fleetPolicyKey)
	if err != nil {
		return false
	}
	if e.Revision != 0 {
		return true
	}
	p := fc.h.Policies
	p.Lock()
	defer p.Unlock()
	if len(fc.rec.Modules) == 0 && len(fc.rec.Attachments) == 0 {
		return true
	}
	for _, v := range fc.rec.versions() {
		b, err := p.Store().Blob(v.Digest)
		if err == nil {
			_, err = fc.ctl.PutBlob(ctx, b)
		}
		if err != nil {
			fc.log.Warn("cluster: seeding the fleet's modules", "digest", v.Digest, "err", err)
			return false
		}
	}
	fc.rec.By = &fleetChange{Replica: fc.node.Replica(), Action: "fleet.seed", Target: "policies", At: time.Now().UTC()}
	rev, err := fc.ctl.Put(ctx, fleetPolicyKey, fc.rec.encode(), 0)
	if err != nil {
		return false // another replica seeded first: its record arrives by the watcher
	}
	fc.appliedLocked(rev, fc.rec)
	fc.log.Info("cluster: the fleet's policies seeded from this replica's state", "revision", rev)
	return true
}

// poll activates the fleet's current record if the watcher has not. It
// reports a record that vanished (a NATS that lost its store): the
// replica keeps serving, forgets the revision, and seeds the record again.
//
// The revision it compares with is the one applied before it read: a
// change this replica writes and applies while the read is under way
// (an admin upload) is newer than what the read saw, not a sign that
// the record vanished.
func (fc *Control) poll(ctx context.Context) (gone bool) {
	had := fc.rev.Load()
	e, err := fc.ctl.Get(ctx, fleetPolicyKey)
	switch {
	case err != nil:
	case e.Revision == 0 && had > 0:
		if !fc.rev.CompareAndSwap(had, 0) {
			return false // a newer revision was applied meanwhile
		}
		fc.log.Warn("cluster: the fleet's policy record is gone from NATS; writing this replica's again", "had_revision", had)
		return true
	case e.Revision < had:
		// Revisions only grow: the bucket was made again.
		if !fc.rev.CompareAndSwap(had, 0) {
			return false
		}
		fc.log.Warn("cluster: the fleet's policy record was written anew; activating it", "had_revision", had, "revision", e.Revision)
		fc.onRecord(ctx, e)
	case e.Revision > had:
		fc.onRecord(ctx, e)
	}
	return false
}

// self is this replica's member record.
func (fc *Control) self() cluster.Member {
	cfg := fc.h.Config()
	m := cluster.Member{Replica: fc.node.Replica(), Listen: cfg.Listen, Admin: cfg.Admin.Listen, Version: fc.h.Version,
		Started: fc.started, LastSeen: time.Now().UTC(), NATS: natsState(fc.node), Generation: fc.rev.Load()}
	v := fc.view.Load()
	m.PolicyDigest, m.Modules = v.digest, v.modules
	if f := fc.failed.Load(); f != nil && f.Generation > m.Generation {
		m.Failed = f
	}
	return m
}

func natsState(n *cluster.Node) string {
	if n.Connected() {
		return "connected"
	}
	return "disconnected"
}

// beat publishes this replica's record and, when list is set, reads the
// others'.
func (fc *Control) beat(ctx context.Context, list bool) {
	if err := fc.mem.Publish(ctx, fc.self()); err != nil {
		fc.log.Debug("cluster: heartbeat", "err", err)
		return
	}
	if list {
		fc.refreshMembers(ctx)
	}
}

// refreshMembers reads the members bucket into the cache.
func (fc *Control) refreshMembers(ctx context.Context) []cluster.Member {
	list, err := fc.mem.List(ctx)
	fc.membersMu.Lock()
	defer fc.membersMu.Unlock()
	if err == nil {
		fc.members, fc.listedAt = list, time.Now().UTC()
	}
	return slices.Clone(fc.members)
}

// leave deletes this replica's member record on a clean stop and removes
// a temporary module cache.
func (fc *Control) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fc.mem.Leave(ctx)
	if fc.tmpDir != "" {
		os.RemoveAll(fc.tmpDir)
	}
}

// Status is the fleet section of the status document.
type Status struct {
	Name    string `json:"name"`
	Replica string `json:"replica"`
	// NATS is this replica's connection state; Degraded says why the
	// replica serves from what it has.
	NATS     string `json:"nats"`
	Degraded string `json:"degraded,omitempty"`
	// Generation and PolicyDigest are what is active here.
	Generation   uint64           `json:"generation"`
	PolicyDigest string           `json:"policy_digest"`
	Failed       *cluster.Failure `json:"failed,omitempty"`
	// Members are the replicas alive, as last read (MembersAsOf).
	Members     []cluster.Member `json:"members"`
	MembersAsOf time.Time        `json:"members_as_of,omitzero"`
}

// Status reports the fleet as this replica sees it; nil outside a fleet.
func (f *Fleet) Status(ctx context.Context) *Status {
	fc := f.Control()
	if fc == nil {
		return nil
	}
	self := fc.self()
	st := &Status{Name: fc.node.Name(), Replica: self.Replica, NATS: self.NATS, Degraded: f.Degraded(),
		Generation: self.Generation, PolicyDigest: self.PolicyDigest, Failed: self.Failed}
	if fc.node.Connected() {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		fc.refreshMembers(ctx)
	}
	fc.membersMu.Lock()
	st.Members, st.MembersAsOf = slices.Clone(fc.members), fc.listedAt
	fc.membersMu.Unlock()
	// This replica's own line is always fresh (NATS may be away).
	st.Members = slices.DeleteFunc(st.Members, func(m cluster.Member) bool { return m.Replica == self.Replica })
	st.Members = append(st.Members, self)
	slices.SortFunc(st.Members, func(a, b cluster.Member) int { return strings.Compare(a.Replica, b.Replica) })
	return st
}

// moduleReplicas is, for GET /admin/modules, which version of module name
// each replica runs and, when it refused the fleet's latest revision, why.
func (fc *Control) moduleReplicas(name string, members []cluster.Member) []admin.ModuleReplica {
	out := []admin.ModuleReplica{}
	for _, m := range members {
		r := admin.ModuleReplica{Replica: m.Replica, Digest: m.Modules[name], Generation: m.Generation, LastSeen: m.LastSeen}
		if m.Failed != nil && m.Failed.Generation > m.Generation {
			r.Error = m.Failed.Error
		}
		out = append(out, r)
	}
	return out
}

// fleetMembers reads the members for an admin answer (at most 1 s; else
// the last list).
func (fc *Control) fleetMembers() []cluster.Member {
	if !fc.node.Connected() {
		fc.membersMu.Lock()
		defer fc.membersMu.Unlock()
		return slices.Clone(fc.members)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return fc.refreshMembers(ctx)
}

// AddReplicas adds, in a fleet, each replica's line to module answers.
func (f *Fleet) AddReplicas(infos []admin.ModuleInfo) {
	fc := f.Control()
	if fc == nil || len(infos) == 0 {
		return
	}
	members := fc.fleetMembers()
	for i := range infos {
		infos[i].Replicas = fc.moduleReplicas(infos[i].Name, members)
	}
}

// Revision is the revision of the fleet's policy record active here.
func (fc *Control) Revision() uint64 { return fc.rev.Load() }

// Failed is the revision this replica refused last, nil when none.
func (fc *Control) Failed() *cluster.Failure { return fc.failed.Load() }
