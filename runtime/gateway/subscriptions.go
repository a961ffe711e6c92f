package gateway

import (
	"context"
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
func (s *session) listen(req *jsonrpc.Request) {
	var p struct {
		Notifications *listenRequest `json:"notifications"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil || p.Notifications == nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "subscriptions/listen: params.notifications must be an object")
		return
	}
	want := p.Notifications
	ack := listenRequest{ToolsListChanged: want.ToolsListChanged, PromptsListChanged: want.PromptsListChanged,
		ResourcesListChanged: want.ResourcesListChanged}
	ack.ResourceSubscriptions = s.subscribeAll(want.ResourceSubscriptions)
	l := &listening{id: req.ID, changed: map[string]bool{
		listKinds[kindTools].changed:     ack.ToolsListChanged,
		listKinds[kindPrompts].changed:   ack.PromptsListChanged,
		listKinds[kindResources].changed: ack.ResourcesListChanged,
	}}
	s.mu.Lock()
	s.listening = l
	s.mu.Unlock()
	params, err := json.Marshal(struct {
		Meta          map[string]any `json:"_meta"`
		Notifications listenRequest  `json:"notifications"`
	}{map[string]any{metaSubscriptionID: req.ID.Raw()}, ack})
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInternalError, "subscriptions/listen: encoding the acknowledgement: %v", err)
		return
	}
	s.notify(req.ID, "notifications/subscriptions/acknowledged", params)
}

// subscribeAll subscribes the session to the resources it may follow and
// returns their URIs: those of shared upstreams that accept the
// subscription.
func (s *session) subscribeAll(uris []string) []string {
	var ok []string
	for _, uri := range uris {
		u := s.catalogue().resource(uri)
		if u == nil || u.perClient() {
			continue
		}
		if s.g.route.subscribe(s, uri) {
			l := u.current()
			var err error
			if l != nil {
				ctx, cancel := context.WithTimeout(s.ctx, u.cfg.Timeout)
				err = l.subscribeResource(ctx, uri)
				cancel()
			}
			if l == nil || err != nil {
				s.g.route.unsubscribe(s, uri)
				continue
			}
		}
		ok = append(ok, uri)
	}
	return ok
}

// subscription returns the id of the session's subscriptions/listen when
// it asked for method (a list_changed; "" for resources/updated, which the
// router sends only to subscribers).
func (s *session) subscription(method string) (jsonrpc.ID, bool) {
	s.mu.Lock()
	l := s.listening
	s.mu.Unlock()
	if l == nil || (method != "" && !l.changed[method]) {
		return jsonrpc.ID{}, false
	}
	return l.id, true
}

// tagSubscription adds the subscription id of a 2026-07-28 listener to a
// notification's params; other sessions' params pass unchanged.
func (s *session) tagSubscription(params json.RawMessage, id jsonrpc.ID) json.RawMessage {
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
