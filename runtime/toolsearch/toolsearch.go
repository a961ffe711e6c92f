// Package toolsearch is the gateway's answer to catalogues too large to
// list: tools a tool rule marks {"visibility":"deferred"} are left out of a
// session's tools/list and reached through two gateway tools instead:
//
//   - tool_search ranks the session's deferred tools against a free-text
//     query (BM25F over names, descriptions and parameter names, see
//     internal/search) and returns each match's name, description and
//     input schema;
//   - tool_invoke calls a tool of the session's view by name, through the
//     same chain as a direct tools/call (access lists, rate limits,
//     argument validation, policies, approval, result hooks); the gateway
//     carries it out (runtime/gateway, deferred.go).
//
// Why a tool_invoke meta-tool rather than adding the found tools to the
// session's list and sending notifications/tools/list_changed: many real
// clients (Claude Desktop, Cursor, several agent SDKs) read the tool list
// once per conversation and do not refresh it on list_changed mid-turn, so
// a tool announced that way would stay out of the model's reach. A
// meta-tool works with every client that can call tools at all, and it
// keeps the session's list (and the model's context) small. Found tools
// also stay callable directly by name, for clients that prefer that.
//
// The search index is built on the first search of a set of deferred tools
// and shared by every view with the same set (same names and definitions, in
// the same order): thousands of sessions over one snapshot of 10,000 tools
// cost one build. A Set and the index cache are safe for concurrent use; a
// Set lives as long as the session view that made it, the cache as long as
// the process (it holds indexes, never the gateway's tools).
package toolsearch

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"

	"github.com/edge-mcp/edge-mcp/internal/search"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// Names and limits of the gateway's own tools.
const (
	SearchName = "tool_search"
	InvokeName = "tool_invoke"

	DefaultLimit = 8
	MaxLimit     = 50
)

// searchSchema and invokeSchema are the meta tools' input schemas.
const (
	searchSchema = `{"type":"object","properties":{` +
		`"query":{"type":"string","description":"What you want to do, in a few words, e.g. \"create a jira issue\" or \"weather forecast\". Tool names work too."},` +
		`"limit":{"type":"integer","minimum":1,"maximum":50,"description":"Most matches to return (default 8)."}},` +
		`"required":["query"]}`
	invokeSchema = `{"type":"object","properties":{` +
		`"name":{"type":"string","description":"The exact name of the tool to call, as tool_search returned it."},` +
		`"arguments":{"type":"object","description":"The tool's arguments, matching the inputSchema tool_search returned for it."}},` +
		`"required":["name"]}`
)

// Tools is an ordered set of tools as the gateway holds them: At returns
// the i-th tool's exposed name (unique in the set) and definition.
type Tools interface {
	Len() int
	At(i int) (name string, def json.RawMessage)
}

// Defs returns the definitions of tool_search and tool_invoke for a view
// that defers n tools.
func Defs(n int) (searchDef, invokeDef json.RawMessage) {
	searchDesc := fmt.Sprintf("%d more tools are available from this gateway than are listed. "+
		"Before concluding that you cannot do something, search them by what you want to do, in a few words "+
		"(for example \"create a jira issue\" or \"weather forecast\"). Each match comes with its name, "+
		"description and input schema; then call it with %s (or directly by its name).", n, InvokeName)
	invokeDesc := fmt.Sprintf("Call a tool found with %s: give its exact name and arguments that match its input schema. "+
		"The call is checked and answered exactly as if the tool had been called directly.", SearchName)
	return metaToolDef(SearchName, "Search tools", searchDesc, searchSchema, true),
		metaToolDef(InvokeName, "Call a found tool", invokeDesc, invokeSchema, false)
}

// metaToolDef encodes a meta tool's definition.
func metaToolDef(name, title, desc, schema string, readOnly bool) json.RawMessage {
	b := []byte(`{"name":`)
	b = wire.AppendString(b, name)
	b = append(b, `,"title":`...)
	b = wire.AppendString(b, title)
	b = append(b, `,"description":`...)
	b = wire.AppendString(b, desc)
	b = append(b, `,"inputSchema":`...)
	b = append(b, schema...)
	b = fmt.Appendf(b, `,"annotations":{"title":%s,"readOnlyHint":%t}}`, wire.AppendString(nil, title), readOnly)
	return b
}

// Set is the deferred tools of one session view; its search index is
// looked up (or built) on the first search.
type Set struct {
	tools Tools
	once  sync.Once
	ix    *Index
}

// NewSet returns the set of tools.
func NewSet(tools Tools) *Set { return &Set{tools: tools} }

func (d *Set) index() *Index {
	d.once.Do(func() { d.ix = Shared(d.tools) })
	return d.ix
}

// Search answers a tools/call of tool_search with arguments args: the
// CallToolResult, or the text of the tool error to answer instead.
func (d *Set) Search(args json.RawMessage) (result json.RawMessage, problem string) {
	var in struct {
		Query *string  `json:"query"`
		Limit *float64 `json:"limit"`
	}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, `edge-mcp: tool_search takes {"query": string, "limit"?: integer}: ` + err.Error()
		}
	}
	if in.Query == nil || strings.TrimSpace(*in.Query) == "" {
		return nil, `edge-mcp: tool_search needs a "query": what you want to do, in a few words`
	}
	limit := DefaultLimit
	if in.Limit != nil {
		l := *in.Limit
		if l < 1 || l != math.Trunc(l) {
			return nil, `edge-mcp: tool_search "limit" must be a positive integer`
		}
		limit = int(min(l, MaxLimit))
	}
	ix := d.index()
	hits := ix.Hits(*in.Query, limit)
	return searchResult(*in.Query, hits, ix, d.tools), ""
}

// searchResult encodes the matches as a CallToolResult: structuredContent
// {"tools":[{name, description, inputSchema}...]} and the same as text for
// clients that show models only the content.
func searchResult(query string, hits []search.Hit, ix *Index, tools Tools) json.RawMessage {
	var text strings.Builder
	var structured bytes.Buffer
	structured.WriteString(`{"tools":[`)
	if len(hits) == 0 {
		fmt.Fprintf(&text, "No tool matches %q. Try other words: what the tool does, or the system it works on.", query)
	} else {
		fmt.Fprintf(&text, "%d tools match %q, best first. Call one with %s {\"name\": ..., \"arguments\": {...}}, or directly by its name.\n",
			len(hits), query, InvokeName)
	}
	n := 0
	for _, h := range hits {
		pos, ok := ix.pos[h.Key]
		if !ok {
			continue
		}
		exposed, raw := tools.At(int(pos))
		desc, _ := wire.String(raw, "description")
		if desc == "" {
			desc, _ = wire.String(raw, "title")
		}
		schema, ok, _ := wire.Field(raw, "inputSchema")
		if !ok || !wire.Valid(schema) {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		var compact bytes.Buffer
		if json.Compact(&compact, schema) == nil {
			schema = compact.Bytes()
		}
		if n > 0 {
			structured.WriteByte(',')
		}
		n++
		structured.WriteString(`{"name":`)
		structured.Write(wire.AppendString(nil, exposed))
		structured.WriteString(`,"description":`)
		structured.Write(wire.AppendString(nil, desc))
		structured.WriteString(`,"inputSchema":`)
		structured.Write(schema)
		structured.WriteByte('}')
		fmt.Fprintf(&text, "\n%d. %s\n", n, exposed)
		if desc != "" {
			fmt.Fprintf(&text, "   %s\n", strings.Join(strings.Fields(desc), " "))
		}
		fmt.Fprintf(&text, "   inputSchema: %s\n", schema)
	}
	structured.WriteString(`]}`)
	b := []byte(`{"content":[{"type":"text","text":`)
	b = wire.AppendString(b, strings.TrimRight(text.String(), "\n"))
	b = append(b, `}],"structuredContent":`...)
	b = append(b, structured.Bytes()...)
	return append(b, '}')
}

// Index is a search index over one ordered set of tools, keyed by exposed
// name, and where each key sits in that set.
type Index struct {
	ix  *search.Index
	pos map[string]int32
}

// Build indexes tools (exposed names are unique in a view).
func Build(tools Tools) *Index {
	n := tools.Len()
	docs := make([]search.Doc, n)
	pos := make(map[string]int32, n)
	for i := range n {
		name, raw := tools.At(i)
		docs[i] = search.DocFromTool(name, raw)
		pos[name] = int32(i)
	}
	return &Index{ix: search.Build(docs), pos: pos}
}

// Hits ranks the indexed tools against query, at most limit.
func (ix *Index) Hits(query string, limit int) []search.Hit { return ix.ix.Search(query, limit) }

// Shared returns the index of tools from the process's cache, building it
// when no view with the same tools built it before.
func Shared(tools Tools) *Index { return toolIndexes.get(tools) }

// indexCache shares search indexes between views whose deferred tools are
// the same: entries are keyed by a 128-bit hash of the tools' exposed names
// and definitions in order, so an entry is right for any gateway and any
// snapshot that serves that content, and a snapshot whose tools did not
// change (an upstream reconnected) reuses its index. Entries hold no tools.
// The cache keeps the most recently used few; concurrent first searches of
// one set wait for one build.
type indexCache struct {
	mu      sync.Mutex
	max     int
	entries []*indexEntry // least recently used first
}

type indexEntry struct {
	key   [2]uint64
	n     int
	ready chan struct{}
	ix    *Index
}

// toolIndexes is the process's index cache. It is content-addressed (see
// indexCache), so sharing it between gateways is correct.
var toolIndexes = &indexCache{max: 8}

// contentSeeds seed the two halves of the content hash.
var contentSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// contentKey hashes the exposed names and definitions of tools, in order.
func contentKey(tools Tools) [2]uint64 {
	var key [2]uint64
	var n [8]byte
	for i, seed := range contentSeeds {
		var h maphash.Hash
		h.SetSeed(seed)
		for j := range tools.Len() {
			name, raw := tools.At(j)
			binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
			h.Write(n[:])
			h.WriteString(name)
			binary.LittleEndian.PutUint64(n[:], uint64(len(raw)))
			h.Write(n[:])
			h.Write(raw)
		}
		key[i] = h.Sum64()
	}
	return key
}

// get returns the index of tools, building it when no view with the same
// tools built it before.
func (c *indexCache) get(tools Tools) *Index {
	key := contentKey(tools)
	n := tools.Len()
	c.mu.Lock()
	for i, e := range c.entries {
		if e.key == key && e.n == n {
			copy(c.entries[i:], c.entries[i+1:])
			c.entries[len(c.entries)-1] = e
			c.mu.Unlock()
			<-e.ready
			return e.ix
		}
	}
	e := &indexEntry{key: key, n: n, ready: make(chan struct{})}
	if len(c.entries) >= c.max {
		c.entries = append(c.entries[:0], c.entries[1:]...)
	}
	c.entries = append(c.entries, e)
	c.mu.Unlock()
	e.ix = Build(tools)
	close(e.ready)
	return e.ix
}
