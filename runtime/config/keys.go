package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// key is one setting of the config file: the table below is the single
// description of the file, read by the decoder, by the test of docs/configuration.md and by
// the unknown-key errors.
type key struct {
	// name is the key's path: "listen", "mcpServers.*.timeout" (* is any
	// server name), "auth.api_keys[].name" ([] is any element).
	name string
	// typ is the type docs/configuration.md shows; empty: derived from the field
	// (see typeName).
	typ string
	// value is the default Parse sets before decoding, or nil.
	value any
	// def is the documented default when value is nil (one the gateway
	// applies, or words such as "loopback only"); empty: none.
	def string
	// doc says in a line what the key does.
	doc string
	// field points at the Go value the key decodes into, given the value
	// of the enclosing object (*document at the top level); given nil, a
	// nil pointer of that type.
	field func(parent any) any
	// decode replaces the generic decoding for the few keys that need it.
	decode func(d *decoder, path string, parent any) *Error
	// check returns why a decoded value is wrong ("" when it is fine) and
	// where below the key (""); v is what field returned, or one element
	// of a list.
	check func(v any) (at, reason string)
}

// at returns a field accessor for parents of type *P. Given nil, it
// returns a nil *F: the field's type, for the docs.
func at[P, F any](f func(*P) *F) func(any) any {
	return func(p any) any {
		if p == nil {
			return (*F)(nil)
		}
		return f(p.(*P))
	}
}

// in returns an accessor for a field of the Config.
func in[F any](f func(*Config) *F) func(any) any {
	return at(func(d *document) *F { return f(d.cfg) })
}

// keys is the table. Order matters within one object: it is the order the
// errors list valid keys in.
var keys = []key{
	{name: "listen", value: "127.0.0.1:8080", field: in(func(c *Config) *string { return &c.Listen }), check: checkString(configCheckListen),
		doc: "address of the downstream listener (`--listen` overrides)"},
	{name: "max_body_bytes", value: int64(4 << 20), field: in(func(c *Config) *int64 { return &c.MaxBodyBytes }),
		doc: "largest request body accepted downstream (larger: HTTP 413)"},
	{name: "allowed_origins", def: "loopback only", field: in(func(c *Config) *[]string { return &c.AllowedOrigins }), check: checkString(configCheckOrigin),
		doc: "extra `Origin` values accepted (DNS-rebinding protection)"},
	{name: "allowed_hosts", def: "loopback only", field: in(func(c *Config) *[]string { return &c.AllowedHosts }), check: checkString(configCheckHost),
		doc: "extra `Host` values accepted on a loopback listener"},
	{name: "reserved", field: at(func(d *document) *reservations { return &d.reserved }),
		doc: "exposed names pinned to a server; no other server may take them"},
	{name: "reserved.tools", field: at(func(r *reservations) *[]configPair { return &r.tools }),
		doc: "exposed tool name → server name"},
	{name: "reserved.prompts", field: at(func(r *reservations) *[]configPair { return &r.prompts }),
		doc: "exposed prompt name → server name"},
	{name: "mcpServers", typ: "object", def: "`{}`", decode: decodeServers,
		doc: "the upstream servers, by name; **order matters**: on a name conflict the first server wins"},
	{name: "log_level", value: "info", field: in(func(c *Config) *string { return &c.LogLevel }), check: oneOf("debug", "info", "warn", "error"),
		doc: "`debug`, `info`, `warn` or `error`"},
	{name: "protocol_2026", def: "true", field: in(func(c *Config) **bool { return &c.Protocol2026 }),
		doc: "serve MCP 2026-07-28 (stateless) on `/mcp` beside the 2025 revisions; `false`: 2026 clients fall back to 2025 (a 2025 upstream's sampling, elicitation and roots requests reach a 2026 client as `input_required` results during its tools/call, and are refused otherwise)"},
	{name: "policies", typ: "[object]", decode: decodePolicies,
		doc: "Wasm policy modules, applied in order (see [Policy modules](policies.md)); an `interceptors` entry may place one in the interceptor chain"},
	{name: "interceptorServers", typ: "object", def: "`{}`", decode: decodeInterceptorServers,
		doc: "SEP-2624 interceptor servers, by name, in the shape of `mcpServers` (see [Interceptors](interceptors.md#configuration))"},
	{name: "interceptors", field: in(func(c *Config) *[]InterceptorEntry { return &c.Interceptors }), check: checkInterceptorEntry,
		doc: "the interceptor chain's entries in order, each selecting the interceptors of a server or a policy module; policies no entry names follow in `policies` order"},
	{name: "virtual_servers", typ: "object", def: "`{}`", decode: decodeVirtualServers,
		doc: "curated MCP endpoints over the catalogue, by name: a selection of tools, prompts and resources with overrides (see [Virtual servers](virtual-servers.md))"},
	{name: "admin", field: in(func(c *Config) *Admin { return &c.Admin }), check: checkAdmin,
		doc: "admin API and module store (see [Operating modules](policies.md#operating-policy-modules))"},
	{name: "auth", field: in(func(c *Config) *Auth { return &c.Auth }), check: checkAuth,
		doc: "how downstream clients authenticate (see [Access control](access.md))"},
	{name: "access", field: in(func(c *Config) *[]AccessRule { return &c.Access }), check: checkAccessRule,
		doc: "which identities may use which servers and tools; none: everyone everything"},
	{name: "limits", field: in(func(c *Config) *Limits { return &c.Limits }),
		doc: "rate and concurrency limits"},
	{name: "tool_rules", field: in(func(c *Config) *[]ToolRule { return &c.ToolRules }),
		doc: "per-server and per-tool behaviour; later rules override earlier ones"},
	{name: "pinning", field: in(func(c *Config) *Pinning { return &c.Pinning }),
		doc: "what happens when an upstream changes a tool definition"},
	{name: "audit", field: in(func(c *Config) *Audit { return &c.Audit }),
		doc: "the JSONL audit log (see [Observability](observability.md))"},
	{name: "telemetry", field: in(func(c *Config) *Telemetry { return &c.Telemetry }),
		doc: "OpenTelemetry traces"},
	{name: "observability", field: in(func(c *Config) *Observability { return &c.Observability }),
		doc: "metrics, compression, log format and readiness"},
	{name: "cluster", field: in(func(c *Config) **Cluster { return &c.Cluster }), check: checkCluster,
		doc: "join a fleet of replicas over NATS (see [Running a fleet](fleet.md)); absent: one process"},
	{name: "oauth", field: in(func(c *Config) *OAuthSettings { return &c.OAuth }), check: checkOAuthSettings,
		doc: "the store of upstream OAuth tokens and the authorization callback (see [Fronting servers that need OAuth](oauth.md))"},
}

var (
	// keysBelow lists the keys of each object pattern in table order;
	// keysByName finds a key by its path. Both are filled by init: the
	// table refers to the decoder, which refers to them.
	keysBelow  map[string][]*key
	keysByName map[string]*key
	// The keys of the file, of a server and of reserved, in table order.
	configTopKeys, configServerKeys, configReservedKeys []string
)

func init() {
	keysBelow, keysByName = indexKeys(keys, serverKeys, sectionKeys, interceptorServerKeys, interceptorKeys, virtualKeys)
	configTopKeys, configServerKeys, configReservedKeys = keyNames(""), keyNames("mcpServers.*"), keyNames("reserved")
}

// configKeyHints answer server keys that other MCP config formats use.
var configKeyHints = map[string]string{
	"mcpServers.*.disabled":      `unknown key; write "active": false to disable a server`,
	"mcpServers.*.transport":     `unknown key; did you mean "type"?`,
	"mcpServers.*.transportType": `unknown key; did you mean "type"?`,
	"mcpServers.*.serverUrl":     `unknown key; did you mean "url"?`,
}

func indexKeys(tables ...[]key) (map[string][]*key, map[string]*key) {
	below, byName := map[string][]*key{}, map[string]*key{}
	for _, table := range tables {
		for i := range table {
			k := &table[i]
			parent := ""
			if dot := strings.LastIndexByte(k.name, '.'); dot >= 0 {
				parent = k.name[:dot]
			}
			below[parent] = append(below[parent], k)
			byName[k.name] = k
		}
	}
	return below, byName
}

// keyNames lists the keys of the object pattern pat, in table order.
func keyNames(pat string) []string {
	var names []string
	for _, k := range keysBelow[pat] {
		names = append(names, k.name[strings.LastIndexByte(k.name, '.')+1:])
	}
	return names
}

// unknownKey explains why name is not a key of the object pattern pat.
func unknownKey(pat, name string) string {
	if hint, ok := configKeyHints[configJoin(pat, name)]; ok {
		return hint
	}
	return configUnknownKey(name, keyNames(pat))
}

// srv returns an accessor for a field of a server entry.
func srv[F any](f func(*configRawServer) *F) func(any) any { return at(f) }

// serverKeys are the keys of one mcpServers entry. Their values are
// checked when the server is finished (servers.go): which keys apply
// depends on its type, and an inactive server is checked for shape only.
var serverKeys = append([]key{
	{name: "mcpServers.*.type", def: "inferred", field: srv(func(s *configRawServer) *configString { return &s.typ }),
		doc: "`streamable-http`, `sse`, `websocket`, `stdio`; `url` → streamable-http (falling back to legacy SSE when the server only speaks that), `command` → stdio"},
	{name: "mcpServers.*.url", field: srv(func(s *configRawServer) *configString { return &s.url }),
		doc: "the server's endpoint (remote types)"},
	{name: "mcpServers.*.headers", field: srv(func(s *configRawServer) *[]configPair { return &s.headers }),
		doc: "HTTP headers sent upstream on every request (remote types)"},
	{name: "mcpServers.*.bearer_token", field: srv(func(s *configRawServer) *configString { return &s.bearer }),
		doc: "sent upstream as `Authorization: Bearer …` (remote types)"},
	{name: "mcpServers.*.timeout", value: 60 * time.Second, field: srv(func(s *configRawServer) *time.Duration { return &s.timeout }),
		doc: "per-call timeout; the upstream request is cancelled and the caller gets an error"},
	{name: "mcpServers.*.sse_read_timeout", value: 300 * time.Second, field: srv(func(s *configRawServer) *time.Duration { return &s.sseReadTimeout }),
		doc: "how long a remote stream may stay silent (remote types)"},
	{name: "mcpServers.*.active", value: true, field: srv(func(s *configRawServer) *bool { return &s.active }),
		doc: "`false` skips the server (it is checked for shape only)"},
	{name: "mcpServers.*.description", field: srv(func(s *configRawServer) *configString { return &s.desc }),
		doc: "free text for operators"},
	{name: "mcpServers.*.prefix", def: "none", field: srv(func(s *configRawServer) *configString { return &s.prefix }),
		doc: "expose this server's tools and prompts as `PREFIX_NAME`; resources and resource templates keep their URIs (see [How it behaves](how-it-behaves.md))"},
	{name: "mcpServers.*.command", field: srv(func(s *configRawServer) *configString { return &s.command }),
		doc: "the program of a stdio server"},
	{name: "mcpServers.*.args", field: srv(func(s *configRawServer) *[]configString { return &s.args }),
		doc: "the program's arguments (stdio)"},
	{name: "mcpServers.*.env", field: srv(func(s *configRawServer) *[]configPair { return &s.env }),
		doc: "extra environment variables for the program (stdio)"},
	{name: "mcpServers.*.cwd", def: "the gateway's", field: srv(func(s *configRawServer) *configString { return &s.cwd }),
		doc: "the program's working directory (stdio)"},
	{name: "mcpServers.*.protocol_version", def: "`auto`", field: srv(func(s *configRawServer) *string { return &s.protocolVersion }), check: oneOf("auto", "2025-11-25", "2026-07-28"),
		doc: "MCP revision spoken upstream: `auto` probes `server/discover` and speaks 2026-07-28 when the server offers it (over stdio and WebSocket only when it offers no 2025 revision: their 2025 sessions carry server→client requests), else `initialize` (2025-11-25); a stdio server that exits on the probe is restarted and pinned to 2025-11-25; legacy `sse` is always 2025-11-25"},
	{name: "mcpServers.*.session", def: "`auto`", field: srv(func(s *configRawServer) *string { return &s.session }), check: oneOf("auto", "shared", "per_client"),
		doc: "`shared`: one upstream session for every client; `per_client`: one per downstream session that calls the server (stdio: one process each), so server→client requests reach their caller; `auto` is `shared`, refusing server→client requests it cannot attribute (see [How it behaves](how-it-behaves.md))"},
	{name: "mcpServers.*.max_client_sessions", def: "16", field: srv(func(s *configRawServer) *int { return &s.maxClientSessions }), check: between(1, 10000),
		doc: "with `session: per_client`, the most upstream sessions (stdio: processes) open at once; a client beyond it gets an error"},
	{name: "mcpServers.*.max_client_sessions_per_identity", def: "½ of `max_client_sessions`, at least 1", field: srv(func(s *configRawServer) *int { return &s.maxClientSessionsPerIdentity }), check: between(1, 10000),
		doc: "of those, how many one authenticated identity may hold (without authentication every client is one identity and may hold them all)"},
	{name: "mcpServers.*.health_interval", def: "30", field: srv(func(s *configRawServer) *time.Duration { return &s.healthInterval }),
		doc: "time between MCP `ping` health checks"},
	{name: "mcpServers.*.health_timeout", def: "10", field: srv(func(s *configRawServer) *time.Duration { return &s.healthTimeout }),
		doc: "how long one ping may take"},
	{name: "mcpServers.*.health_misses", def: "3", field: srv(func(s *configRawServer) *int { return &s.healthMisses }), check: between(1, 1000),
		doc: "unanswered pings in a row that fail the server (an unreachable one fails at once)"},
	{name: "mcpServers.*.retry_initial", def: "1", field: srv(func(s *configRawServer) *time.Duration { return &s.retryInitial }),
		doc: "first reconnect delay; it doubles, ±50% jitter"},
	{name: "mcpServers.*.retry_max", def: "300", field: srv(func(s *configRawServer) *time.Duration { return &s.retryMax }),
		doc: "longest reconnect delay; not less than `retry_initial`"},
	{name: "mcpServers.*.reconnect_wait", def: "2", field: srv(func(s *configRawServer) *time.Duration { return &s.reconnectWait }),
		doc: "how long a call to the server while it is disconnected waits for a reconnection it triggers (at most the call's `timeout`) before it fails with the reason"},
}, serverOAuthKeys...)

// typeName is the type of k as docs/configuration.md shows it: string, bool, number,
// "number (s)" (seconds), [string], object or [object].
func (k *key) typeName() string {
	if k.typ != "" {
		return k.typ
	}
	t := reflect.TypeOf(k.field(nil)).Elem()
	switch t {
	case reflect.TypeFor[configString]():
		return "string"
	case reflect.TypeFor[time.Duration]():
		return "number (s)"
	case reflect.TypeFor[[]configString]():
		return "[string]"
	case reflect.TypeFor[[]configPair]():
		return "object"
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "number"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "[object]"
		}
		return "[" + t.Elem().Kind().String() + "]"
	}
	return t.String()
}

// defaultText is k's default as docs/configuration.md shows it: a string value in
// backticks, a duration in seconds, else def ("" when there is none).
func (k *key) defaultText() string {
	switch v := k.value.(type) {
	case string:
		return "`" + v + "`"
	case time.Duration:
		return strconv.FormatFloat(v.Seconds(), 'f', -1, 64)
	case nil:
		return k.def
	default:
		return fmt.Sprint(v)
	}
}
