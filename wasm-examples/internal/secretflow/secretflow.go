// Package secretflow tracks verbatim secrets across the servers of a
// session: the engine of the cross-boundary-guard module, written as plain
// Go (no build constraints) so it is tested natively.
//
// A secret is a token of a well-known public format (Find). The Guard
// records, per session, every secret a server returned (Ingest, response
// phase) and refuses a later request that carries one of them to a
// different server (Check, request phase). A secret sent to the server it
// came from, or never read in the session, passes: the guard tracks flows,
// not values.
package secretflow

import (
	"bytes"
	"strings"

	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
)

// Format is a public credential format: a literal prefix followed by a run
// of characters from a set, at least Min (and at most Max, 0 = no limit)
// long.
type Format struct {
	ID       string
	Prefix   string
	Min, Max int
	set      func(c byte) bool
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
func upperDigit(c byte) bool { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
func alnumDash(c byte) bool  { return alnum(c) || c == '-' }

// Formats are the formats Find knows.
var Formats = []Format{
	{ID: "stripe_secret_live", Prefix: "sk_live_", Min: 16, set: alnum},
	{ID: "stripe_pub_live", Prefix: "pk_live_", Min: 16, set: alnum},
	{ID: "github_pat", Prefix: "ghp_", Min: 20, set: alnum},
	{ID: "github_oauth", Prefix: "gho_", Min: 20, set: alnum},
	{ID: "aws_access_key", Prefix: "AKIA", Min: 16, Max: 16, set: upperDigit},
	{ID: "slack_bot", Prefix: "xoxb-", Min: 10, set: alnumDash},
	{ID: "slack_refresh", Prefix: "xoxr-", Min: 10, set: alnumDash},
}

// Hit is one secret found in a text.
type Hit struct {
	Format string
	Value  string
}

// Find returns the secrets in s, in order of position.
func Find(s []byte, hits []Hit) []Hit {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 's', 'p', 'g', 'A', 'x':
		default:
			continue
		}
		for f := range Formats {
			if n := Formats[f].match(s, i); n > 0 {
				hits = append(hits, Hit{Format: Formats[f].ID, Value: string(s[i : i+n])})
				i += n - 1
				break
			}
		}
	}
	return hits
}

// match returns the length of the token of format f at s[i:], or 0.
func (f *Format) match(s []byte, i int) int {
	if !bytes.HasPrefix(s[i:], []byte(f.Prefix)) {
		return 0
	}
	j := i + len(f.Prefix)
	k := j
	for k < len(s) && f.set(s[k]) && (f.Max == 0 || k-j < f.Max) {
		k++
	}
	if k-j < f.Min {
		return 0
	}
	return k - i
}

// Strings calls fn with every string value of the JSON document doc,
// decoded (so escapes cannot hide a secret).
func Strings(doc []byte, fn func(s []byte)) error {
	_, _, err := jsonlite.RewriteStrings(nil, doc, func(_, s []byte) ([]byte, bool) {
		fn(s)
		return nil, false
	})
	return err
}

// FindJSON returns the secrets in the string values of a JSON document.
func FindJSON(doc []byte) ([]Hit, error) {
	var hits []Hit
	err := Strings(doc, func(s []byte) { hits = Find(s, hits) })
	return hits, err
}

// ServerOf names the server an event goes to when the host did not say:
// a tools/call payload's tool through a small catalogue of well-known
// tools (else the tool name), a resource URI's authority or scheme, else
// the event's namespace.
func ServerOf(event string, payload []byte) string {
	if v, ok := jsonlite.Lookup(payload, "params"); ok {
		payload = v
	}
	if v, ok := jsonlite.Lookup(payload, "name"); ok {
		if name, err := jsonlite.Unquote(v); err == nil && name != "" {
			if s, ok := toolServers[name]; ok {
				return s
			}
			return name
		}
	}
	if v, ok := jsonlite.Lookup(payload, "uri"); ok {
		if uri, err := jsonlite.Unquote(v); err == nil {
			if scheme, rest, ok := strings.Cut(uri, ":"); ok {
				if auth, ok := strings.CutPrefix(rest, "//"); ok {
					if host, _, _ := strings.Cut(auth, "/"); host != "" {
						return host
					}
				}
				return scheme
			}
		}
	}
	ns, _, _ := strings.Cut(event, "/")
	if ns == "" {
		return "unknown"
	}
	return ns
}

// toolServers maps the tools of the reference MCP servers (filesystem,
// sqlite, git, memory, fetch, ...) to their server, for hosts that do not
// name the server in the invocation context.
var toolServers = map[string]string{
	"read_file": "filesystem", "read_text_file": "filesystem", "write_file": "filesystem", "edit_file": "filesystem",
	"move_file": "filesystem", "list_directory": "filesystem", "search_files": "filesystem",
	"read_query": "sqlite", "write_query": "sqlite", "create_table": "sqlite", "list_tables": "sqlite", "describe_table": "sqlite",
	"git_log": "git", "git_show": "git", "git_diff": "git", "git_diff_unstaged": "git", "git_commit": "git",
	"read_graph": "memory", "create_entities": "memory", "add_observations": "memory",
	"fetch":        "fetch",
	"browser_type": "browser", "browser_fill_form": "browser", "browser_snapshot": "browser", "browser_navigate": "browser",
	"execute_command": "shell",
}
