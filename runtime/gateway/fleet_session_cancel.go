package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// A client's notifications/cancelled may reach another replica than the
// one its call is in flight on: that replica publishes it on
// <fleet>.cancel, and the replica holding the call cancels it upstream.

// fleetCancel is what travels on <fleet>.cancel.
type fleetCancel struct {
	Session string          `json:"session"`
	Params  json.RawMessage `json:"params"`
}

func (fs *fleetSessions) startCancels() error {
	subj := fs.node.Subject("cancel")
	sub, err := fs.node.Subscribe(subj, "a cancellation", fs.onCancel)
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	fs.cancels = sub
	return nil
}

// shareCancel publishes a cancellation of a request not in flight here.
func (s *session) shareCancel(params json.RawMessage) {
	fs := s.g.fleetSess.Load()
	if fs == nil || s.transport != transportStreamable {
		return
	}
	b, _ := json.Marshal(fleetCancel{Session: s.conn.SessionID(), Params: params})
	if err := fs.node.Publish(fs.node.Subject("cancel"), b); err != nil {
		fs.log.Warn("cluster: publishing a cancellation", "err", err)
	}
}

// onCancel cancels the call another replica's client cancelled, when it is
// in flight here.
func (fs *fleetSessions) onCancel(m *cluster.Msg) {
	var c fleetCancel
	if err := json.Unmarshal(m.Data, &c); err != nil {
		fs.log.Warn("cluster: refused a cancellation from NATS", "err", err)
		return
	}
	v, ok := fs.local.Load(c.Session)
	if !ok {
		return
	}
	id, ok := requestID(c.Params)
	if !ok {
		fs.log.Warn("cluster: refused a cancellation from NATS: no requestId")
		return
	}
	reason, _ := wire.String(c.Params, "reason")
	v.(*session).cancelCall(id, reason)
}
