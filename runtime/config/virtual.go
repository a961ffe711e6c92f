package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// This file reads "virtual_servers": curated MCP endpoints over the
// catalogue (runtime/virtual compiles and checks them).

// virtualKeys are the keys of one virtual server.
var virtualKeys = concat([]key{
	{name: "virtual_servers.*.path", field: at(func(v *virtual.Config) *string { return &v.Path }),
		doc: "where the virtual server is served (streamable HTTP, both protocol generations), e.g. `/mcp/triage`; legacy SSE at PATH`/sse`, WebSocket at PATH`/ws`; required"},
	{name: "virtual_servers.*.title", field: at(func(v *virtual.Config) *string { return &v.Title }),
		doc: "the title of its initialize result and `server/discover`"},
	{name: "virtual_servers.*.instructions", field: at(func(v *virtual.Config) *string { return &v.Instructions }),
		doc: "the instructions of its initialize result and `server/discover`"},
	{name: "virtual_servers.*.tools", field: at(func(v *virtual.Config) *[]string { return &v.Tools }),
		doc: "globs (`*`: any run of characters) of the exposed tool names it serves; none: no tool"},
	{name: "virtual_servers.*.prompts", field: at(func(v *virtual.Config) *[]string { return &v.Prompts }),
		doc: "globs of the exposed prompt names it serves"},
	{name: "virtual_servers.*.resources", field: at(func(v *virtual.Config) *[]string { return &v.Resources }),
		doc: "globs of the resource URIs and URI templates it serves"},
	{name: "virtual_servers.*.overrides", typ: "object", decode: decodeOverrides,
		doc: "changes to selected tools, by exposed tool name (an unknown tool is a warning: it may appear later)"},
	{name: "virtual_servers.*.overrides.*.name", field: at(func(o *virtual.Override) *string { return &o.Name }),
		doc: "the tool's name in the virtual server (calls are routed to the tool; results unchanged); two tools may not get one name"},
	{name: "virtual_servers.*.overrides.*.description", field: at(func(o *virtual.Override) *string { return &o.Description }),
		doc: "the tool's description in the virtual server"},
	{name: "virtual_servers.*.overrides.*.arguments", typ: "object", decode: decodeArgumentOverrides,
		doc: "changes to the tool's arguments, by argument name"},
	{name: "virtual_servers.*.overrides.*.arguments.*.fixed", typ: "any", decode: decodeRawValue(func(a *virtual.Argument) *json.RawMessage { return &a.Fixed }),
		doc: "always sent upstream; removed from the schema; a client sending it is refused (-32602)"},
	{name: "virtual_servers.*.overrides.*.arguments.*.default", typ: "any", decode: decodeRawValue(func(a *virtual.Argument) *json.RawMessage { return &a.Default }),
		doc: "sent upstream when the client sends no value; shown as the schema's `default`, no longer required"},
	{name: "virtual_servers.*.overrides.*.arguments.*.hidden", def: "false", field: at(func(a *virtual.Argument) *bool { return &a.Hidden }),
		doc: "removed from the schema; a client sending it is refused (-32602)"},
	{name: "virtual_servers.*.deferred_tools", def: "false", field: at(func(v *virtual.Config) *bool { return &v.DeferredTools }),
		doc: "`true`: its tools are left out of its tools list, found by `tool_search` and called by name (see [deferred tools](access.md))"},
	{name: "virtual_servers.*.allow", def: "everyone", field: at(func(v *virtual.Config) *[]string { return &v.Allow }),
		doc: "identities that may connect (composed with `access`: both must allow)"},
	{name: "virtual_servers.*.rate_limit", field: at(func(v *virtual.Config) **Rate { return &v.RateLimit }), check: checkRate,
		doc: "token bucket per client identity over the tool calls made through this virtual server, besides `limits` (shared by the fleet with `cluster`)"},
}, rateKeys("virtual_servers.*.rate_limit"), []key{
	{name: "virtual_servers.*.interceptors", def: "none", field: at(func(v *virtual.Config) *[]string { return &v.Interceptors }),
		doc: "policies and interceptor servers of the `interceptors` chain whose interceptors run only for this virtual server's sessions (and those of other virtual servers naming them), not on `/mcp`; the chain's other members run everywhere"},
})

// decodeVirtualServers decodes "virtual_servers" and checks each server.
func decodeVirtualServers(d *decoder, path string, parent any) *Error {
	doc := parent.(*document)
	return d.members(path, "duplicate virtual server name: each key in virtual_servers must be unique", func(name, vpath string) *Error {
		if !configValidName(name) {
			return d.fail(path, "virtual server name %s must be 1 to 64 characters of A-Z a-z 0-9 _ . -", configQuote(name))
		}
		vc := virtual.Config{Name: name}
		if cerr := d.object(vpath, "virtual_servers.*", &vc); cerr != nil {
			return cerr
		}
		if e := virtual.Check(vc); e != nil {
			return d.fail(configJoin(vpath, e.Key), "%s", e.Reason)
		}
		for _, other := range doc.cfg.VirtualServers {
			if other.Path == vc.Path {
				return d.fail(configJoin(vpath, "path"), "%q is virtual server %q's path too", vc.Path, other.Name)
			}
			for _, suffix := range []string{"/sse", "/ws"} {
				if vc.Path == other.Path+suffix || other.Path == vc.Path+suffix {
					return d.fail(configJoin(vpath, "path"), "%q and virtual server %q's %q would share the %s endpoint", vc.Path, other.Name, other.Path, suffix)
				}
			}
		}
		if reason := gatewayPath(vc.Path); reason != "" {
			return d.fail(configJoin(vpath, "path"), "%s", reason)
		}
		doc.cfg.VirtualServers = append(doc.cfg.VirtualServers, vc)
		return nil
	})
}

// gatewayPath says why a virtual server cannot be served at p: the
// gateway serves something else there.
func gatewayPath(p string) string {
	for _, own := range []string{"/mcp", "/sse", "/ws", "/status", "/healthz", "/readyz", "/metrics", "/oauth/callback"} {
		if p == own {
			return fmt.Sprintf("%q is the gateway's own path; use one below it, such as %q", p, "/mcp/NAME")
		}
	}
	for _, prefix := range []string{"/v1/", "/.well-known/"} {
		if strings.HasPrefix(p, prefix) {
			return fmt.Sprintf("%q is below the gateway's own %s", p, prefix)
		}
	}
	return ""
}

// decodeOverrides decodes a virtual server's "overrides", in file order.
func decodeOverrides(d *decoder, path string, parent any) *Error {
	vc := parent.(*virtual.Config)
	return d.members(path, "duplicate tool: each key in overrides must be unique", func(tool, opath string) *Error {
		o := virtual.Override{Tool: tool}
		if cerr := d.object(opath, "virtual_servers.*.overrides.*", &o); cerr != nil {
			return cerr
		}
		vc.Overrides = append(vc.Overrides, o)
		return nil
	})
}

// decodeArgumentOverrides decodes an override's "arguments", in file
// order.
func decodeArgumentOverrides(d *decoder, path string, parent any) *Error {
	o := parent.(*virtual.Override)
	return d.members(path, "duplicate argument: each key in arguments must be unique", func(name, apath string) *Error {
		a := virtual.Argument{Name: name}
		if cerr := d.object(apath, "virtual_servers.*.overrides.*.arguments.*", &a); cerr != nil {
			return cerr
		}
		o.Arguments = append(o.Arguments, a)
		return nil
	})
}

// decodeRawValue decodes any JSON value, kept as written (no ${VAR}
// expansion: it is sent upstream as is).
func decodeRawValue(field func(*virtual.Argument) *json.RawMessage) func(d *decoder, path string, parent any) *Error {
	return func(d *decoder, path string, parent any) *Error {
		var raw json.RawMessage
		if err := d.dec.Decode(&raw); err != nil {
			return d.fail(path, "invalid JSON: %v", err)
		}
		*field(parent.(*virtual.Argument)) = raw
		return nil
	}
}
