package bridge

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// subscriptions/listen (revision 2026-07-28) replaces resources/subscribe
// and the session's standing right to list_changed notifications: a client
// opens one long-lived request naming what it wants, the gateway
// acknowledges the part it honours with notifications/subscriptions/
// acknowledged, then sends those notifications, each tagged with the
// request's id in _meta, until the client ends the request (over
// streamable HTTP: closes the POST). The request is never answered while
// it lasts; resource subscriptions end with the session like any other.

const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// listenRequest is the notifications object of subscriptions/listen and of
// its acknowledgement.
type listenRequest struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listening is a session's open subscriptions/listen.
type listening struct {
	id      jsonrpc.ID
	changed map[string]bool // list_changed methods subscribed to
}

// listen serves subscriptions/listen.
func listen(s Session, req *jsonrpc.Request) {
	var p struct {
		Notifications *listenRequest `json:"notifications"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil || p.Notifications == nil {
		replyError(s, req.ID, jsonrpc.CodeInvalidParams, "subscriptions/listen: params.notifications must be an object")
		return
	}
	want := p.Notifications
	ack := listenRequest{ToolsListChanged: want.ToolsListChanged, PromptsListChanged: want.PromptsListChanged,
		ResourcesListChanged: want.ResourcesListChanged}
	ack.ResourceSubscriptions = s.SubscribeAll(want.ResourceSubscriptions)
	l := &listening{id: req.ID, changed: map[string]bool{
		"notifications/tools/list_changed":     ack.ToolsListChanged,
		"notifications/prompts/list_changed":   ack.PromptsListChanged,
		"notifications/resources/list_changed": ack.ResourcesListChanged,
	}}
	st := s.State()
	st.mu.Lock()
	st.listening = l
	st.mu.Unlock()
	params, err := json.Marshal(struct {
		Meta          map[string]any `json:"_meta"`
		Notifications listenRequest  `json:"notifications"`
	}{map[string]any{metaSubscriptionID: req.ID.Raw()}, ack})
	if err != nil {
		replyError(s, req.ID, jsonrpc.CodeInternalError, "subscriptions/listen: encoding the acknowledgement: %v", err)
		return
	}
	notify(s, req.ID, "notifications/subscriptions/acknowledged", params)
}

// Subscription returns the id of the session's subscriptions/listen when
// it asked for method (a list_changed; "" for resources/updated, which the
// router sends only to subscribers).
func (st *State) Subscription(method string) (jsonrpc.ID, bool) {
	st.mu.Lock()
	l := st.listening
	st.mu.Unlock()
	if l == nil || (method != "" && !l.changed[method]) {
		return jsonrpc.ID{}, false
	}
	return l.id, true
}

// Tag adds the subscription id of a 2026-07-28 listener to a
// notification's params.
func Tag(params json.RawMessage, id jsonrpc.ID) json.RawMessage {
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	rawID, err := json.Marshal(id.Raw())
	if err != nil {
		return params
	}
	meta, _, _ := wire.Field(params, "_meta")
	if len(meta) == 0 {
		meta = json.RawMessage(`{}`)
	}
	if meta, err = wire.SetField(meta, metaSubscriptionID, rawID); err != nil {
		return params
	}
	out, err := wire.SetField(params, "_meta", meta)
	if err != nil {
		return params
	}
	return out
}

// WithoutSubscriptionID drops the upstream's _meta subscriptionId from a
// notification of its listen: it names that connection's request, not
// anything of the client's (a 2026-07-28 listener gets its own id in its
// place). Other params pass unchanged.
func WithoutSubscriptionID(params json.RawMessage) json.RawMessage {
	meta, ok, err := wire.Field(params, "_meta")
	if err != nil || !ok {
		return params
	}
	if _, ok, _ := wire.Field(meta, metaSubscriptionID); !ok {
		return params
	}
	meta, err = wire.DeleteField(meta, metaSubscriptionID)
	if err != nil {
		return params
	}
	out, err := wire.SetField(params, "_meta", meta)
	if err != nil {
		return params
	}
	return out
}
