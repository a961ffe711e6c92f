package bridge

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// The downstream side of protocol revision 2026-07-28: no initialize,
// every request carries its protocol version, client capabilities and
// client info in _meta, server/discover says what the gateway offers, and
// list results carry caching hints. Over streamable HTTP each such request
// arrives on its own one-request connection
// (transports/streamable_stateless.go); the session it gets is the
// ordinary one, so routing, policies, admission and results take the same
// path as a 2025 session's.

const (
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"

	// CodeMissingCapability is MissingRequiredClientCapability and
	// CodeUnsupportedVersion UnsupportedProtocolVersion.
	CodeMissingCapability  = -32021
	CodeUnsupportedVersion = -32022
)

// downstreamVersions are the revisions the gateway serves its clients,
// newest first.
var downstreamVersions = []string{transports.Protocol2026, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// removedIn2026 are the methods revision 2026-07-28 dropped.
var removedIn2026 = map[string]string{
	"initialize":            "server/discover",
	"ping":                  "",
	"logging/setLevel":      "",
	"resources/subscribe":   "subscriptions/listen",
	"resources/unsubscribe": "subscriptions/listen",
}

// State is a session's bridging state: what its client declared, what
// the gateway declares upstream on the client's behalf, its 2026-07-28
// reads in flight and its open subscriptions/listen. The zero value is
// ready to use; it is safe for concurrent use and lives as long as its
// session.
type State struct {
	relayed atomic.Pointer[json.RawMessage] // client capabilities declared upstream for this client

	mu        sync.Mutex
	declared  json.RawMessage         // 2026-07-28: the request's _meta clientCapabilities
	reads     map[jsonrpc.ID]struct{} // 2026-07-28 resources/read in flight: their results get caching hints
	listening *listening              // 2026-07-28: the open subscriptions/listen, if any
}

// Declared is the clientCapabilities of the session's latest 2026-07-28
// request.
func (st *State) Declared() json.RawMessage {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.declared
}

// Declares reports whether a 2026-07-28 request declared capability.
func (st *State) Declares(capability string) bool {
	_, ok, _ := wire.Field(st.Declared(), capability)
	return ok
}

// RequestVersion returns the protocol version a request names in its _meta
// (2026-07-28 and later), if it names one.
func RequestVersion(req *jsonrpc.Request) (string, bool) {
	meta, ok, err := wire.Field(req.Params, "_meta")
	if err != nil || !ok {
		return "", false
	}
	return wire.String(meta, transports.MetaProtocolVersion)
}

// Begin applies the _meta of a request of s that names its protocol
// version: an unsupported version, a removed method, server/discover and
// subscriptions/listen are answered here; otherwise the session takes the
// client's info from the request and the request goes on to the ordinary
// dispatch (true).
func (b *Bridge) Begin(s Session, req *jsonrpc.Request, version string) bool {
	if version != transports.Protocol2026 {
		data, _ := json.Marshal(struct {
			Supported []string `json:"supported"`
			Requested string   `json:"requested"`
		}{downstreamVersions, version})
		s.Write(s.Context(), &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: CodeUnsupportedVersion,
			Message: fmt.Sprintf("unsupported protocol version %q", version), Data: data}})
		return false
	}
	if instead, removed := removedIn2026[req.Method]; removed {
		msg := fmt.Sprintf("method not found: %s was removed in protocol %s", req.Method, transports.Protocol2026)
		if instead != "" {
			msg += "; use " + instead
		}
		replyError(s, req.ID, jsonrpc.CodeMethodNotFound, "%s", msg)
		return false
	}
	meta, _, _ := wire.Field(req.Params, "_meta")
	caps, ok, _ := wire.Field(meta, MetaClientCapabilities)
	if !ok {
		replyError(s, req.ID, jsonrpc.CodeInvalidParams, "missing _meta field %q", MetaClientCapabilities)
		return false
	}
	st := s.State()
	st.mu.Lock()
	st.declared = caps
	st.mu.Unlock()
	// Passed through whole: input_required results and everything else
	// reach this client unchanged, extensions included.
	relayed := caps
	st.relayed.Store(&relayed)
	// Log messages reach the client only at the level its request asks
	// for; a request that names none gets none.
	level, _ := wire.String(meta, MetaLogLevel)
	var name string
	if info, ok, _ := wire.Field(meta, MetaClientInfo); ok {
		name, _ = wire.String(info, "name")
	}
	s.Adopt(level, name)
	switch req.Method {
	case "server/discover":
		b.discover(s, req)
		return false
	case "subscriptions/listen":
		listen(s, req)
		return false
	}
	if req.Method == "resources/read" {
		st.mu.Lock()
		if st.reads == nil {
			st.reads = map[jsonrpc.ID]struct{}{}
		}
		st.reads[req.ID] = struct{}{}
		st.mu.Unlock()
	}
	return true
}

// Result completes what a session (of state st) writes to a 2026-07-28
// client: results say their resultType, and resources/read results carry
// caching hints.
func (b *Bridge) Result(st *State, msg jsonrpc.Message) jsonrpc.Message {
	msg = completeResult(msg)
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !resp.ID.IsValid() {
		return msg
	}
	st.mu.Lock()
	_, read := st.reads[resp.ID]
	delete(st.reads, resp.ID)
	st.mu.Unlock()
	if !read || resp.Error != nil {
		return msg
	}
	res, err := b.g.Hints().ApplyRead(resp.Result)
	if err != nil {
		b.g.Log().Debug("adding caching hints to a resources/read result", "err", err)
		return msg
	}
	return &jsonrpc.Response{ID: resp.ID, Result: res, Extra: resp.Extra}
}

// ServerCapabilities is what the gateway offers at version (a 2025
// initialize or a 2026 server/discover), besides tasks.
func ServerCapabilities(version string) map[string]any {
	caps := map[string]any{
		"tools":       map[string]any{"listChanged": true},
		"prompts":     map[string]any{"listChanged": true},
		"resources":   map[string]any{"listChanged": true, "subscribe": true},
		"logging":     map[string]any{},
		"completions": map[string]any{},
	}
	if version == transports.Protocol2026 {
		// No logging/setLevel in this revision; list changes and resource
		// updates come through subscriptions/listen.
		delete(caps, "logging")
	}
	return caps
}

// OwnServer is a Session that is served as a server of its own (a
// virtual server): server/discover gives its server info and
// instructions instead of the gateway's.
type OwnServer interface {
	ServerInfo() any
	Instructions() string
}

// discover answers server/discover: the versions the gateway serves, the
// capabilities it aggregates, its server info and its upstreams'
// instructions.
func (b *Bridge) discover(s Session, req *jsonrpc.Request) {
	hints := b.g.Hints()
	info, instructions := b.g.ServerInfo(), b.g.Instructions()
	if own, ok := s.(OwnServer); ok {
		info, instructions = own.ServerInfo(), own.Instructions()
	}
	res := struct {
		Meta              map[string]any `json:"_meta"`
		ResultType        string         `json:"resultType"`
		SupportedVersions []string       `json:"supportedVersions"`
		Capabilities      map[string]any `json:"capabilities"`
		Instructions      string         `json:"instructions,omitempty"`
		TTLMs             int64          `json:"ttlMs"`
		CacheScope        string         `json:"cacheScope"`
	}{
		Meta:              map[string]any{MetaServerInfo: info},
		ResultType:        "complete",
		SupportedVersions: slices.Clone(downstreamVersions),
		Capabilities:      b.g.Capabilities(transports.Protocol2026),
		Instructions:      instructions,
		TTLMs:             hints.TTLMs,
		CacheScope:        hints.Scope,
	}
	data, err := json.Marshal(res)
	if err != nil {
		replyError(s, req.ID, jsonrpc.CodeInternalError, "server/discover: encoding the result: %v", err)
		return
	}
	reply(s, req.ID, data)
}

// completeResult marks a result of a 2026-07-28 request as complete when
// it says nothing else (results of 2025 upstreams never do).
func completeResult(msg jsonrpc.Message) jsonrpc.Message {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil || len(resp.Result) == 0 || resp.Result[0] != '{' {
		return msg
	}
	if _, ok, _ := wire.Field(resp.Result, "resultType"); ok {
		return msg
	}
	res, err := wire.SetField(resp.Result, "resultType", json.RawMessage(`"complete"`))
	if err != nil {
		return msg
	}
	return &jsonrpc.Response{ID: resp.ID, Result: res, Extra: resp.Extra}
}

// MissingCapability is the MissingRequiredClientCapability (-32021) error
// of a 2026-07-28 request for tool that needs capability (for approval:
// elicitation), or nil when the request declared it.
func (st *State) MissingCapability(tool, capability string) *jsonrpc.Error {
	if st.Declares(capability) {
		return nil
	}
	reason := fmt.Sprintf("edge-mcp: tool %q needs the client capability %q, which the request does not declare", tool, capability)
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}})
	return &jsonrpc.Error{Code: CodeMissingCapability, Message: reason, Data: data}
}

// relayedKinds are the client capabilities through which a server asks the
// client for something (2025: server→client requests; 2026-07-28:
// inputRequests of an input_required result). The gateway relays them, so
// what it declares upstream for a client is what that client declared.
var relayedKinds = []string{"sampling", "elicitation", "roots"}

// SetRelayed takes the capabilities a 2025 client declared (the member key
// of obj: initialize's params.capabilities) as those the gateway declares
// upstream on its behalf: only the relayed kinds, each with its own
// sub-capabilities (elicitation form/url, sampling tools…). A 2026-07-28
// client's are passed whole (Begin). Either way a 2026-07-28 upstream asks
// in an input_required result only for what this client can answer, and
// refuses with -32021 a call that needs what it cannot.
func (st *State) SetRelayed(obj []byte, key string) {
	declared, _, _ := wire.Field(obj, key)
	out := json.RawMessage(`{}`)
	for _, k := range relayedKinds {
		v, ok, err := wire.Field(declared, k)
		if err != nil || !ok || string(v) == "null" {
			continue
		}
		if next, err := wire.SetField(out, k, v); err == nil {
			out = next
		}
	}
	st.relayed.Store(&out)
}

// Relayed is the client capabilities the gateway declares upstream for
// the session's client: nil for a session that declared none (e.g. a 2025
// stdio client that never initialized).
func (st *State) Relayed() json.RawMessage {
	if p := st.relayed.Load(); p != nil {
		return *p
	}
	return nil
}

// ResourceNotFound is the answer to a request for a URI no upstream serves
// as SEP-2164 (2026-07-28) says and go-sdk (since v1.7.0) answers every
// revision: -32602 with the URI in data. (-32002 was the code of earlier
// revisions' examples; clients must accept either.)
func ResourceNotFound(id jsonrpc.ID, uri string) *jsonrpc.Response {
	data, _ := json.Marshal(struct {
		URI string `json:"uri"`
	}{uri})
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: "Resource not found: " + uri, Data: data}}
}
