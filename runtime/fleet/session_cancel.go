package fleet

import (
	"encoding/json"
	"fmt"

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

func (fs *Sessions) startCancels() error {
	subj := fs.node.Subject("cancel")
	sub, err := fs.node.Subscribe(subj, "a cancellation", fs.onCancel)
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	fs.cancels = sub
	return nil
}

// ShareCancel publishes a cancellation (the params of the client's
// notifications/cancelled) of a request of s not in flight here.
func (f *Fleet) ShareCancel(s Session, params json.RawMessage) {
	fs := f.Sessions()
	if fs == nil || !s.Shared() {
		return
	}
	b, _ := json.Marshal(fleetCancel{Session: s.ID(), Params: params})
	if err := fs.node.Publish(fs.node.Subject("cancel"), b); err != nil {
		fs.log.Warn("cluster: publishing a cancellation", "err", err)
	}
}

// onCancel cancels the call another replica's client cancelled, when it is
// in flight here.
func (fs *Sessions) onCancel(m *cluster.Msg) {
	var c fleetCancel
	if err := json.Unmarshal(m.Data, &c); err != nil {
		fs.log.Warn("cluster: refused a cancellation from NATS", "err", err)
		return
	}
	v, ok := fs.local.Load(c.Session)
	if !ok {
		return
	}
	if !v.(Session).Cancel(c.Params) {
		fs.log.Warn("cluster: refused a cancellation from NATS: no requestId")
	}
}
