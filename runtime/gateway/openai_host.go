package gateway

import (
	"net/http"

	"github.com/edge-mcp/edge-mcp/runtime/openaiapi"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is what the OpenAI-style tool API (package openaiapi, mounted
// at /v1/) sees of the gateway: the caller's view of the catalogue,
// computed as its MCP sessions compute theirs, and in-process sessions that
// run its calls through the whole tools/call pipeline.

// openAIHost implements openaiapi.Host for a gateway.
type openAIHost struct{ g *Gateway }

var _ openaiapi.Host = openAIHost{}

func (h openAIHost) Running() bool                        { return h.g.ctx != nil }
func (h openAIHost) MaxBodyBytes() int64                  { return h.g.config().MaxBodyBytes }
func (h openAIHost) ServeConn(conn transports.Connection) { h.g.ServeConn(conn) }

// Caller is who sent r, as authentication said, as a peer of the API.
func (h openAIHost) Caller(r *http.Request) openaiapi.Caller {
	id := identityOf(r)
	if p, ok := transports.PeerFromContext(r.Context()).(*peer); ok && p != nil {
		id = p.id
	}
	name, vs := id.Name, virtual.NameOf(r) // views are kept by name: one per virtual server
	if vs != "" {
		name += "\x00" + vs
	}
	return openaiapi.Caller{Name: name, Peer: &peer{id: id, transport: openaiapi.Transport, vs: vs}}
}

// apiVersion is what a caller's tools depend on.
type apiVersion struct {
	cat *catalogue
	pol *policyset.Gen
	gd  *guard
}

func (h openAIHost) Version() any {
	return apiVersion{h.g.route.catalogue(), h.g.pol.Current(), h.g.guard.Load()}
}

// Tools computes c's view exactly as its MCP sessions would, with a
// session that is never served.
func (h openAIHost) Tools(c openaiapi.Caller) []openaiapi.Tool {
	s := newSession(h.g, peerOnly{peer: c.Peer.(*peer)})
	vc := s.catalogue()
	s.cancel()
	tools := make([]openaiapi.Tool, 0, len(vc.Lists[kindTools])+len(vc.Deferred))
	for _, it := range vc.Lists[kindTools] {
		if it.Local == nil {
			tools = append(tools, openaiapi.Tool{Name: it.Exposed, Def: it.Raw})
		}
	}
	for _, it := range vc.Deferred {
		tools = append(tools, openaiapi.Tool{Name: it.Exposed, Def: it.Raw})
	}
	return tools
}

// peerOnly is a connection that is never read or written: it gives a
// session that only computes a view its peer.
type peerOnly struct {
	transports.Connection
	peer *peer
}

func (c peerOnly) PeerInfo() any { return c.peer }
