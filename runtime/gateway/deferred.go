package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/openai"
	"github.com/edge-mcp/edge-mcp/internal/search"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// This file is the gateway's answer to catalogues too large to list: tools
// a tool rule marks {"visibility":"deferred"} are left out of a session's
// tools/list (view.go) and reached through two gateway tools instead:
//
//   - tool_search ranks the session's deferred tools against a free-text
//     query (BM25F over names, descriptions and parameter names, see
//     internal/search) and returns each match's name, description and
//     input schema;
//   - tool_invoke calls a tool of the session's view by name, through the
//     same chain as a direct tools/call (access lists, rate limits,
//     argument validation, policies, approval, result hooks).
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
// cost one build.

// Names and limits of the gateway's own tools.
const (
	toolSearchName = "tool_search"
	toolInvokeName = "tool_invoke"

	searchDefaultLimit = 8
	searchMaxLimit     = 50
)

// toolSearchSchema and toolInvokeSchema are the meta tools' input schemas.
const (
	toolSearchSchema = `{"type":"object","properties":{` +
		`"query":{"type":"string","description":"What you want to do, in a few words, e.g. \"create a jira issue\" or \"weather forecast\". Tool names work too."},` +
		`"limit":{"type":"integer","minimum":1,"maximum":50,"description":"Most matches to return (default 8)."}},` +
		`"required":["query"]}`
	toolInvokeSchema = `{"type":"object","properties":{` +
		`"name":{"type":"string","description":"The exact name of the tool to call, as tool_search returned it."},` +
		`"arguments":{"type":"object","description":"The tool's arguments, matching the inputSchema tool_search returned for it."}},` +
		`"required":["name"]}`
)

// metaTools returns the gateway's own tools a session sees besides its
// catalogue, given the tools deferred out of its list: tool_search and
// tool_invoke when anything is deferred, else none. The items have no
// upstream (up is nil); toolCallAnswered answers them through local,
// before the pipeline.
func (g *Gateway) metaTools(s *session, deferred []*item) []*item {
	if len(deferred) == 0 {
		return nil
	}
	set := &deferredSet{tools: deferred}
	searchDesc := fmt.Sprintf("%d more tools are available from this gateway than are listed. "+
		"Before concluding that you cannot do something, search them by what you want to do, in a few words "+
		"(for example \"create a jira issue\" or \"weather forecast\"). Each match comes with its name, "+
		"description and input schema; then call it with %s (or directly by its name).", len(deferred), toolInvokeName)
	invokeDesc := fmt.Sprintf("Call a tool found with %s: give its exact name and arguments that match its input schema. "+
		"The call is checked and answered exactly as if the tool had been called directly.", toolSearchName)
	return []*item{
		{name: toolSearchName, exposed: toolSearchName, raw: metaToolDef(toolSearchName, "Search tools", searchDesc, toolSearchSchema, true), local: set.search},
		{name: toolInvokeName, exposed: toolInvokeName, raw: metaToolDef(toolInvokeName, "Call a found tool", invokeDesc, toolInvokeSchema, false), local: invokeTool},
	}
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

// deferredSet is the deferred tools of one session view; its search index
// is looked up (or built) on the first search.
type deferredSet struct {
	tools []*item
	once  sync.Once
	ix    *toolIndex
}

func (d *deferredSet) index() *toolIndex {
	d.once.Do(func() { d.ix = toolIndexes.get(d.tools) })
	return d.ix
}

// search answers a tools/call of tool_search.
func (d *deferredSet) search(s *session, req *jsonrpc.Request) {
	args, _, _ := wire.Field(req.Params, "arguments")
	var in struct {
		Query *string  `json:"query"`
		Limit *float64 `json:"limit"`
	}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			s.reply(req.ID, toolError(`edge-mcp: tool_search takes {"query": string, "limit"?: integer}: `+err.Error()))
			return
		}
	}
	if in.Query == nil || strings.TrimSpace(*in.Query) == "" {
		s.reply(req.ID, toolError(`edge-mcp: tool_search needs a "query": what you want to do, in a few words`))
		return
	}
	limit := searchDefaultLimit
	if in.Limit != nil {
		l := *in.Limit
		if l < 1 || l != math.Trunc(l) {
			s.reply(req.ID, toolError(`edge-mcp: tool_search "limit" must be a positive integer`))
			return
		}
		limit = int(min(l, searchMaxLimit))
	}
	ix := d.index()
	hits := ix.ix.Search(*in.Query, limit)
	s.reply(req.ID, searchResult(*in.Query, hits, ix, d.tools))
}

// searchResult encodes the matches as a CallToolResult: structuredContent
// {"tools":[{name, description, inputSchema}...]} and the same as text for
// clients that show models only the content.
func searchResult(query string, hits []search.Hit, ix *toolIndex, tools []*item) json.RawMessage {
	var text strings.Builder
	var structured bytes.Buffer
	structured.WriteString(`{"tools":[`)
	if len(hits) == 0 {
		fmt.Fprintf(&text, "No tool matches %q. Try other words: what the tool does, or the system it works on.", query)
	} else {
		fmt.Fprintf(&text, "%d tools match %q, best first. Call one with %s {\"name\": ..., \"arguments\": {...}}, or directly by its name.\n",
			len(hits), query, toolInvokeName)
	}
	n := 0
	for _, h := range hits {
		pos, ok := ix.pos[h.Key]
		if !ok {
			continue
		}
		it := tools[pos]
		desc, _ := wire.String(it.raw, "description")
		if desc == "" {
			desc, _ = wire.String(it.raw, "title")
		}
		schema, ok, _ := wire.Field(it.raw, "inputSchema")
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
		structured.Write(wire.AppendString(nil, it.exposed))
		structured.WriteString(`,"description":`)
		structured.Write(wire.AppendString(nil, desc))
		structured.WriteString(`,"inputSchema":`)
		structured.Write(schema)
		structured.WriteByte('}')
		fmt.Fprintf(&text, "\n%d. %s\n", n, it.exposed)
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

// invokeTool answers a tools/call of tool_invoke: it turns it into a
// tools/call of the named tool, with the same request id (so cancellation,
// progress and elicitation relate to the client's request) and the same
// _meta, and runs it through the pipeline.
func invokeTool(s *session, req *jsonrpc.Request) {
	args, _, _ := wire.Field(req.Params, "arguments")
	name, _ := wire.String(args, "name")
	if name == "" {
		s.reply(req.ID, toolError(`edge-mcp: tool_invoke needs "name": the name of the tool to call (find it with tool_search)`))
		return
	}
	it := s.catalogue().index[kindTools][name]
	if it == nil {
		s.reply(req.ID, toolError(fmt.Sprintf("edge-mcp: there is no tool named %q available to you; find tools with %s", name, toolSearchName)))
		return
	}
	if it.local != nil {
		s.reply(req.ID, toolError(fmt.Sprintf("edge-mcp: %q is one of the gateway's own tools: call it directly", name)))
		return
	}
	raw, _, _ := wire.Field(args, "arguments")
	targs, err := openai.ObjectArguments(raw)
	if err != nil {
		s.reply(req.ID, toolError(fmt.Sprintf("edge-mcp: tool_invoke: the arguments of %q %v", name, err)))
		return
	}
	params := append(wire.AppendString([]byte(`{"name":`), name), '}')
	if targs != nil {
		params, _ = wire.SetField(params, "arguments", targs)
	}
	if meta, ok, _ := wire.Field(req.Params, "_meta"); ok {
		params, _ = wire.SetField(params, "_meta", meta)
	}
	call := &jsonrpc.Request{ID: req.ID, Method: "tools/call", Params: params}
	if rl := s.invokeRateLimited(it); rl != nil {
		tc := &toolCall{s: s, req: call, it: it, start: time.Now(), args: targs}
		tc.respond(nil, tc.rateLimited(rl))
		return
	}
	s.toolCall(call, it)
}

// invokeRateLimited applies the per-tool rate limits of a tool called
// through tool_invoke that the pipeline would skip: over streamable HTTP the
// limits are taken before the transport reads a request, and there the call
// was charged to tool_invoke (the client's own limit included), not to the
// tool it names. Other transports take every limit in the pipeline
// (stage_ratelimit.go).
func (s *session) invokeRateLimited(it *item) *rateLimited {
	gd := s.g.guard.Load()
	if s.transport != transportStreamable || !gd.limited() {
		return nil
	}
	return gd.allowTool(s.id.Name, it.up.name, it.exposed)
}

// toolIndex is a search index over one ordered set of tools, keyed by
// exposed name, and where each key sits in that set.
type toolIndex struct {
	ix  *search.Index
	pos map[string]int32
}

// buildToolIndex indexes tools (exposed names are unique in a view).
func buildToolIndex(tools []*item) *toolIndex {
	docs := make([]search.Doc, len(tools))
	pos := make(map[string]int32, len(tools))
	for i, it := range tools {
		docs[i] = search.DocFromTool(it.exposed, it.raw)
		pos[it.exposed] = int32(i)
	}
	return &toolIndex{ix: search.Build(docs), pos: pos}
}

// indexCache shares search indexes between views whose deferred tools are
// the same: entries are keyed by a 128-bit hash of the tools' exposed names
// and definitions in order, so an entry is right for any gateway and any
// snapshot that serves that content, and a snapshot whose tools did not
// change (an upstream reconnected) reuses its index. Entries hold no items.
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
	ix    *toolIndex
}

// toolIndexes is the process's index cache. It is content-addressed (see
// indexCache), so sharing it between gateways is correct.
var toolIndexes = &indexCache{max: 8}

// contentSeeds seed the two halves of the content hash.
var contentSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// contentKey hashes the exposed names and definitions of tools, in order.
func contentKey(tools []*item) [2]uint64 {
	var key [2]uint64
	var n [8]byte
	for i, seed := range contentSeeds {
		var h maphash.Hash
		h.SetSeed(seed)
		for _, it := range tools {
			binary.LittleEndian.PutUint64(n[:], uint64(len(it.exposed)))
			h.Write(n[:])
			h.WriteString(it.exposed)
			binary.LittleEndian.PutUint64(n[:], uint64(len(it.raw)))
			h.Write(n[:])
			h.Write(it.raw)
		}
		key[i] = h.Sum64()
	}
	return key
}

// get returns the index of tools, building it when no view with the same
// tools built it before.
func (c *indexCache) get(tools []*item) *toolIndex {
	key := contentKey(tools)
	c.mu.Lock()
	for i, e := range c.entries {
		if e.key == key && e.n == len(tools) {
			copy(c.entries[i:], c.entries[i+1:])
			c.entries[len(c.entries)-1] = e
			c.mu.Unlock()
			<-e.ready
			return e.ix
		}
	}
	e := &indexEntry{key: key, n: len(tools), ready: make(chan struct{})}
	if len(c.entries) >= c.max {
		c.entries = append(c.entries[:0], c.entries[1:]...)
	}
	c.entries = append(c.entries, e)
	c.mu.Unlock()
	e.ix = buildToolIndex(tools)
	close(e.ready)
	return e.ix
}
