package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// printFleet prints the fleet section of a replica's status: every
// member, when it was last seen, the policy generation and digest it
// runs, its NATS state, and why it is degraded or behind. Nothing
// outside a fleet.
func printFleet(w io.Writer, f *fleet.Status) error {
	if f == nil {
		return nil
	}
	fmt.Fprintf(w, "\nFLEET %s (asked replica %s, NATS %s)\n", f.Name, f.Replica, f.NATS)
	if f.Degraded != "" {
		fmt.Fprintf(w, "DEGRADED: %s\n", f.Degraded)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tLISTEN\tNATS\tLAST SEEN\tGENERATION\tPOLICY DIGEST\tVERSION\tNOT ACTIVATED")
	for _, m := range f.Members {
		digest := m.PolicyDigest
		if len(digest) > 19 {
			digest = digest[:19] // sha256: and 12 hex digits
		}
		failed := "-"
		if m.Failed != nil {
			failed = fmt.Sprintf("generation %d: %s", m.Failed.Generation, m.Failed.Error)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", m.Replica, m.Listen, m.NATS,
			time.Since(m.LastSeen).Round(time.Second).String()+" ago", m.Generation, digest, m.Version, failed)
	}
	if !f.MembersAsOf.IsZero() && f.NATS != "connected" {
		fmt.Fprintf(tw, "(members as of %s)\n", f.MembersAsOf.Format(time.RFC3339))
	}
	return tw.Flush()
}

// printReplicaDrift prints, for a module in a fleet, each replica that
// does not run the version the answering replica runs, and why.
func printReplicaDrift(w io.Writer, name, digest string, reps []admin.ModuleReplica) {
	for _, r := range reps {
		if r.Digest == digest && r.Error == "" {
			continue
		}
		runs := r.Digest
		if runs == "" {
			runs = "no version"
		}
		fmt.Fprintf(w, "%s on replica %s: runs %s", name, r.Replica, runs)
		if r.Error != "" {
			fmt.Fprintf(w, "; did not activate generation after %d: %s", r.Generation, r.Error)
		}
		fmt.Fprintln(w)
	}
}
