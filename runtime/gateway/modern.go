package gateway

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/tasks"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is the downstream side of protocol revision 2026-07-28: no
// initialize, every request carries its protocol version, client
// capabilities and client info in _meta, server/discover says what the
// gateway offers, and list results carry caching hints. Over streamable
// HTTP each such request arrives on its own one-request connection
// (transports/streamable_stateless.go); the session it gets is the ordinary
// one, so routing, policies, admission and results take the same path as a
// 2025 session's.

const (
	protocol2026 = transports.Protocol2026

	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaLogLevel           = "io.modelcontextprotocol/logLevel"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"

	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
)

// downstreamVersions are the revisions the gateway serves its clients,
// newest first.
var downstreamVersions = []string{protocol2026, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// removedIn2026 are the methods revision 2026-07-28 dropped.
var removedIn2026 = map[string]string{
	"initialize":            "server/discover",
	"ping":                  "",
	"logging/setLevel":      "",
	"resources/subscribe":   "subscriptions/listen",
	"resources/unsubscribe": "subscriptions/listen",
}

// requestVersion returns the protocol version a request names in its _meta
// (2026-07-28 and later), if it names one.
func requestVersion(req *jsonrpc.Request) (string, bool) {
	meta, ok, err := wire.Field(req.Params, "_meta")
	if err != nil || !ok {
		return "", false
	}
	return wire.String(meta, transports.MetaProtocolVersion)
}

// modernRequest applies the _meta of a request that names its protocol
// version: an unsupported version, a removed method and server/discover
// are answered here; otherwise the session takes the client's info from
// the request and the request goes on to the ordinary dispatch (true).
func (s *session) modernRequest(req *jsonrpc.Request, version string) bool {
	if version != protocol2026 {
		data, _ := json.Marshal(struct {
			Supported []string `json:"supported"`
			Requested string   `json:"requested"`
		}{downstreamVersions, version})
		s.write(s.ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: codeUnsupportedVersion,
			Message: fmt.Sprintf("unsupported protocol version %q", version), Data: data}})
		return false
	}
	if instead, removed := removedIn2026[req.Method]; removed {
		msg := fmt.Sprintf("method not found: %s was removed in protocol %s", req.Method, protocol2026)
		if instead != "" {
			msg += "; use " + instead
		}
		s.replyError(req.ID, jsonrpc.CodeMethodNotFound, "%s", msg)
		return false
	}
	meta, _, _ := wire.Field(req.Params, "_meta")
	if _, ok, _ := wire.Field(meta, metaClientCapabilities); !ok {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "missing _meta field %q", metaClientCapabilities)
		return false
	}
	s.modern.Store(true)
	s.mu.Lock()
	s.declared, _, _ = wire.Field(meta, metaClientCapabilities)
	s.mu.Unlock()
	// Passed through whole: input_required results and everything else
	// reach this client unchanged, extensions included.
	caps, _, _ := wire.Field(meta, metaClientCapabilities)
	s.relayed.Store(&caps)
	// Log messages reach the client only at the level its request asks
	// for; a request that names none gets none.
	level, _ := wire.String(meta, metaLogLevel)
	if i := levelIndex(level); i >= 0 {
		s.logLevel.Store(int32(i))
	} else {
		s.logLevel.Store(int32(len(logLevels)))
	}
	if info, ok, _ := wire.Field(meta, metaClientInfo); ok {
		if name, ok := wire.String(info, "name"); ok {
			s.client.Name = name
		}
	}
	switch req.Method {
	case "server/discover":
		s.discover(req)
		return false
	case "subscriptions/listen":
		s.listen(req)
		return false
	}
	if req.Method == "resources/read" {
		s.mu.Lock()
		if s.reads == nil {
			s.reads = map[jsonrpc.ID]struct{}{}
		}
		s.reads[req.ID] = struct{}{}
		s.mu.Unlock()
	}
	return true
}

// modernResult completes what the session writes to a 2026-07-28 client:
// results say their resultType, and resources/read results carry caching
// hints.
func (s *session) modernResult(msg jsonrpc.Message) jsonrpc.Message {
	msg = completeResult(msg)
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !resp.ID.IsValid() {
		return msg
	}
	s.mu.Lock()
	_, read := s.reads[resp.ID]
	delete(s.reads, resp.ID)
	s.mu.Unlock()
	if !read || resp.Error != nil {
		return msg
	}
	res, err := s.cacheHints().applyRead(resp.Result)
	if err != nil {
		s.g.log.Debug("adding caching hints to a resources/read result", "err", err)
		return msg
	}
	return &jsonrpc.Response{ID: resp.ID, Result: res, Extra: resp.Extra}
}

// serverCapabilities is what the gateway offers at version (a 2025
// initialize or a 2026 server/discover).
func serverCapabilities(version string) map[string]any {
	caps := map[string]any{
		"tools":       map[string]any{"listChanged": true},
		"prompts":     map[string]any{"listChanged": true},
		"resources":   map[string]any{"listChanged": true, "subscribe": true},
		"logging":     map[string]any{},
		"completions": map[string]any{},
	}
	if version == protocol2026 {
		// No logging/setLevel in this revision; list changes and resource
		// updates come through subscriptions/listen.
		delete(caps, "logging")
	}
	return caps
}

// serverInfo is the gateway's Implementation.
func serverInfo() map[string]any {
	return map[string]any{"name": "edge-mcp", "title": "edge-mcp gateway", "version": Version}
}

// instructions joins the instructions of the connected upstreams.
func (g *Gateway) instructions() string {
	var out string
	for _, u := range g.route.upstreams().list {
		if l := u.current(); l != nil && l.instructions != "" {
			out += u.name + ": " + l.instructions + "\n"
		}
	}
	return out
}

// discover answers server/discover: the versions the gateway serves, the
// capabilities it aggregates, its server info and its upstreams'
// instructions.
func (s *session) discover(req *jsonrpc.Request) {
	hints := s.cacheHints()
	res := struct {
		Meta              map[string]any `json:"_meta"`
		ResultType        string         `json:"resultType"`
		SupportedVersions []string       `json:"supportedVersions"`
		Capabilities      map[string]any `json:"capabilities"`
		Instructions      string         `json:"instructions,omitempty"`
		TTLMs             int64          `json:"ttlMs"`
		CacheScope        string         `json:"cacheScope"`
	}{
		Meta:              map[string]any{metaServerInfo: serverInfo()},
		ResultType:        "complete",
		SupportedVersions: slices.Clone(downstreamVersions),
		Capabilities:      tasks.Capabilities(taskOps{s.g}, serverCapabilities(protocol2026), protocol2026),
		Instructions:      s.g.instructions(),
		TTLMs:             hints.ttlMs,
		CacheScope:        hints.scope,
	}
	b, err := json.Marshal(res)
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInternalError, "server/discover: encoding the result: %v", err)
		return
	}
	s.reply(req.ID, b)
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

// lacksCapability answers a 2026-07-28 tool call with
// MissingRequiredClientCapability (-32021) when the client capability it
// needs (for approval: elicitation) is not among those its request
// declared, and reports whether it did. Other sessions declared theirs at
// initialize and are never answered here.
func (s *session) lacksCapability(tc *toolCall, capability string) bool {
	if !s.modern.Load() {
		return false
	}
	s.mu.Lock()
	declared := s.declared
	s.mu.Unlock()
	if _, ok, _ := wire.Field(declared, capability); ok {
		return false
	}
	reason := fmt.Sprintf("edge-mcp: tool %q needs the client capability %q, which the request does not declare", tc.it.exposed, capability)
	s.recordCall(tc, metrics.OutcomeDenied, reason)
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}})
	s.write(s.ctx, &jsonrpc.Response{ID: tc.req.ID, Error: &jsonrpc.Error{Code: codeMissingCapability, Message: reason, Data: data}})
	return true
}

// relayedKinds are the client capabilities through which a server asks the
// client for something (2025: server→client requests; 2026-07-28:
// inputRequests of an input_required result). The gateway relays them, so
// what it declares upstream for a client is what that client declared.
var relayedKinds = []string{"sampling", "elicitation", "roots"}

// setRelayed takes the capabilities a 2025 client declared (the member key
// of obj: initialize's params.capabilities) as those the gateway declares
// upstream on its behalf: only the relayed kinds, each with its own
// sub-capabilities (elicitation form/url, sampling tools…). A 2026-07-28
// client's are passed whole (modernRequest). Either way a 2026-07-28
// upstream asks in an input_required result only for what this client can
// answer, and refuses with -32021 a call that needs what it cannot.
func (s *session) setRelayed(obj []byte, key string) {
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
	s.relayed.Store(&out)
}

// clientMeta is what a 2026-07-28 link's request says of the client in
// _meta beyond the protocol version (probe.go's stampFor).
type clientMeta struct {
	caps     json.RawMessage // nil: the gateway's own (upstreamCapabilities)
	logLevel string          // "": none
}

// clientMeta is what a 2026-07-28 upstream is told of this session's
// client: the capabilities it declared (nil for a session that declared
// none, e.g. a 2025 stdio client that never initialized) and, for a 2025
// client, the level it set with logging/setLevel: the revision has no
// setLevel, a request names its level in _meta. A 2026-07-28 client's own
// logLevel passes in its request's _meta unchanged.
func (s *session) clientMeta() clientMeta {
	var cm clientMeta
	if p := s.relayed.Load(); p != nil {
		cm.caps = *p
	}
	if !s.modern.Load() {
		if i := int(s.logLevel.Load()); i >= 0 && i < len(logLevels) {
			cm.logLevel = logLevels[i]
		}
	}
	return cm
}

// resourceNotFound answers a request for a URI no upstream serves as
// SEP-2164 (2026-07-28) says and go-sdk (since v1.7.0) answers every
// revision: -32602 with the URI in data. (-32002 was the code of earlier
// revisions' examples; clients must accept either.)
func (s *session) resourceNotFound(id jsonrpc.ID, uri string) {
	data, _ := json.Marshal(struct {
		URI string `json:"uri"`
	}{uri})
	s.write(s.ctx, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: "Resource not found: " + uri, Data: data}})
}
