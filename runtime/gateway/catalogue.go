package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/yosida95/uritemplate/v3"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/listing"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// listKind names one of the four aggregated lists.
type listKind int

const (
	kindTools listKind = iota
	kindPrompts
	kindResources
	kindTemplates
	numKinds
)

// listKinds describes each list: its list method, the result member that
// holds the items, the item member that identifies an item, and the
// notification that announces a change.
var listKinds = [numKinds]struct {
	method, member, key, changed string
}{
	kindTools:     {"tools/list", "tools", "name", "notifications/tools/list_changed"},
	kindPrompts:   {"prompts/list", "prompts", "name", "notifications/prompts/list_changed"},
	kindResources: {"resources/list", "resources", "uri", "notifications/resources/list_changed"},
	kindTemplates: {"resources/templates/list", "resourceTemplates", "uriTemplate", "notifications/resources/list_changed"},
}

// item is one upstream definition (tool, prompt, resource or template) as the
// catalogue serves it.
type item struct {
	up       *upstream
	name     string          // the upstream's own name, URI or URI template
	exposed  string          // the name clients see (prefixed tools and prompts)
	raw      json.RawMessage // the definition as the upstream sent it, with the exposed name
	template *uritemplate.Template
	// local, when set, answers calls of the item in the gateway itself
	// (the gateway's own tools); up is nil then.
	local func(s *session, req *jsonrpc.Request)
	// vt is the override of a virtual server's tool (virtual.go).
	vt *virtual.Tool
}

// upstreamLists is what one upstream currently offers, in its own order.
type upstreamLists [numKinds][]item

// catalogue is an immutable snapshot of everything the gateway serves. A new
// snapshot is built whenever an upstream's offer changes and swapped in
// atomically; requests read the snapshot they started with.
type catalogue struct {
	gen   uint64
	lists [numKinds][]*item
	index [numKinds]map[string]*item // exposed name, URI or template → item
	pages [numKinds][]json.RawMessage
	// deferred are the tools of a session's view left out of its tools
	// list: callable by name, found by search.
	deferred []*item
	// conflicts are the names more than one server offers, and who got
	// them; the router logs each once.
	conflicts []conflict
	// withheld are the tools tool pinning keeps out of the catalogue
	// (changed since pinned, awaiting approval), by exposed name.
	withheld map[string]*item
	// gone are the tools and prompts of upstreams that were connected and
	// are not now, by exposed name: a call of one is answered with the
	// server's state rather than "unknown tool".
	gone [numKinds]map[string]*item
	// virt is a virtual server's view's share of the catalogue it was
	// built from: index then holds only the view's rewritten items (find).
	virt *virtualShare
}

// conflict is a name two servers offer: winner serves it, loser's is not
// exposed (reserved: the name is reserved for winner by the config).
type conflict struct {
	kind          listKind
	name          string
	winner, loser string
	reserved      bool
}

// buildCatalogue merges the offers of ups (in config order). Names pinned by
// reserved (exposed name → server) are never taken by another server;
// otherwise the first server wins. Conflicts are recorded in the snapshot
// (the router logs each once, not on every rebuild). Tools and prompts are
// matched by their exposed (possibly prefixed) names, resources and
// templates by their URI or URI template, which no prefix changes.
func buildCatalogue(gen uint64, ups []*upstream, offers []*upstreamLists, reserved [numKinds]map[string]string, pageSize int) *catalogue {
	c := &catalogue{gen: gen}
	for k := range numKinds {
		c.index[k] = make(map[string]*item)
		for i, off := range offers {
			if off == nil {
				continue
			}
			for j := range off[k] {
				it := &off[k][j]
				if owner, ok := reserved[k][it.exposed]; ok && owner != ups[i].name {
					c.conflicts = append(c.conflicts, conflict{kind: k, name: it.exposed, winner: owner, loser: ups[i].name, reserved: true})
					continue
				}
				if prev, ok := c.index[k][it.exposed]; ok {
					c.conflicts = append(c.conflicts, conflict{kind: k, name: it.exposed, winner: prev.up.name, loser: ups[i].name})
					continue
				}
				c.index[k][it.exposed] = it
				c.lists[k] = append(c.lists[k], it)
			}
		}
		c.pages[k] = encodePages(k, c.lists[k], pageSize)
	}
	return c
}

// encodePages encodes the list results once per snapshot, so a list request
// costs a slice lookup (runtime/listing).
func encodePages(k listKind, items []*item, pageSize int) []json.RawMessage {
	return listing.Pages(listKinds[k].member, items, itemRaw, pageSize)
}

func itemRaw(it *item) json.RawMessage { return it.raw }

// page returns the list result for cursor ("" for the first page).
func (c *catalogue) page(k listKind, cursor string, pageSize int) (json.RawMessage, error) {
	if c.pages[k] == nil { // a large virtual server's view (virtual.go)
		return listing.Page(encodePages(k, c.lists[k], pageSize), listKinds[k].member, c.lists[k], itemRaw, cursor, pageSize)
	}
	return listing.Page(c.pages[k], listKinds[k].member, c.lists[k], itemRaw, cursor, pageSize)
}

// resource finds the upstream that serves uri: an exact resource first, then
// the first matching template.
func (c *catalogue) resource(uri string) *upstream {
	if it := c.find(kindResources, uri); it != nil {
		return it.up
	}
	for _, it := range c.lists[kindTemplates] {
		if it.template != nil && it.template.Match(uri) != nil {
			return it.up
		}
	}
	return nil
}

// sameList reports whether two snapshots serve the same list k.
func sameList(a, b *catalogue, k listKind) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.pages[k] == nil || b.pages[k] == nil {
		return sameItems(a.lists[k], b.lists[k])
	}
	return listing.Same(a.pages[k], b.pages[k])
}

// parseItems splits one list result into items for upstream up, renaming
// tools and prompts when the server has a prefix.
func parseItems(up *upstream, k listKind, result json.RawMessage) ([]item, string, error) {
	raws, next, err := listing.Parse(result, listKinds[k].method, listKinds[k].member)
	if err != nil {
		return nil, "", err
	}
	items := make([]item, 0, len(raws))
	for _, raw := range raws {
		name, ok := wire.String(raw, listKinds[k].key)
		if !ok || name == "" {
			up.log.Warn("skipping list item without a string key", "method", listKinds[k].method, "key", listKinds[k].key)
			continue
		}
		it := item{up: up, name: name, exposed: name, raw: raw}
		if (k == kindTools || k == kindPrompts) && up.prefix != "" {
			it.exposed = up.prefix + "_" + name
			renamed, err := wire.SetField(raw, "name", wire.AppendString(nil, it.exposed))
			if err != nil {
				return nil, "", fmt.Errorf("renaming %q: %w", name, err)
			}
			it.raw = renamed
		}
		if k == kindTemplates {
			t, err := uritemplate.New(name)
			if err != nil {
				up.log.Warn("resource template does not parse; reads will not route by it", "template", name, "err", err)
			} else {
				it.template = t
			}
		}
		items = append(items, it)
	}
	return items, next, nil
}

// connectionMetaKeys are the per-connection _meta keys of the 2026-07-28
// protocol; they describe one connection and must not be copied to another.
var connectionMetaKeys = []string{
	"io.modelcontextprotocol/protocolVersion",
	"io.modelcontextprotocol/clientCapabilities",
	"io.modelcontextprotocol/clientInfo",
}
