package fleet

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// This file makes tool-pin decisions fleet-wide. An operator's approval
// or rejection of a changed tool definition (Pins) is recorded in the
// control bucket (key "pins") as a decision about one definition, by its
// fingerprint. Every replica applies a decision to its own pending change
// of the same definition, now or when it first sees that definition, so
// the tool returns (or stays withheld) on every replica. Pins themselves
// stay per replica: each pins what its upstream connections serve.

const fleetPinsKey = "pins"

// Limits of a pins record read from NATS.
const (
	maxFleetPinsBytes   = 4 << 20
	maxFleetPinDecision = 10000
	maxPinFieldLen      = 1024
)

// fleetPins is the record of the operators' pin decisions, one per tool.
type fleetPins struct {
	Format    int           `json:"format"`
	Decisions []pinDecision `json:"decisions"`
}

// pinDecision is an approval or rejection of one definition of a tool.
type pinDecision struct {
	Server      string    `json:"server"`
	Tool        string    `json:"tool"`
	Fingerprint string    `json:"fingerprint"`
	Decision    string    `json:"decision"` // "approve" or "reject"
	At          time.Time `json:"at"`
	// Replica and Identity: where and by which admin identity it was
	// made (the replicas that apply it audit it).
	Replica  string `json:"replica,omitempty"`
	Identity string `json:"identity,omitempty"`
}

// decodeFleetPins parses and checks a pins record.
func decodeFleetPins(b []byte) (*fleetPins, error) {
	if len(b) > maxFleetPinsBytes {
		return nil, fmt.Errorf("pins record of %d bytes; at most %d", len(b), maxFleetPinsBytes)
	}
	rec := &fleetPins{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(rec); err != nil {
		return nil, fmt.Errorf("pins record: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("pins record: data after the JSON object")
	}
	if rec.Format != 1 {
		return nil, fmt.Errorf("pins record: format %d, this build reads format 1", rec.Format)
	}
	if len(rec.Decisions) > maxFleetPinDecision {
		return nil, fmt.Errorf("pins record: %d decisions; at most %d", len(rec.Decisions), maxFleetPinDecision)
	}
	seen := map[toolKey]bool{}
	for i, d := range rec.Decisions {
		switch {
		case d.Decision != "approve" && d.Decision != "reject":
			return nil, fmt.Errorf("pins record: decisions[%d]: decision %q; want approve or reject", i, d.Decision)
		case d.Server == "" || d.Tool == "" || d.Fingerprint == "":
			return nil, fmt.Errorf("pins record: decisions[%d]: server, tool and fingerprint are required", i)
		case len(d.Server) > maxPinFieldLen || len(d.Tool) > maxPinFieldLen || len(d.Fingerprint) > maxPinFieldLen ||
			len(d.Replica) > maxPinFieldLen || len(d.Identity) > maxPinFieldLen:
			return nil, fmt.Errorf("pins record: decisions[%d]: a field longer than %d bytes", i, maxPinFieldLen)
		case seen[toolKey{d.Server, d.Tool}]:
			return nil, fmt.Errorf("pins record: decisions[%d]: tool %q of server %q decided twice", i, d.Tool, d.Server)
		}
		seen[toolKey{d.Server, d.Tool}] = true
	}
	return rec, nil
}

// toolKey names a tool of a server.
type toolKey struct{ server, tool string }

// fleetPinState is the decisions this replica applies, by tool.
type fleetPinState struct {
	decided atomic.Pointer[map[toolKey]pinDecision]
}

// decision returns the fleet's decision about definition fp of a tool.
func (s *fleetPinState) decision(server, tool, fp string) (pinDecision, bool) {
	m := s.decided.Load()
	if m == nil {
		return pinDecision{}, false
	}
	d, ok := (*m)[toolKey{server, tool}]
	return d, ok && d.Fingerprint == fp
}

// onPins takes a revision of the pins record and applies its decisions to
// the pending changes of this replica.
func (fc *Control) onPins(e cluster.Entry) {
	if e.Key != fleetPinsKey || e.Value == nil {
		return
	}
	rec, err := decodeFleetPins(e.Value)
	if err != nil {
		fc.log.Error("cluster: refused the fleet's tool-pin decisions", "revision", e.Revision, "err", err)
		return
	}
	m := make(map[toolKey]pinDecision, len(rec.Decisions))
	for _, d := range rec.Decisions {
		m[toolKey{d.Server, d.Tool}] = d
	}
	fc.pins.decided.Store(&m)
	changed := false
	for _, c := range fc.h.Pins.Pending() {
		changed = fc.applyPinDecision(c.Server, c.Tool, c.NewFingerprint) || changed
	}
	if changed {
		fc.h.Pins.Changed()
	}
}

// ApplyPinDecision applies the fleet's decision, if any, about definition
// fp of server's tool, pending here; it reports whether it did. Outside a
// fleet it does nothing.
func (f *Fleet) ApplyPinDecision(server, tool, fp string) bool {
	fc := f.Control()
	return fc != nil && fc.applyPinDecision(server, tool, fp)
}

func (fc *Control) applyPinDecision(server, tool, fp string) bool {
	d, ok := fc.pins.decision(server, tool, fp)
	if !ok {
		return false
	}
	if d.Decision == "reject" {
		if !fc.h.Pins.Reject(server, tool, fp) {
			return false
		}
		fc.log.Info("cluster: tool change rejected by the fleet", "server", server, "tool", tool)
		fc.auditPin(d)
		return true
	}
	if !fc.h.Pins.Approve(server, tool) {
		return false
	}
	fc.log.Info("cluster: tool change approved by the fleet", "server", server, "tool", tool)
	fc.auditPin(d)
	return true
}

// auditPin audits a decision another replica made, applied here.
func (fc *Control) auditPin(d pinDecision) {
	if d.Replica == "" || d.Replica == fc.node.Replica() {
		return
	}
	fc.h.Audit(admin.Record{Time: time.Now().UTC(), Identity: cmp.Or(d.Identity, "(none)"), Action: "tool." + d.Decision, Target: d.Server + "/" + d.Tool,
		Detail: fmt.Sprintf("through the fleet: made on replica %q at %s", d.Replica, d.At.Format(time.RFC3339))})
}

// recordPinDecision writes an operator's decision for the fleet.
func (fc *Control) recordPinDecision(ctx context.Context, d pinDecision) error {
	for range 5 {
		e, err := fc.ctl.Get(ctx, fleetPinsKey)
		if err != nil {
			return fleetWriteError(err)
		}
		rec := &fleetPins{Format: 1}
		if e.Revision != 0 {
			if old, err := decodeFleetPins(e.Value); err == nil {
				rec = old
			} else {
				fc.log.Error("cluster: the fleet's tool-pin decisions are unreadable; this decision replaces them", "err", err)
			}
		}
		rec.Decisions = slices.DeleteFunc(rec.Decisions, func(o pinDecision) bool { return o.Server == d.Server && o.Tool == d.Tool })
		rec.Decisions = append(rec.Decisions, d)
		slices.SortFunc(rec.Decisions, func(a, b pinDecision) int {
			return strings.Compare(a.Server+"\x00"+a.Tool, b.Server+"\x00"+b.Tool)
		})
		b, _ := json.Marshal(rec)
		if _, err = fc.ctl.Put(ctx, fleetPinsKey, b, e.Revision); errors.Is(err, cluster.ErrConflict) {
			continue
		}
		if err != nil {
			return fleetWriteError(err)
		}
		return nil
	}
	return fleetWriteError(cluster.ErrConflict)
}

// DecidePin records, in a fleet, the operator's decision ("approve" or
// "reject") about server's pending tool change before this replica
// applies it, and reports whether it did; outside a fleet it does
// nothing.
func (f *Fleet) DecidePin(ctx context.Context, server, tool, decision string) (bool, error) {
	fc := f.Control()
	if fc == nil {
		return false, nil
	}
	if err := f.Writable(); err != nil {
		return false, err
	}
	for _, c := range fc.h.Pins.Pending() {
		if c.Server == server && c.Tool == tool {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			err := fc.recordPinDecision(wctx, pinDecision{Server: server, Tool: tool, Fingerprint: c.NewFingerprint, Decision: decision, At: time.Now().UTC(),
				Replica: fc.node.Replica(), Identity: admin.Identity(ctx)})
			return err == nil, err
		}
	}
	return false, nil // nothing pending: the caller answers 404
}
