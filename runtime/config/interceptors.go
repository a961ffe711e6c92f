package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/edge-mcp/edge-mcp/policy/spec"
)

// This file decodes the SEP-2624 interceptor settings: interceptorServers,
// shaped and checked like mcpServers, and interceptors, the one ordered
// list of chain entries, each selecting interceptors of an interceptor
// server or of a policy module.

// InterceptorEntry is one entry of "interceptors": the interceptors of
// one interceptor server (Server) or of one policy module (Module, a name
// in "policies") whose names match Names, with the operator's overrides.
type InterceptorEntry struct {
	// Server names an interceptorServers entry; Module a policies entry.
	// Exactly one is set.
	Server string `json:"server,omitempty"`
	Module string `json:"module,omitempty"`
	// Names are globs over the interceptors' names; empty: all.
	Names []string `json:"names,omitempty"`
	// Tools and Servers scope the entry as globs over the tool (prompt,
	// resource URI) and the upstream server an event is about; empty:
	// all (a module entry: the policy's own tools and servers).
	Tools   []string `json:"tools,omitempty"`
	Servers []string `json:"servers,omitempty"`
	// Mode overrides the interceptors' mode: "active" ("enforce") or
	// "audit"; "": theirs.
	Mode string `json:"mode,omitempty"`
	// FailOpen overrides the interceptors' failOpen (a module entry: the
	// policy's on_error "allow"); nil: theirs.
	FailOpen *bool `json:"fail_open,omitempty"`
	// Priority overrides a mutator's priorityHint in both phases; nil:
	// theirs.
	Priority *int `json:"priority,omitempty"`
	// TimeoutMS bounds one invocation (a module entry: the policy's
	// timeout_ms); 0: the chain's default.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// Config is sent with every invocation of the selected interceptors
	// (the SEP's "config", checked by their configSchema), compacted JSON
	// object, not expanded; nil: none.
	Config json.RawMessage `json:"config,omitempty"`
	// Implicit marks an entry InterceptorChain made for a policy no entry
	// names.
	Implicit bool `json:"-"`
}

// Source is the entry's source for messages: "server NAME" or "module
// NAME".
func (e *InterceptorEntry) Source() string {
	if e.Server != "" {
		return "server " + configQuote(e.Server)
	}
	return "module " + configQuote(e.Module)
}

// InterceptorChain returns the entries of the chain in order: the
// "interceptors" list as written, then one module entry for each policy
// that no entry names, in "policies" order, so that a file without an
// "interceptors" list runs its policies as it always did.
func (c *Config) InterceptorChain() []InterceptorEntry {
	named := map[string]bool{}
	for _, e := range c.Interceptors {
		if e.Module != "" {
			named[e.Module] = true
		}
	}
	out := append([]InterceptorEntry(nil), c.Interceptors...)
	for _, p := range c.Policies {
		if !named[p.Name] {
			out = append(out, ModuleEntry(p))
		}
	}
	return out
}

// ModuleEntry is the entry of a policy no entry names: all of the
// module's interceptors, with the policy's scope, on_error, timeout and
// mode.
func ModuleEntry(p spec.Spec) InterceptorEntry {
	return withPolicy(InterceptorEntry{Module: p.Name, Implicit: true}, p)
}

// withPolicy fills what a module entry does not say from its policy:
// tools, servers, fail_open (on_error "allow"), timeout_ms and mode
// (shadow: audit).
func withPolicy(e InterceptorEntry, p spec.Spec) InterceptorEntry {
	if e.Tools == nil {
		e.Tools = p.Tools
	}
	if e.Servers == nil {
		e.Servers = p.Servers
	}
	if e.FailOpen == nil && p.OnError != "" {
		open := p.OnError == "allow"
		e.FailOpen = &open
	}
	if e.TimeoutMS == 0 {
		e.TimeoutMS = p.TimeoutMS
	}
	if e.Mode == "" && p.Mode == spec.ModeShadow {
		e.Mode = "audit"
	}
	return e
}

// interceptorServerOmits are the mcpServers keys that mean nothing for an
// interceptor server: it exposes no tools or prompts, and the gateway
// holds one session with it.
var interceptorServerOmits = map[string]bool{
	"prefix": true, "session": true, "max_client_sessions": true, "max_client_sessions_per_identity": true,
	"identity": true, "protocol_version": true, "reconnect_wait": true,
}

// interceptorServerDocs say what a server key means for an interceptor
// server where the mcpServers text does not fit.
var interceptorServerDocs = map[string]string{
	"headers":      "HTTP headers sent to the interceptor server on every request (remote types)",
	"bearer_token": "sent to the interceptor server as `Authorization: Bearer …` (remote types)",
	"timeout":      "bounds `interceptors/list`; one invocation's deadline is its entry's `timeout_ms`",
	"oauth.grant":  "`authorization_code` (an operator approves once: `edge-mcp auth login SERVER`) or `client_credentials` (the client's own access, no person); `token_exchange` needs a per-client identity, which an interceptor server does not have",
}

// interceptorServerKeys are the mcpServers keys that apply to an
// interceptor server, under "interceptorServers.*".
var interceptorServerKeys = func() []key {
	var out []key
	for _, k := range serverKeys {
		rest := strings.TrimPrefix(k.name, "mcpServers.*.")
		if interceptorServerOmits[rest] {
			continue
		}
		k.name = "interceptorServers.*." + rest
		if doc, ok := interceptorServerDocs[rest]; ok {
			k.doc = doc
		}
		out = append(out, k)
	}
	return out
}()

func ient[F any](f func(*InterceptorEntry) *F) func(any) any { return at(f) }

var interceptorKeys = []key{
	{name: "interceptors[].server", field: ient(func(e *InterceptorEntry) *string { return &e.Server }),
		doc: "an `interceptorServers` name: the entry selects that server's interceptors"},
	{name: "interceptors[].module", field: ient(func(e *InterceptorEntry) *string { return &e.Module }),
		doc: "or a `policies` name: the entry selects that module's interceptors (an ABI 1.0 module's hooks as interceptors) and places the policy here in the chain"},
	{name: "interceptors[].names", def: "all", field: ient(func(e *InterceptorEntry) *[]string { return &e.Names }), check: checkGlob,
		doc: "globs over interceptor names (`pii/*`)"},
	{name: "interceptors[].tools", def: "all (module: the policy's)", field: ient(func(e *InterceptorEntry) *[]string { return &e.Tools }), check: checkGlob,
		doc: "globs over the tool, prompt or resource URI an event is about"},
	{name: "interceptors[].servers", def: "all (module: the policy's)", field: ient(func(e *InterceptorEntry) *[]string { return &e.Servers }), check: checkGlob,
		doc: "globs over the upstream server an event goes to or comes from"},
	{name: "interceptors[].mode", def: "the interceptor's", field: ient(func(e *InterceptorEntry) *string { return &e.Mode }), check: oneOf("", "active", "enforce", "audit"),
		doc: "`active` (`enforce`): verdicts block, mutations apply; `audit`: validators only log, mutators compute without applying"},
	{name: "interceptors[].fail_open", def: "the interceptor's (module: `on_error`)", field: ient(func(e *InterceptorEntry) **bool { return &e.FailOpen }),
		doc: "`true`: an interceptor that fails, times out or was never reached lets the event through; `false`: the event is refused naming it"},
	{name: "interceptors[].priority", def: "the interceptor's", field: ient(func(e *InterceptorEntry) **int { return &e.Priority }), check: checkPriority,
		doc: "a mutator's `priorityHint` in both phases: lower runs first"},
	{name: "interceptors[].config", typ: "object", decode: decodeEntryConfig,
		doc: "sent as `config` with every invocation of the selected interceptors (their `configSchema` says what they accept); `${VAR}` is not expanded inside"},
	{name: "interceptors[].timeout_ms", def: "2000 (module: `timeout_ms`)", field: ient(func(e *InterceptorEntry) *int { return &e.TimeoutMS }), check: between(0, spec.MaxTimeoutMS),
		doc: "deadline of one invocation, in milliseconds"},
}

// decodeEntryConfig reads an entry's config: a JSON object, kept
// compacted.
func decodeEntryConfig(d *decoder, path string, parent any) *Error {
	var raw json.RawMessage
	if err := d.dec.Decode(&raw); err != nil {
		return d.fail(path, "invalid JSON: %v", err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return d.fail(path, "must be an object, got %s", configQuote(string(raw)))
	}
	var c bytes.Buffer
	_ = json.Compact(&c, raw) // valid: it was just decoded
	parent.(*InterceptorEntry).Config = c.Bytes()
	return nil
}

// checkGlob checks one glob of an interceptors entry.
func checkGlob(v any) (at, reason string) {
	s := *v.(*string)
	if s == "" || len(s) > spec.MaxGlob {
		return "", fmt.Sprintf("must be a glob of 1 to %d bytes, got %s", spec.MaxGlob, configQuote(s))
	}
	return "", ""
}

func checkPriority(v any) (at, reason string) {
	if p := *v.(**int); p != nil && (*p < math.MinInt32 || *p > math.MaxInt32) {
		return "", fmt.Sprintf("must be a 32-bit whole number, got %d", *p)
	}
	return "", ""
}

// checkInterceptorEntry checks what one entry can say alone.
func checkInterceptorEntry(v any) (at, reason string) {
	e := v.(*InterceptorEntry)
	switch {
	case e.Server != "" && e.Module != "":
		return "", `has both "server" and "module": an entry selects the interceptors of one source`
	case e.Server == "" && e.Module == "":
		return "", `needs "server" (an interceptorServers name) or "module" (a policies name)`
	}
	return "", ""
}

// decodeInterceptorServers decodes interceptorServers like mcpServers.
func decodeInterceptorServers(d *decoder, path string, parent any) *Error {
	doc := parent.(*document)
	return d.members(path, "duplicate interceptor server name: each key in interceptorServers must be unique", func(name, spath string) *Error {
		if !configValidName(name) {
			return d.fail(path, "interceptor server name %s must be 1 to 64 characters of A-Z a-z 0-9 _ . -", configQuote(name))
		}
		rs := &configRawServer{name: name, path: spath}
		if cerr := d.object(spath, "interceptorServers.*", rs); cerr != nil {
			return cerr
		}
		doc.icServers = append(doc.icServers, rs)
		return nil
	})
}

// finishInterceptors checks the interceptor servers and the entries
// against the servers and policies they name. An entry of an inactive
// server is left out, as the server is.
func (d *decoder) finishInterceptors(doc *document) *Error {
	known := map[string]bool{}
	for _, rs := range doc.icServers {
		known[rs.name] = rs.active
		if !rs.active {
			continue
		}
		sc, cerr := d.finishServer(rs)
		if cerr != nil {
			return cerr
		}
		if sc.OAuth != nil && slices.ContainsFunc(doc.cfg.Servers, func(u Server) bool { return u.Name == sc.Name }) {
			return d.fail(rs.path+".oauth", "interceptor server %s has the name of an mcpServers server: OAuth tokens are kept by server name; rename one", configQuote(sc.Name))
		}
		doc.cfg.InterceptorServers = append(doc.cfg.InterceptorServers, sc)
	}
	policies := map[string]spec.Spec{}
	for _, p := range doc.cfg.Policies {
		policies[p.Name] = p
	}
	entries := doc.cfg.Interceptors
	doc.cfg.Interceptors = nil
	for i, e := range entries {
		path := fmt.Sprintf("interceptors[%d]", i)
		if e.Server != "" {
			active, ok := known[e.Server]
			if !ok {
				return d.fail(path+".server", "interceptor server %s is not defined in interceptorServers", configQuote(e.Server))
			}
			if !active {
				continue
			}
		}
		if e.Module != "" {
			p, ok := policies[e.Module]
			if !ok {
				return d.fail(path+".module", "policy %s is not defined in policies (an entry names a policy; the policy names the module file)", configQuote(e.Module))
			}
			e = withPolicy(e, p)
		}
		if e.Mode == "enforce" {
			e.Mode = "active"
		}
		doc.cfg.Interceptors = append(doc.cfg.Interceptors, e)
	}
	return d.checkVirtualInterceptors(doc, entries)
}

// checkVirtualInterceptors checks that each name a virtual server's
// "interceptors" lists is the policy or the interceptor server of a chain
// entry (a policy no entry names has its implicit one). entries are the
// "interceptors" entries as written.
func (d *decoder) checkVirtualInterceptors(doc *document, entries []InterceptorEntry) *Error {
	known := map[string]bool{}
	for _, p := range doc.cfg.Policies {
		known[p.Name] = true
	}
	for _, e := range entries {
		known[e.Server] = e.Server != ""
	}
	for _, vc := range doc.cfg.VirtualServers {
		for i, name := range vc.Interceptors {
			if !known[name] {
				return d.fail(fmt.Sprintf("virtual_servers.%s.interceptors[%d]", vc.Name, i),
					"%s is neither a policy nor an interceptor server that an \"interceptors\" entry names", configQuote(name))
			}
		}
	}
	return nil
}
