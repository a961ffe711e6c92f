package gateway

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/runtime/catalog"
)

// The aggregated catalogue is runtime/catalog's: what each upstream
// offers, merged into immutable snapshots. Its items name their upstream
// (a *upstream), and the gateway's own tools carry the function that
// answers them (a localCall).

// listKind names one of the four aggregated lists.
type listKind = catalog.Kind

const (
	kindTools     = catalog.Tools
	kindPrompts   = catalog.Prompts
	kindResources = catalog.Resources
	kindTemplates = catalog.Templates
	numKinds      = catalog.NumKinds
)

// listKinds describes each list (catalog.Kinds).
var listKinds = catalog.Kinds

// localCall answers a call of one of the gateway's own tools.
type localCall = func(s *session, req *jsonrpc.Request)

type (
	item          = catalog.Item[*upstream, localCall]
	upstreamLists = catalog.Lists[*upstream, localCall]
	catalogue     = catalog.Catalogue[*upstream, localCall]
	conflict      = catalog.Conflict
)

// parseItems splits one list result into items for upstream up, renaming
// tools and prompts when the server has a prefix.
func parseItems(up *upstream, k listKind, result json.RawMessage) ([]item, string, error) {
	return catalog.Parse[*upstream, localCall](up, up.prefix, up.log, k, result)
}

// connectionMetaKeys are the per-connection _meta keys of the 2026-07-28
// protocol; they describe one connection and must not be copied to another.
var connectionMetaKeys = []string{
	"io.modelcontextprotocol/protocolVersion",
	"io.modelcontextprotocol/clientCapabilities",
	"io.modelcontextprotocol/clientInfo",
}
