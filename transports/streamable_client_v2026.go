package transports

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// This file is what the streamable HTTP client does differently when it
// speaks 2026-07-28 (stateless): every POST carries MCP-Protocol-Version
// from the first request on, Mcp-Method, and Mcp-Name for the methods
// that name a tool, prompt or resource; there is no session and no
// standalone GET stream.

// ProtocolVersion2026 is the first MCP revision without initialize and
// sessions.
const ProtocolVersion2026 = "2026-07-28"

// Header names of the 2026-07-28 streamable HTTP transport.
const (
	hdrMethod = "Mcp-Method"
	hdrName   = "Mcp-Name"
)

// VersionSetter is implemented by client connections whose wire format
// depends on the protocol revision (streamable HTTP). The link sets the
// revision before its first request when it probes server/discover, and
// clears it ("") when it falls back to initialize, whose answer sets it.
type VersionSetter interface {
	SetProtocolVersion(v string)
}

// SetProtocolVersion makes the following requests speak revision v. From
// 2026-07-28 on, POSTs carry Mcp-Method and Mcp-Name and no standalone GET
// stream is opened.
func (c *streamableClientConn) SetProtocolVersion(v string) {
	c.mu.Lock()
	c.version, c.stateless, c.postHdr = v, v >= ProtocolVersion2026, nil
	c.mu.Unlock()
}

// methodHeaders returns hdr with the Mcp-Method and Mcp-Name headers of
// msg, a copy when msg is a request; hdr is not modified. A request whose
// Extra is [ParamHeaders] (the Mcp-Param-* headers a downstream request
// arrived with) carries them too, names and values unchanged: an
// intermediary must forward the ones it does not know.
func methodHeaders(hdr http.Header, msg jsonrpc.Message) http.Header {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return hdr
	}
	h := hdr.Clone()
	h[hdrMethod] = []string{req.Method}
	if name, ok := mcpName(req); ok {
		h[hdrName] = []string{name}
	}
	if ph, ok := req.Extra.(ParamHeaders); ok {
		for k, v := range ph {
			if strings.HasPrefix(k, hdrMcpParamPrefix) {
				h[k] = v
			}
		}
	}
	return h
}

// mcpName is the value of the Mcp-Name header of req: the tool or prompt
// name, the resource URI, or the task id (the tasks extension).
func mcpName(req *jsonrpc.Request) (string, bool) {
	key := nameParam(req.Method)
	if key == "" {
		return "", false
	}
	return wire.String(req.Params, key)
}

// nameParam is the params member a method's Mcp-Name header mirrors ("":
// none). The tasks extension (SEP-2663) adds taskId for tasks/get,
// tasks/update and tasks/cancel.
func nameParam(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		return "taskId"
	}
	return ""
}

// trackCall, on a stateless connection, keeps how to end the POST of call
// (its HTTP request's cancel), or, when msg cancels a call in flight, ends
// that call's POST: without a session, a server cancels a request when its
// POST goes away (go-sdk: with PropagateRequestCancellation). The cancelled
// call gets no answer, as after notifications/cancelled, which is posted
// too.
func (c *streamableClientConn) trackCall(msg jsonrpc.Message, call *jsonrpc.Request, cancel context.CancelFunc) {
	if call != nil {
		c.mu.Lock()
		if _, ok := c.pending[call.ID]; ok {
			if c.aborts == nil {
				c.aborts = make(map[jsonrpc.ID]context.CancelFunc)
			}
			c.aborts[call.ID] = cancel
		}
		c.mu.Unlock()
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	c.mu.Lock()
	abort := c.aborts[id]
	delete(c.aborts, id)
	delete(c.pending, id)
	c.mu.Unlock()
	if abort != nil {
		abort()
	}
}
