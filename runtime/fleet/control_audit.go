package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// An admin change made through one replica reaches the others as a
// revision of the fleet's policy record. The record says who made it
// (fleetChange: the replica and the admin identity, sealed with the rest
// of the record), and every replica that activates a revision another
// replica wrote audits it, so each replica's audit log accounts for every
// policy change it applies.

// fleetChange is the admin change a revision of the policy record made.
type fleetChange struct {
	Replica  string    `json:"replica"`
	Identity string    `json:"identity,omitempty"`
	Action   string    `json:"action"`
	Target   string    `json:"target,omitempty"`
	At       time.Time `json:"at"`
}

func (c *fleetChange) check() error {
	if c == nil {
		return nil
	}
	for _, f := range []string{c.Replica, c.Identity, c.Action, c.Target} {
		if len(f) > maxPinFieldLen {
			return fmt.Errorf("by: a field of %d bytes; at most %d", len(f), maxPinFieldLen)
		}
	}
	if c.Replica == "" || c.Action == "" {
		return fmt.Errorf("by: replica and action are required")
	}
	return nil
}

// changeKey carries the action and target of an admin change down to the
// fleet's write.
type changeKey struct{}

type changeOp struct{ action, target string }

// ChangeContext is ctx saying which admin change is being made, for the
// record's audit on the other replicas.
func ChangeContext(ctx context.Context, action, target string) context.Context {
	return context.WithValue(ctx, changeKey{}, changeOp{action, target})
}

// changeOf is the fleetChange ctx's admin change makes through this replica.
func (fc *Control) changeOf(ctx context.Context) *fleetChange {
	op, _ := ctx.Value(changeKey{}).(changeOp)
	if op.action == "" {
		op.action = "policy.change"
	}
	return &fleetChange{Replica: fc.node.Replica(), Identity: admin.Identity(ctx), Action: op.action, Target: op.target, At: time.Now().UTC()}
}

// auditRemote audits revision rev of the record, activated here, when
// another replica wrote it.
func (fc *Control) auditRemote(rev uint64, rec *fleetPolicy) {
	by := rec.By
	if by == nil || by.Replica == fc.node.Replica() {
		return
	}
	identity := by.Identity
	if identity == "" {
		identity = "(none)"
	}
	fc.h.Audit(admin.Record{Time: time.Now().UTC(), Identity: identity, Action: by.Action, Target: by.Target, Digest: rec.digest(),
		Detail: fmt.Sprintf("through the fleet: made on replica %q at %s, fleet revision %d", by.Replica, by.At.Format(time.RFC3339), rev)})
}
