// Package virtual compiles virtual servers: curated MCP endpoints over the
// gateway's shared catalogue. A virtual server selects tools, prompts and
// resources by glob, and may rename a tool, replace its description, and
// fix, default or hide its arguments.
//
// A Server is one virtual server's compiled configuration; a View is a
// Server applied to one snapshot of the catalogue. Views hold positions in
// the catalogue's lists and, for overridden tools only, the rewritten
// definition: they never copy what they do not change. The package knows
// nothing of sessions or transports; the gateway serves a View as an
// endpoint and calls Tool.Arguments on the way up.
package virtual

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/edge-mcp/edge-mcp/internal/limits"
)

// Config is one virtual server as the configuration file states it
// ("virtual_servers.NAME").
type Config struct {
	Name         string
	Path         string // where it is served, e.g. "/mcp/triage"
	Title        string
	Instructions string
	// Tools, Prompts and Resources select by glob ("*" is any run of
	// characters): tools and prompts by exposed name, resources and
	// resource templates by URI or URI template. Empty selects none.
	Tools, Prompts, Resources []string
	// Overrides change selected tools, in file order.
	Overrides []Override
	// Allow lists the identities that may use the server; empty: every
	// identity the global access rules let in.
	Allow []string
	// Interceptors names policies and interceptor servers of the global
	// interceptor chain whose entries' members run only for the sessions
	// of the virtual servers naming them; the chain's other members run
	// for every session.
	Interceptors []string
	// RateLimit, when set, is a token bucket per identity over the tool
	// calls made through the server, besides the global limits.
	RateLimit *limits.Rate
	// DeferredTools leaves the server's tools out of its tools list
	// (callable by name and found by tool search).
	DeferredTools bool
}

// Override changes one tool of the catalogue, named by its exposed name.
type Override struct {
	Tool        string
	Name        string // the tool's name in the virtual server; "": unchanged
	Description string // "": unchanged
	Arguments   []Argument
}

// Argument changes one argument of an overridden tool.
type Argument struct {
	Name string
	// Fixed is sent upstream whatever the client says; the argument is
	// removed from the schema and refused when a client sends it.
	Fixed json.RawMessage
	// Default is sent upstream when the client sends no value.
	Default json.RawMessage
	// Hidden removes the argument from the schema; a client that sends
	// it is refused.
	Hidden bool
}

// Error is a configuration mistake at Key, a path below the virtual
// server's own key ("overrides.github.create_issue.name").
type Error struct {
	Key, Reason string
}

func (e *Error) Error() string { return e.Key + ": " + e.Reason }

// Check reports the first mistake of c that needs no catalogue: a path
// that is not absolute, an override of a tool no glob selects, two
// overrides giving the same name, an argument both fixed and hidden, a
// value that is not JSON.
func Check(c Config) *Error {
	if !strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, "?#{} ") || strings.HasSuffix(c.Path, "/") {
		return &Error{"path", fmt.Sprintf("must be an absolute URL path such as \"/mcp/%s\" (no trailing slash, query or space), got %q", c.Name, c.Path)}
	}
	for kind, globs := range map[string][]string{"tools": c.Tools, "prompts": c.Prompts, "resources": c.Resources} {
		for i, g := range globs {
			if g == "" {
				return &Error{fmt.Sprintf("%s[%d]", kind, i), "an empty pattern matches nothing"}
			}
		}
	}
	names := make(map[string]string, len(c.Overrides))
	for _, o := range c.Overrides {
		key := "overrides." + o.Tool
		if !matchAny(c.Tools, o.Tool) {
			return &Error{key, fmt.Sprintf("overrides tool %q, which no pattern of \"tools\" selects", o.Tool)}
		}
		name := cmpOr(o.Name, o.Tool)
		if prev, dup := names[name]; dup {
			return &Error{key + ".name", fmt.Sprintf("gives the name %q, which %s already has", name, prev)}
		}
		names[name] = fmt.Sprintf("overrides.%s", o.Tool)
		if e := checkArguments(key, o.Arguments); e != nil {
			return e
		}
	}
	return nil
}

func checkArguments(key string, args []Argument) *Error {
	for _, a := range args {
		at := key + ".arguments." + a.Name
		switch {
		case a.Name == "":
			return &Error{key + ".arguments", "an argument name is empty"}
		case a.Fixed != nil && (a.Hidden || a.Default != nil):
			return &Error{at, "fixed excludes default and hidden: give one of them"}
		case a.Hidden && a.Default != nil:
			return &Error{at, "a hidden argument cannot have a default (fix it instead)"}
		case a.Fixed == nil && a.Default == nil && !a.Hidden:
			return &Error{at, "says nothing: give fixed, default or hidden"}
		case a.Fixed != nil && !json.Valid(a.Fixed):
			return &Error{at + ".fixed", "is not valid JSON"}
		case a.Default != nil && !json.Valid(a.Default):
			return &Error{at + ".default", "is not valid JSON"}
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
