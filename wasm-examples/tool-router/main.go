//go:build wasip1

// Command tool-router is an edge-mcp policy module that decides which tools
// a client may see and call, renames and hides tools in the catalogue, and
// routes calls to another upstream server by an argument value. See
// README.md for the configuration.
package main

import (
	"errors"

	"github.com/edge-mcp/edge-mcp/guest"
	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
)

// rules is an allow/deny pair. A pattern matches a tool name, or
// "server/tool" when it contains a '/'.
type rules struct {
	allow []string
	deny  []string
}

// clientRules applies to clients whose id and name match the globs (an
// empty glob matches anything).
type clientRules struct {
	id, name string
	rules
}

type route struct {
	tool     string
	argument string
	equals   *jsonlite.Value
	server   string
	toTool   string
}

var (
	global     rules
	clients    []clientRules
	renames    = map[string]string{} // upstream name (or server/name) → shown name
	hidden     []string
	routes     []route
	denyReason = ""
)

func init() {
	guest.OnConfigure(configure)
	guest.OnToolsList(onToolsList)
	guest.OnToolCall(onToolCall)
}

func main() {}

func configure(raw []byte) error {
	v, err := jsonlite.Parse(raw)
	if err != nil {
		return errors.New("config: " + err.Error())
	}
	for _, m := range v.Members() {
		switch m.Key {
		case "allow":
			global.allow = m.Value.Strings()
		case "deny":
			global.deny = m.Value.Strings()
		case "hide":
			hidden = m.Value.Strings()
		case "deny_reason":
			denyReason = m.Value.Str()
		case "rename":
			for _, r := range m.Value.Members() {
				if r.Value.Kind() != jsonlite.String || r.Value.Str() == "" {
					return errors.New("config: rename." + r.Key + " must be a non-empty string")
				}
				renames[r.Key] = r.Value.Str()
			}
		case "clients":
			for _, c := range m.Value.Elems() {
				cr := clientRules{id: c.Get("id").Str(), name: c.Get("name").Str()}
				cr.allow = c.Get("allow").Strings()
				cr.deny = c.Get("deny").Strings()
				if cr.id == "" && cr.name == "" {
					return errors.New("config: each clients entry needs an id or name glob")
				}
				clients = append(clients, cr)
			}
		case "route":
			for _, r := range m.Value.Elems() {
				rt := route{
					tool:     r.Get("tool").Str(),
					argument: r.Get("argument").Str(),
					equals:   r.Get("equals"),
					server:   r.Get("server").Str(),
					toTool:   r.Get("to_tool").Str(),
				}
				if rt.tool == "" || rt.argument == "" || rt.equals == nil || rt.server == "" {
					return errors.New("config: each route needs tool, argument, equals and server")
				}
				routes = append(routes, rt)
			}
		default:
			return errors.New("config: unknown key " + m.Key)
		}
	}
	return nil
}

func matchTool(patterns []string, server, tool string) bool {
	for _, p := range patterns {
		name := tool
		for i := 0; i < len(p); i++ {
			if p[i] == '/' {
				name = server + "/" + tool
				break
			}
		}
		if guest.Glob(p, name) {
			return true
		}
	}
	return false
}

func (r *rules) permits(server, tool string) bool {
	if matchTool(r.deny, server, tool) {
		return false
	}
	return len(r.allow) == 0 || matchTool(r.allow, server, tool)
}

func permitted(c guest.Client, server, tool string) bool {
	if !global.permits(server, tool) {
		return false
	}
	for i := range clients {
		cr := &clients[i]
		if (cr.id == "" || guest.Glob(cr.id, c.ID)) && (cr.name == "" || guest.Glob(cr.name, c.Name)) {
			if !cr.permits(server, tool) {
				return false
			}
		}
	}
	return true
}

func onToolsList(req *guest.ToolsList) {
	for i := range req.Tools {
		t := &req.Tools[i]
		if !permitted(req.Client, t.Server, t.Name) || matchTool(hidden, t.Server, t.Name) {
			t.Hide()
			continue
		}
		if n, ok := renames[t.Server+"/"+t.Name]; ok {
			t.Rename(n)
		} else if n, ok := renames[t.Name]; ok {
			t.Rename(n)
		}
	}
}

func onToolCall(c *guest.ToolCall) guest.Decision {
	if !permitted(c.Client, c.Server, c.Tool) {
		if denyReason != "" {
			return guest.Deny(denyReason)
		}
		who := c.Client.ID
		if who == "" {
			who = "this client"
		}
		return guest.Deny("tool " + c.Tool + " is not allowed for " + who)
	}
	for i := range routes {
		r := &routes[i]
		if !guest.Glob(r.tool, c.Tool) {
			continue
		}
		raw, ok := c.Argument(r.argument)
		if !ok || !equal(raw, r.equals) {
			continue
		}
		d := guest.Route(r.server)
		if r.toTool != "" {
			d = d.WithTool(r.toTool)
		}
		return d
	}
	return guest.Allow()
}

// equal compares a raw argument value with a configured value: strings by
// content, anything else by canonical JSON text.
func equal(raw []byte, want *jsonlite.Value) bool {
	if want.Kind() == jsonlite.String {
		if len(raw) == 0 || raw[0] != '"' {
			return false
		}
		s, err := jsonlite.Unquote(raw)
		return err == nil && s == want.Str()
	}
	got, err := jsonlite.Parse(raw)
	if err != nil {
		return false
	}
	return string(got.AppendJSON(nil)) == string(want.AppendJSON(nil))
}
