package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
	"github.com/edge-mcp/edge-mcp/policy/spec"
)

// This file decodes the whole file (parse) and what needs more than one
// key to check: servers, whose fields depend on their type and which are
// checked only when active, reserved names, which name servers, and
// policies, whose fields belong to package policy.

const (
	configTypeStreamableHTTP = "streamable-http"
	configTypeSSE            = "sse"
	configTypeWebSocket      = "websocket"
	configTypeStdio          = "stdio"
)

// configTypeAliases maps every accepted "type" spelling to its canonical form.
var configTypeAliases = map[string]string{
	configTypeStreamableHTTP: configTypeStreamableHTTP,
	"http":                   configTypeStreamableHTTP,
	"streamableHttp":         configTypeStreamableHTTP,
	"streamable_http":        configTypeStreamableHTTP,
	configTypeSSE:            configTypeSSE,
	configTypeWebSocket:      configTypeWebSocket,
	"ws":                     configTypeWebSocket,
	configTypeStdio:          configTypeStdio,
}

var (
	configRemoteOnly = []string{"url", "headers", "bearer_token", "sse_read_timeout", "oauth"}
	configStdioOnly  = []string{"command", "args", "env", "cwd"}
	// configHeadersOwned are set by the transports themselves.
	configHeadersOwned = []string{"Accept", "Connection", "Content-Length", "Content-Type", "Host", "Last-Event-Id", "Mcp-Protocol-Version", "Mcp-Session-Id", "Transfer-Encoding", "Upgrade"}
)

// document is the file as decoded: the Config, with the servers and
// reserved names still raw until the whole file has been read.
type document struct {
	cfg      *Config
	servers  []*configRawServer
	reserved reservations
	// icServers are the interceptorServers entries, raw like servers.
	icServers []*configRawServer
}

// reservations are reserved.tools and reserved.prompts, unexpanded.
type reservations struct {
	tools, prompts []configPair
}

// configRawServer is a server entry as decoded, before expansion and
// validation (an inactive server gets no further checks than its shape).
type configRawServer struct {
	name, path                                   string
	seen                                         map[string]bool
	typ, url, bearer, desc, prefix, command, cwd configString
	headers, env                                 []configPair
	args                                         []configString
	timeout, sseReadTimeout                      time.Duration
	healthInterval, healthTimeout                time.Duration
	retryInitial, retryMax                       time.Duration
	reconnectWait                                time.Duration
	healthMisses, maxClientSessions              int
	maxClientSessionsPerIdentity                 int
	session                                      string
	protocolVersion                              string
	active                                       bool
	oauth                                        *configRawOAuth
	identity                                     string
}

// mark records that the entry has key; object calls it.
func (rs *configRawServer) mark(key string) {
	if rs.seen == nil {
		rs.seen = make(map[string]bool)
	}
	rs.seen[key] = true
}

// parse decodes and validates the whole file.
func (d *decoder) parse() (*Config, *Error) {
	if len(bytes.TrimSpace(d.data)) == 0 {
		return nil, d.fail("", `the file is empty; a minimal config is {"mcpServers": {}}`)
	}
	doc := &document{cfg: &Config{}}
	if cerr := d.object("", "", doc); cerr != nil {
		return nil, cerr
	}
	if cerr := d.end(); cerr != nil {
		return nil, cerr
	}
	known := make(map[string]bool, len(doc.servers))
	for _, rs := range doc.servers {
		known[rs.name] = true
		if !rs.active {
			continue
		}
		sc, cerr := d.finishServer(rs)
		if cerr != nil {
			return nil, cerr
		}
		if sc.OAuth != nil && sc.OAuth.Grant == "token_exchange" && doc.cfg.Auth.Mode != "jwt" {
			return nil, d.fail(configJoin(rs.path, "oauth.grant"), `"token_exchange" needs "auth": {"mode": "jwt"}: the downstream JWT is the subject token`)
		}
		doc.cfg.Servers = append(doc.cfg.Servers, sc)
	}
	if cerr := d.finishInterceptors(doc); cerr != nil {
		return nil, cerr
	}
	var cerr *Error
	if doc.cfg.Reserved.Tools, cerr = d.reserve(doc.reserved.tools, known); cerr != nil {
		return nil, cerr
	}
	if doc.cfg.Reserved.Prompts, cerr = d.reserve(doc.reserved.prompts, known); cerr != nil {
		return nil, cerr
	}
	return doc.cfg, nil
}

// reserve checks reserved names and the servers they name.
func (d *decoder) reserve(pairs []configPair, known map[string]bool) (map[string]string, *Error) {
	var m map[string]string
	for _, r := range pairs {
		path := r.val.path
		if reason := configCheckExposed(r.key); reason != "" {
			return nil, d.fail(path, "%s", reason)
		}
		srv, cerr := d.expand(r.val)
		if cerr != nil {
			return nil, cerr
		}
		if !known[srv] {
			return nil, d.fail(path, "server %s is not defined in mcpServers", configQuote(srv))
		}
		if m == nil {
			m = make(map[string]string)
		}
		m[r.key] = srv
	}
	return m, nil
}

// decodeServers decodes mcpServers, each entry along the keys below
// "mcpServers.*", without checking their values yet.
func decodeServers(d *decoder, path string, parent any) *Error {
	doc := parent.(*document)
	return d.members(path, "duplicate server name: each key in mcpServers must be unique", func(name, spath string) *Error {
		if !configValidName(name) {
			return d.fail(path, "server name %s must be 1 to 64 characters of A-Z a-z 0-9 _ . -", configQuote(name))
		}
		rs := &configRawServer{name: name, path: spath}
		if cerr := d.object(spath, "mcpServers.*", rs); cerr != nil {
			return cerr
		}
		doc.servers = append(doc.servers, rs)
		return nil
	})
}

// decodePolicies decodes the policies list into spec.Spec values, which
// check themselves; module paths are resolved against the file's folder.
func decodePolicies(d *decoder, path string, parent any) *Error {
	var raw json.RawMessage
	if err := d.dec.Decode(&raw); err != nil {
		return d.fail(path, "must be a list of policy attachments: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var specs []spec.Spec
	if err := dec.Decode(&specs); err != nil {
		return d.fail(path, "must be a list of policy attachments ({\"name\", \"module\", \"tools\", \"servers\", \"config\", \"on_error\", \"timeout_ms\", \"memory_mb\"}): %v", err)
	}
	names := map[string]bool{}
	for i := range specs {
		sp := &specs[i]
		ipath := fmt.Sprintf("%s[%d]", path, i)
		if err := sp.Validate(); err != nil {
			return d.fail(ipath, "%v", err)
		}
		if names[sp.Name] {
			return d.fail(ipath+".name", "duplicate policy name %s", configQuote(sp.Name))
		}
		names[sp.Name] = true
		if len(sp.Config) > 0 {
			var c bytes.Buffer
			json.Compact(&c, sp.Config) // valid: it was just decoded
			sp.Config = c.Bytes()
		}
		if ociwasm.IsRef(sp.Module) {
			if _, err := ociwasm.ParseRef(sp.Module); err != nil {
				return d.fail(ipath+".module", "%v", err)
			}
			continue
		}
		if _, uploaded := UploadedModule(sp.Module); !uploaded && !filepath.IsAbs(sp.Module) && d.file != "" {
			sp.Module = filepath.Join(filepath.Dir(d.file), sp.Module)
		}
	}
	parent.(*document).cfg.Policies = specs
	return nil
}

// finishServer expands and validates an active server entry.
func (d *decoder) finishServer(rs *configRawServer) (Server, *Error) {
	sc := Server{Name: rs.name, Active: true, Timeout: rs.timeout, SSEReadTimeout: rs.sseReadTimeout}
	if rs.url.set && rs.command.set {
		return sc, d.fail(rs.path, `has both "url" and "command": use "url" for a remote server or "command" for a stdio server`)
	}
	switch {
	case rs.typ.set:
		s, cerr := d.expand(rs.typ)
		if cerr != nil {
			return sc, cerr
		}
		canon, ok := configTypeAliases[s]
		if !ok {
			return sc, d.fail(rs.typ.path, `must be "streamable-http", "sse", "websocket" or "stdio", got %s`, configQuote(s))
		}
		sc.Type = canon
	case rs.command.set:
		sc.Type = configTypeStdio
	case rs.url.set:
		sc.Type = configTypeStreamableHTTP
		sc.TypeInferred = true
	default:
		return sc, d.fail(rs.path, `needs "url" (a remote server) or "command" (a stdio server)`)
	}

	var cerr *Error
	if sc.Type == configTypeStdio {
		for _, k := range configRemoteOnly {
			if rs.seen[k] {
				return sc, d.fail(configJoin(rs.path, k), "applies only to remote servers, but this server's type is %q", sc.Type)
			}
		}
		if cerr = d.finishStdio(rs, &sc); cerr != nil {
			return sc, cerr
		}
	} else {
		for _, k := range configStdioOnly {
			if rs.seen[k] {
				return sc, d.fail(configJoin(rs.path, k), "applies only to stdio servers, but this server's type is %q", sc.Type)
			}
		}
		if cerr = d.finishRemote(rs, &sc); cerr != nil {
			return sc, cerr
		}
	}
	if rs.desc.set {
		if sc.Description, cerr = d.expand(rs.desc); cerr != nil {
			return sc, cerr
		}
	}
	if rs.prefix.set {
		if sc.Prefix, cerr = d.expand(rs.prefix); cerr != nil {
			return sc, cerr
		}
		if !configValidName(sc.Prefix) {
			return sc, d.fail(rs.prefix.path, "must be 1 to 64 characters of A-Z a-z 0-9 _ . - (omit the key for no prefix), got %s", configQuote(sc.Prefix))
		}
	}
	sc.HealthInterval, sc.HealthTimeout, sc.HealthMisses = rs.healthInterval, rs.healthTimeout, rs.healthMisses
	sc.RetryInitial, sc.RetryMax = rs.retryInitial, rs.retryMax
	sc.ReconnectWait = rs.reconnectWait
	sc.Session, sc.MaxClientSessions = rs.session, rs.maxClientSessions
	sc.MaxClientSessionsPerIdentity = rs.maxClientSessionsPerIdentity
	sc.ProtocolVersion = rs.protocolVersion
	if sc.Type == configTypeStdio {
		if cerr = d.finishOAuth(rs, &sc); cerr != nil { // identity only: oauth is remote-only
			return sc, cerr
		}
	}
	if rs.seen["retry_initial"] && rs.seen["retry_max"] && sc.RetryMax < sc.RetryInitial {
		return sc, d.fail(configJoin(rs.path, "retry_max"), "must not be less than retry_initial")
	}
	return sc, nil
}

// finishRemote validates the fields of a streamable-http, sse or websocket
// server.
func (d *decoder) finishRemote(rs *configRawServer, sc *Server) *Error {
	if !rs.url.set {
		return d.fail(configJoin(rs.path, "url"), "is required for a server of type %q", sc.Type)
	}
	u, cerr := d.expand(rs.url)
	if cerr != nil {
		return cerr
	}
	if reason := configCheckURL(u, sc.Type); reason != "" {
		return d.fail(rs.url.path, "%s", reason)
	}
	sc.URL = u

	seen := make(map[string]string, len(rs.headers))
	for _, p := range rs.headers {
		path := p.val.path
		if !configValidToken(p.key) {
			return d.fail(path, "is not a valid HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)")
		}
		canon := configCanonicalHeader(p.key)
		if prev, dup := seen[canon]; dup {
			return d.fail(path, "repeats header %q (header names are case-insensitive)", prev)
		}
		seen[canon] = p.key
		for _, owned := range configHeadersOwned {
			if canon == owned {
				return d.fail(path, "is set by the gateway's transport and cannot be configured")
			}
		}
		v, cerr := d.expand(p.val)
		if cerr != nil {
			return cerr
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return d.fail(path, "header value must not contain CR, LF or NUL characters")
		}
		if sc.Headers == nil {
			sc.Headers = make(map[string]string, len(rs.headers))
		}
		sc.Headers[p.key] = v
	}

	if rs.bearer.set {
		tok, cerr := d.expand(rs.bearer)
		if cerr != nil {
			return cerr
		}
		switch {
		case tok == "":
			return d.fail(rs.bearer.path, "must not be empty (omit the key to send no token)")
		case len(tok) >= 7 && strings.EqualFold(tok[:7], "bearer "):
			return d.fail(rs.bearer.path, `must be the token alone, without the "Bearer " prefix`)
		case strings.ContainsAny(tok, " \t\r\n\x00"):
			return d.fail(rs.bearer.path, "must not contain spaces or control characters")
		}
		if prev, dup := seen["Authorization"]; dup {
			return d.fail(rs.bearer.path, "conflicts with headers.%s: set one of them", prev)
		}
		sc.BearerToken = tok
	}
	if rs.oauth != nil && rs.bearer.set {
		return d.fail(rs.bearer.path, `conflicts with "oauth": the token comes from the authorization server`)
	}
	if rs.oauth != nil && seen["Authorization"] != "" {
		return d.fail(configJoin(configJoin(rs.path, "headers"), seen["Authorization"]), `conflicts with "oauth": the token comes from the authorization server`)
	}
	return d.finishOAuth(rs, sc)
}

// finishStdio validates the fields of a stdio server.
func (d *decoder) finishStdio(rs *configRawServer, sc *Server) *Error {
	if !rs.command.set {
		return d.fail(configJoin(rs.path, "command"), `is required for a stdio server`)
	}
	cmd, cerr := d.expand(rs.command)
	if cerr != nil {
		return cerr
	}
	switch {
	case cmd == "":
		return d.fail(rs.command.path, "must not be empty")
	case strings.IndexByte(cmd, 0) >= 0:
		return d.fail(rs.command.path, "must not contain NUL characters")
	}
	sc.Command = cmd
	for _, a := range rs.args {
		s, cerr := d.expand(a)
		if cerr != nil {
			return cerr
		}
		if strings.IndexByte(s, 0) >= 0 {
			return d.fail(a.path, "must not contain NUL characters")
		}
		sc.Args = append(sc.Args, s)
	}
	for _, p := range rs.env {
		if p.key == "" || strings.ContainsAny(p.key, "=\x00") {
			return d.fail(p.val.path, "is not a valid environment variable name (non-empty, without = or NUL)")
		}
		v, cerr := d.expand(p.val)
		if cerr != nil {
			return cerr
		}
		if strings.IndexByte(v, 0) >= 0 {
			return d.fail(p.val.path, "must not contain NUL characters")
		}
		if sc.Env == nil {
			sc.Env = make(map[string]string, len(rs.env))
		}
		sc.Env[p.key] = v
	}
	if rs.cwd.set {
		dir, cerr := d.expand(rs.cwd)
		if cerr != nil {
			return cerr
		}
		switch {
		case dir == "":
			return d.fail(rs.cwd.path, "must not be empty (omit the key to use the gateway's working directory)")
		case strings.IndexByte(dir, 0) >= 0:
			return d.fail(rs.cwd.path, "must not contain NUL characters")
		}
		sc.Cwd = dir
	}
	return nil
}
