package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edge-mcp/edge-mcp/policy"
)

// Config is one validated configuration generation.
//
// The file is JSON in the shape Claude Desktop uses ({"mcpServers": {...}}),
// extended with gateway settings. Every string value may reference the
// environment as ${VAR} or ${VAR:-default}, or a file's content as
// ${file:PATH}; $$ is a literal $.
type Config struct {
	// Path is the file the configuration came from ("" for a built-in one).
	Path string
	// Listen is the downstream listen address ("listen"), default
	// "127.0.0.1:8080".
	Listen string
	// MaxBodyBytes caps the size of one downstream request body
	// ("max_body_bytes"), default 4 MiB.
	MaxBodyBytes int64
	// AllowedOrigins lists the origins (scheme://host[:port], or "*" for any)
	// accepted in a downstream Origin header ("allowed_origins").
	AllowedOrigins []string
	// AllowedHosts lists the host or host:port values (or "*" for any)
	// accepted in a downstream Host header ("allowed_hosts").
	AllowedHosts []string
	// Reserved pins exposed tool and prompt names to one server ("reserved").
	// A pinned server always exists in the file but may be inactive, in
	// which case it is absent from Servers and no server exposes the name.
	Reserved ReservedNames
	// Servers are the active upstream servers ("mcpServers") in file order,
	// which decides name conflicts. Inactive servers are left out.
	Servers []Server
	// Policies are the Wasm policy attachments ("policies"), applied in
	// order; module paths are resolved against the config file's folder.
	Policies []policy.Spec
	// LogLevel is "debug", "info", "warn" or "error" ("log_level"), default
	// "info".
	LogLevel string
	// Admin configures the admin API and the module store ("admin").
	Admin Admin
	// Auth configures downstream authentication ("auth").
	Auth Auth
	// Access lists which identities may use which servers and tools
	// ("access"); empty: everyone everything.
	Access []AccessRule
	// Limits are the rate and concurrency limits ("limits").
	Limits Limits
	// ToolRules set per-server and per-tool behaviour ("tool_rules").
	ToolRules []ToolRule
	// Pinning guards against tool definitions changing ("pinning").
	Pinning Pinning
	// Audit is the audit log ("audit").
	Audit Audit
	// Telemetry configures OpenTelemetry traces ("telemetry").
	Telemetry Telemetry
	// Observability holds metrics, compression, log format and readiness
	// switches ("observability").
	Observability Observability
}

// ReservedNames maps exposed names to the server that owns them. An exposed
// name is the name after the server's prefix is applied.
type ReservedNames struct {
	// Tools maps an exposed tool name to a server name.
	Tools map[string]string
	// Prompts maps an exposed prompt name to a server name.
	Prompts map[string]string
}

// Server is one upstream MCP server. Empty maps and slices are nil.
type Server struct {
	// Name is the server's key in mcpServers, 1 to 64 of [A-Za-z0-9_.-].
	Name string
	// Type is "streamable-http", "sse", "websocket" or "stdio".
	Type string
	// URL is the endpoint of a remote server (http/https, ws/wss for
	// websocket).
	URL string
	// Headers are extra HTTP headers sent to a remote server.
	Headers map[string]string
	// BearerToken is sent to a remote server as "Authorization: Bearer …".
	BearerToken string
	// Timeout is the per-call timeout, default 60 s.
	Timeout time.Duration
	// SSEReadTimeout is how long a remote stream may stay silent, default
	// 300 s.
	SSEReadTimeout time.Duration
	// Active is always true for servers in Config.Servers.
	Active bool
	// Description is free text for people.
	Description string
	// Prefix, when set, exposes tools and prompts as PREFIX_NAME.
	Prefix string
	// Command is the program of a stdio server.
	Command string
	// Args are the program's arguments.
	Args []string
	// Env holds extra environment variables for the program.
	Env map[string]string
	// Cwd is the program's working directory ("" for the gateway's).
	Cwd string
	// TypeInferred is set when the type came from "url" alone: the gateway
	// then falls back from streamable HTTP to legacy SSE, as the spec's
	// backwards-compatibility section describes.
	TypeInferred bool
	// HealthInterval is the time between health pings ("health_interval",
	// seconds; default 30 s).
	HealthInterval time.Duration
	// HealthTimeout bounds one health ping ("health_timeout", seconds;
	// default 10 s).
	HealthTimeout time.Duration
	// HealthMisses is the number of consecutive unanswered pings that fail
	// the server ("health_misses"; default 3).
	HealthMisses int
	// RetryInitial and RetryMax bound the exponential backoff between
	// reconnect attempts ("retry_initial", "retry_max", seconds; defaults 1 s
	// and 300 s; ±50% jitter).
	RetryInitial, RetryMax time.Duration
}

// ExposedName returns the name a server's tool or prompt has downstream:
// name itself, or PREFIX_name when the server has a prefix.
func (s *Server) ExposedName(name string) string {
	if s.Prefix == "" {
		return name
	}
	return s.Prefix + "_" + name
}

// Error is returned for invalid configs. It names the file, the dotted
// key path of the offending value (for example
// "mcpServers.weather.headers.X-Api-Key") and the reason. It never contains
// secret values such as header values, bearer tokens or environment values.
type Error struct {
	File, Key, Reason string
}

// Error formats the error as "config FILE: KEY: REASON".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config")
	if e.File != "" {
		b.WriteString(" ")
		b.WriteString(e.File)
	}
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Load reads and validates the file at path. A file that cannot be read
// yields a wrapped I/O error (errors.Is(err, fs.ErrNotExist) works); an
// invalid one yields a *Error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(path, data)
}

// Parse validates data, the contents of the config file at path; path
// is used in error messages and stored as Config.Path. Every error is a
// *Error. A leading UTF-8 byte order mark is ignored.
func Parse(path string, data []byte) (*Config, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark, as some editors write
	d := &configDecoder{file: path, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	d.dec.UseNumber()
	cfg, cerr := d.parse()
	if cerr != nil {
		return nil, cerr
	}
	cfg.Path = path
	return cfg, nil
}

const (
	configDefaultListen         = "127.0.0.1:8080"
	configDefaultMaxBodyBytes   = 4 << 20
	configDefaultTimeout        = 60 * time.Second
	configDefaultSSEReadTimeout = 300 * time.Second
	configDefaultLogLevel       = "info"

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
	configTopKeys      = []string{"listen", "max_body_bytes", "allowed_origins", "allowed_hosts", "reserved", "mcpServers", "log_level", "policies", "admin", "auth", "access", "limits", "tool_rules", "pinning", "audit", "telemetry", "observability"}
	configServerKeys   = []string{"type", "url", "headers", "bearer_token", "timeout", "sse_read_timeout", "active", "description", "prefix", "command", "args", "env", "cwd", "health_interval", "health_timeout", "health_misses", "retry_initial", "retry_max"}
	configReservedKeys = []string{"tools", "prompts"}
	configRemoteOnly   = []string{"url", "headers", "bearer_token", "sse_read_timeout"}
	configStdioOnly    = []string{"command", "args", "env", "cwd"}
	// configKeyHints answers server keys that other MCP config formats use.
	configKeyHints = map[string]string{
		"disabled":      `unknown key; write "active": false to disable a server`,
		"transport":     `unknown key; did you mean "type"?`,
		"transportType": `unknown key; did you mean "type"?`,
		"serverUrl":     `unknown key; did you mean "url"?`,
	}
	// configHeadersOwned are set by the transports themselves.
	configHeadersOwned = []string{"Accept", "Connection", "Content-Length", "Content-Type", "Host", "Last-Event-Id", "Mcp-Protocol-Version", "Mcp-Session-Id", "Transfer-Encoding", "Upgrade"}
)

// configDecoder walks the token stream of one config file. Each method
// returns the first problem as a *Error.
type configDecoder struct {
	file string
	data []byte
	dec  *json.Decoder
}

// configString is a string value before environment expansion.
type configString struct {
	s, path string
	set     bool
}

// configPair is one entry of a string-to-string object, in file order.
type configPair struct {
	key string
	val configString
}

// configDuration is a number of seconds, already converted.
type configDuration struct {
	d   time.Duration
	set bool
}

// configRawServer is a server entry as decoded, before expansion and
// validation (an inactive server gets no further checks than its shape).
type configRawServer struct {
	name, path                                   string
	typ, url, bearer, desc, prefix, command, cwd configString
	headers, env                                 []configPair
	args                                         []configString
	hasHeaders, hasArgs, hasEnv                  bool
	timeout, sseReadTimeout                      configDuration
	healthInterval, healthTimeout                configDuration
	retryInitial, retryMax                       configDuration
	healthMisses                                 int
	active                                       bool
}

// configReservation is one entry of reserved.tools or reserved.prompts.
type configReservation struct {
	kind, name string
	server     configString
}

func (d *configDecoder) fail(key, format string, args ...any) *Error {
	return &Error{File: d.file, Key: key, Reason: fmt.Sprintf(format, args...)}
}

func configJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// position returns the 1-based line and column (in characters) of offset.
func (d *configDecoder) position(off int64) (line, col int) {
	if off < 0 {
		off = 0
	}
	if off > int64(len(d.data)) {
		off = int64(len(d.data))
	}
	before := d.data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

// token reads the next token, turning syntax errors into a *Error that
// points at the line and column.
func (d *configDecoder) token(key string) (json.Token, *Error) {
	t, err := d.dec.Token()
	if err == nil {
		return t, nil
	}
	// The decoder's offsets are not always absolute; a whole-input scan finds
	// the same first error with an exact offset (the byte after the culprit).
	var se *json.SyntaxError
	if !errors.As(json.Unmarshal(d.data, new(json.RawMessage)), &se) {
		return nil, d.fail(key, "invalid JSON: %v", err)
	}
	off, msg := se.Offset-1, strings.TrimPrefix(se.Error(), "json: ")
	if se.Offset >= int64(len(d.data)) && strings.Contains(msg, "unexpected end") {
		off, msg = int64(len(d.data)), "unexpected end of input"
	}
	line, col := d.position(off)
	return nil, d.fail(key, "invalid JSON at line %d, column %d: %s", line, col, msg)
}

// configKind describes a token's JSON type for error messages.
func configKind(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		if v == '[' {
			return "an array"
		}
		return "the end of a value"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", t)
}

// configShow describes a token, with its value, for fields that hold no
// secrets.
func configShow(t json.Token) string {
	switch v := t.(type) {
	case string:
		return configQuote(v)
	case json.Number:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	}
	return configKind(t)
}

// configQuote quotes s for an error message, shortening long values.
func configQuote(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}

// object reads one JSON object at key, calling fn for each member with the
// member's key and full path; fn must consume the member's value. Repeated
// keys are rejected with dupReason.
func (d *configDecoder) object(key, dupReason string, fn func(k, path string) *Error) *Error {
	t, cerr := d.token(key)
	if cerr != nil {
		return cerr
	}
	if t != json.Delim('{') {
		if key == "" {
			return d.fail(key, "the file must hold a JSON object, got %s", configKind(t))
		}
		return d.fail(key, "must be an object, got %s", configKind(t))
	}
	seen := make(map[string]struct{})
	for d.dec.More() {
		t, cerr := d.token(key)
		if cerr != nil {
			return cerr
		}
		k, ok := t.(string)
		if !ok {
			return d.fail(key, "invalid JSON: expected an object key, got %s", configKind(t))
		}
		path := configJoin(key, k)
		if _, dup := seen[k]; dup {
			return d.fail(path, "%s", dupReason)
		}
		seen[k] = struct{}{}
		if cerr := fn(k, path); cerr != nil {
			return cerr
		}
	}
	_, cerr = d.token(key) // the closing brace; More saw it or a syntax error.
	return cerr
}

// array reads one JSON array at key, calling fn for each element with its
// path; fn must consume the element.
func (d *configDecoder) array(key string, fn func(path string) *Error) *Error {
	t, cerr := d.token(key)
	if cerr != nil {
		return cerr
	}
	if t != json.Delim('[') {
		return d.fail(key, "must be an array of strings, got %s", configKind(t))
	}
	for i := 0; d.dec.More(); i++ {
		if cerr := fn(key + "[" + strconv.Itoa(i) + "]"); cerr != nil {
			return cerr
		}
	}
	_, cerr = d.token(key)
	return cerr
}

// str reads a JSON string at key without expanding it.
func (d *configDecoder) str(key string) (configString, *Error) {
	t, cerr := d.token(key)
	if cerr != nil {
		return configString{}, cerr
	}
	s, ok := t.(string)
	if !ok {
		return configString{}, d.fail(key, "must be a string, got %s", configKind(t))
	}
	return configString{s: s, path: key, set: true}, nil
}

// expanded reads a JSON string at key and expands it.
func (d *configDecoder) expanded(key string) (string, *Error) {
	cs, cerr := d.str(key)
	if cerr != nil {
		return "", cerr
	}
	return d.expand(cs)
}

// stringList reads an array of strings without expanding them.
func (d *configDecoder) stringList(key string) ([]configString, *Error) {
	var out []configString
	cerr := d.array(key, func(path string) *Error {
		cs, cerr := d.str(path)
		out = append(out, cs)
		return cerr
	})
	return out, cerr
}

// pairs reads an object of strings without expanding the values.
func (d *configDecoder) pairs(key string) ([]configPair, *Error) {
	var out []configPair
	cerr := d.object(key, "duplicate key", func(k, path string) *Error {
		cs, cerr := d.str(path)
		out = append(out, configPair{key: k, val: cs})
		return cerr
	})
	return out, cerr
}

func (d *configDecoder) boolean(key string) (bool, *Error) {
	t, cerr := d.token(key)
	if cerr != nil {
		return false, cerr
	}
	b, ok := t.(bool)
	if !ok {
		return false, d.fail(key, "must be true or false, got %s", configShow(t))
	}
	return b, nil
}

// seconds reads a positive number of seconds at key.
func (d *configDecoder) seconds(key string) (time.Duration, *Error) {
	t, cerr := d.token(key)
	if cerr != nil {
		return 0, cerr
	}
	n, ok := t.(json.Number)
	if !ok {
		return 0, d.fail(key, "must be a positive number of seconds, got %s", configShow(t))
	}
	v, _, inRange := configScaled(string(n), 9)
	switch {
	case !inRange:
		return 0, d.fail(key, "must be at most %d seconds, got %s", int64(math.MaxInt64/int64(time.Second)), n)
	case v <= 0:
		return 0, d.fail(key, "must be a positive number of seconds, got %s", n)
	}
	return time.Duration(v), nil
}

// parse decodes and validates the whole file.
func (d *configDecoder) parse() (*Config, *Error) {
	if len(bytes.TrimSpace(d.data)) == 0 {
		return nil, d.fail("", `the file is empty; a minimal config is {"mcpServers": {}}`)
	}
	cfg := &Config{Listen: configDefaultListen, MaxBodyBytes: configDefaultMaxBodyBytes, LogLevel: configDefaultLogLevel}
	var (
		servers  []*configRawServer
		reserved []configReservation
	)
	cerr := d.object("", "duplicate key", func(k, path string) *Error {
		switch k {
		case "listen":
			s, cerr := d.expanded(path)
			if cerr != nil {
				return cerr
			}
			if reason := configCheckListen(s); reason != "" {
				return d.fail(path, "%s", reason)
			}
			cfg.Listen = s
		case "max_body_bytes":
			t, cerr := d.token(path)
			if cerr != nil {
				return cerr
			}
			n, ok := t.(json.Number)
			if !ok {
				return d.fail(path, "must be a positive whole number of bytes, got %s", configShow(t))
			}
			v, exact, inRange := configScaled(string(n), 0)
			switch {
			case !inRange:
				return d.fail(path, "must be at most %d bytes, got %s", int64(math.MaxInt64), n)
			case !exact || v <= 0:
				return d.fail(path, "must be a positive whole number of bytes, got %s", n)
			}
			cfg.MaxBodyBytes = v
		case "allowed_origins", "allowed_hosts":
			raw, cerr := d.stringList(path)
			if cerr != nil {
				return cerr
			}
			var list []string
			for _, cs := range raw {
				s, cerr := d.expand(cs)
				if cerr != nil {
					return cerr
				}
				check := configCheckHost
				if k == "allowed_origins" {
					check = configCheckOrigin
				}
				if reason := check(s); reason != "" {
					return d.fail(cs.path, "%s", reason)
				}
				list = append(list, s)
			}
			if k == "allowed_origins" {
				cfg.AllowedOrigins = list
			} else {
				cfg.AllowedHosts = list
			}
		case "reserved":
			return d.object(path, "duplicate key", func(kind, kpath string) *Error {
				if kind != "tools" && kind != "prompts" {
					return d.fail(kpath, "%s", configUnknownKey(kind, configReservedKeys))
				}
				return d.object(kpath, "duplicate key", func(name, npath string) *Error {
					cs, cerr := d.str(npath)
					if cerr != nil {
						return cerr
					}
					reserved = append(reserved, configReservation{kind: kind, name: name, server: cs})
					return nil
				})
			})
		case "mcpServers":
			return d.object(path, "duplicate server name: each key in mcpServers must be unique", func(name, spath string) *Error {
				if !configValidName(name) {
					return d.fail(path, "server name %s must be 1 to 64 characters of A-Z a-z 0-9 _ . -", configQuote(name))
				}
				rs, cerr := d.server(name, spath)
				if cerr != nil {
					return cerr
				}
				servers = append(servers, rs)
				return nil
			})
		case "policies":
			var raw json.RawMessage
			if err := d.dec.Decode(&raw); err != nil {
				return d.fail(path, "must be a list of policy attachments: %v", err)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			var specs []policy.Spec
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
				if _, uploaded := UploadedModule(sp.Module); !uploaded && !filepath.IsAbs(sp.Module) && d.file != "" {
					sp.Module = filepath.Join(filepath.Dir(d.file), sp.Module)
				}
			}
			cfg.Policies = specs
		case "admin":
			if cerr := d.section(path, &cfg.Admin); cerr != nil {
				return cerr
			}
			return d.validateAdmin(path, &cfg.Admin)
		case "auth":
			if cerr := d.section(path, &cfg.Auth); cerr != nil {
				return cerr
			}
			return d.validateAuth(path, &cfg.Auth)
		case "access":
			if cerr := d.list(path, &cfg.Access); cerr != nil {
				return cerr
			}
			return d.validateAccess(path, cfg.Access)
		case "limits":
			if cerr := d.section(path, &cfg.Limits); cerr != nil {
				return cerr
			}
			return d.validateLimits(path, &cfg.Limits)
		case "tool_rules":
			if cerr := d.list(path, &cfg.ToolRules); cerr != nil {
				return cerr
			}
			return d.validateToolRules(path, cfg.ToolRules)
		case "pinning":
			if cerr := d.section(path, &cfg.Pinning); cerr != nil {
				return cerr
			}
			switch cfg.Pinning.Mode {
			case "", "withhold", "flag", "off":
			default:
				return d.fail(path+".mode", `must be "withhold", "flag" or "off", got %s`, configQuote(cfg.Pinning.Mode))
			}
		case "audit":
			return d.section(path, &cfg.Audit)
		case "telemetry":
			if cerr := d.section(path, &cfg.Telemetry); cerr != nil {
				return cerr
			}
			if r := cfg.Telemetry.SampleRatio; r != nil && (*r < 0 || *r > 1) {
				return d.fail(path+".sample_ratio", "must be between 0 and 1, got %v", *r)
			}
		case "observability":
			if cerr := d.section(path, &cfg.Observability); cerr != nil {
				return cerr
			}
			switch cfg.Observability.LogFormat {
			case "", "text", "json":
			default:
				return d.fail(path+".log_format", `must be "text" or "json", got %s`, configQuote(cfg.Observability.LogFormat))
			}
		case "log_level":
			s, cerr := d.expanded(path)
			if cerr != nil {
				return cerr
			}
			switch s {
			case "debug", "info", "warn", "error":
			default:
				return d.fail(path, `must be "debug", "info", "warn" or "error", got %s`, configQuote(s))
			}
			cfg.LogLevel = s
		default:
			return d.fail(path, "%s", configUnknownKey(k, configTopKeys))
		}
		return nil
	})
	if cerr != nil {
		return nil, cerr
	}
	if cerr := d.end(); cerr != nil {
		return nil, cerr
	}

	known := make(map[string]bool, len(servers))
	for _, rs := range servers {
		known[rs.name] = true
		if !rs.active {
			continue
		}
		sc, cerr := d.finishServer(rs)
		if cerr != nil {
			return nil, cerr
		}
		cfg.Servers = append(cfg.Servers, sc)
	}
	for _, r := range reserved {
		path := r.server.path
		if reason := configCheckExposed(r.name); reason != "" {
			return nil, d.fail(path, "%s", reason)
		}
		srv, cerr := d.expand(r.server)
		if cerr != nil {
			return nil, cerr
		}
		if !known[srv] {
			return nil, d.fail(path, "server %s is not defined in mcpServers", configQuote(srv))
		}
		m := &cfg.Reserved.Tools
		if r.kind == "prompts" {
			m = &cfg.Reserved.Prompts
		}
		if *m == nil {
			*m = make(map[string]string)
		}
		(*m)[r.name] = srv
	}
	return cfg, nil
}

// end rejects anything but white space after the top-level object.
func (d *configDecoder) end() *Error {
	off := d.dec.InputOffset()
	if _, err := d.dec.Token(); errors.Is(err, io.EOF) {
		return nil
	}
	for off < int64(len(d.data)) && strings.IndexByte(" \t\r\n", d.data[off]) >= 0 {
		off++
	}
	line, col := d.position(off)
	return d.fail("", "unexpected data after the top-level object at line %d, column %d", line, col)
}

// server decodes one mcpServers entry without validating its values.
func (d *configDecoder) server(name, path string) (*configRawServer, *Error) {
	rs := &configRawServer{name: name, path: path, active: true}
	cerr := d.object(path, "duplicate key", func(k, p string) *Error {
		var cerr *Error
		switch k {
		case "type":
			rs.typ, cerr = d.str(p)
		case "url":
			rs.url, cerr = d.str(p)
		case "bearer_token":
			rs.bearer, cerr = d.str(p)
		case "description":
			rs.desc, cerr = d.str(p)
		case "prefix":
			rs.prefix, cerr = d.str(p)
		case "command":
			rs.command, cerr = d.str(p)
		case "cwd":
			rs.cwd, cerr = d.str(p)
		case "headers":
			rs.hasHeaders = true
			rs.headers, cerr = d.pairs(p)
		case "env":
			rs.hasEnv = true
			rs.env, cerr = d.pairs(p)
		case "args":
			rs.hasArgs = true
			rs.args, cerr = d.stringList(p)
		case "timeout":
			rs.timeout.set = true
			rs.timeout.d, cerr = d.seconds(p)
		case "sse_read_timeout":
			rs.sseReadTimeout.set = true
			rs.sseReadTimeout.d, cerr = d.seconds(p)
		case "active":
			rs.active, cerr = d.boolean(p)
		case "health_interval":
			rs.healthInterval.set = true
			rs.healthInterval.d, cerr = d.seconds(p)
		case "health_timeout":
			rs.healthTimeout.set = true
			rs.healthTimeout.d, cerr = d.seconds(p)
		case "retry_initial":
			rs.retryInitial.set = true
			rs.retryInitial.d, cerr = d.seconds(p)
		case "retry_max":
			rs.retryMax.set = true
			rs.retryMax.d, cerr = d.seconds(p)
		case "health_misses":
			var t json.Token
			if t, cerr = d.token(p); cerr == nil {
				n, ok := t.(json.Number)
				v, exact, inRange := configScaled(string(n), 0)
				if !ok || !exact || !inRange || v < 1 || v > 1000 {
					cerr = d.fail(p, "must be a whole number from 1 to 1000, got %s", configShow(t))
				}
				rs.healthMisses = int(v)
			}
		default:
			reason, ok := configKeyHints[k]
			if !ok {
				reason = configUnknownKey(k, configServerKeys)
			}
			cerr = d.fail(p, "%s", reason)
		}
		return cerr
	})
	return rs, cerr
}

// present reports whether the server entry has key.
func (rs *configRawServer) present(key string) bool {
	switch key {
	case "url":
		return rs.url.set
	case "headers":
		return rs.hasHeaders
	case "bearer_token":
		return rs.bearer.set
	case "sse_read_timeout":
		return rs.sseReadTimeout.set
	case "command":
		return rs.command.set
	case "args":
		return rs.hasArgs
	case "env":
		return rs.hasEnv
	case "cwd":
		return rs.cwd.set
	}
	return false
}

// finishServer expands and validates an active server entry.
func (d *configDecoder) finishServer(rs *configRawServer) (Server, *Error) {
	sc := Server{Name: rs.name, Active: true, Timeout: configDefaultTimeout, SSEReadTimeout: configDefaultSSEReadTimeout}
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
			if rs.present(k) {
				return sc, d.fail(configJoin(rs.path, k), "applies only to remote servers, but this server's type is %q", sc.Type)
			}
		}
		if cerr = d.finishStdio(rs, &sc); cerr != nil {
			return sc, cerr
		}
	} else {
		for _, k := range configStdioOnly {
			if rs.present(k) {
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
	if rs.timeout.set {
		sc.Timeout = rs.timeout.d
	}
	if rs.sseReadTimeout.set {
		sc.SSEReadTimeout = rs.sseReadTimeout.d
	}
	sc.HealthInterval, sc.HealthTimeout, sc.HealthMisses = rs.healthInterval.d, rs.healthTimeout.d, rs.healthMisses
	sc.RetryInitial, sc.RetryMax = rs.retryInitial.d, rs.retryMax.d
	if rs.retryInitial.set && rs.retryMax.set && sc.RetryMax < sc.RetryInitial {
		return sc, d.fail(configJoin(rs.path, "retry_max"), "must not be less than retry_initial")
	}
	return sc, nil
}

// finishRemote validates the fields of a streamable-http, sse or websocket
// server.
func (d *configDecoder) finishRemote(rs *configRawServer, sc *Server) *Error {
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
	return nil
}

// finishStdio validates the fields of a stdio server.
func (d *configDecoder) finishStdio(rs *configRawServer, sc *Server) *Error {
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

// expand replaces ${VAR} and ${VAR:-default} with values from the
// environment and $$ with $. Any other $ is kept as it is. Errors name the
// variable, never the value.
func (d *configDecoder) expand(cs configString) (string, *Error) {
	s := cs.s
	if strings.IndexByte(s, '$') < 0 {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) || (s[i+1] != '$' && s[i+1] != '{') {
			b.WriteByte(c)
			i++
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i += 2
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", d.fail(cs.path, `has "${" without a closing "}" (write $$ for a literal $)`)
		}
		ref := s[i+2 : i+2+end]
		if file, ok := strings.CutPrefix(ref, "file:"); ok {
			// ${file:/run/secrets/token} is the file's content, trimmed:
			// secrets stay out of the config and the environment.
			if !filepath.IsAbs(file) && d.file != "" {
				file = filepath.Join(filepath.Dir(d.file), file)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return "", d.fail(cs.path, "reading ${file:%s}: %v", file, errors.Unwrap(err))
			}
			b.WriteString(strings.TrimSpace(string(data)))
			i += 2 + end + 1
			continue
		}
		name, def, hasDef := strings.Cut(ref, ":-")
		if !configValidVar(name) {
			return "", d.fail(cs.path, `has an invalid variable reference ${%s}: a name is letters, digits and _, not starting with a digit; write $$ for a literal $`, configTrim(name))
		}
		v, ok := os.LookupEnv(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", d.fail(cs.path, "environment variable %s is not set (set it, or write ${%s:-default})", name, name)
		}
		b.WriteString(v)
		i += 2 + end + 1
	}
	return b.String(), nil
}

// configTrim shortens s for an error message.
func configTrim(s string) string {
	q := configQuote(s)
	return q[1 : len(q)-1]
}

func configValidVar(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// configValidName reports whether s matches [A-Za-z0-9_.-]{1,64}.
func configValidName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c == '.' || c == '-' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// configValidToken reports whether s is an HTTP token (RFC 9110 §5.6.2).
func configValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// configCanonicalHeader canonicalizes an HTTP token the way net/http does.
func configCanonicalHeader(s string) string {
	b := []byte(strings.ToLower(s))
	upper := true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		upper = c == '-'
	}
	return string(b)
}

func configCheckListen(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err == nil {
		if strings.ContainsAny(host, " /") {
			err = errors.New("invalid host")
		} else if n, perr := strconv.ParseUint(port, 10, 16); perr != nil || port != strconv.FormatUint(n, 10) {
			err = errors.New("port must be a number from 0 to 65535")
		}
	}
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Sprintf("must be HOST:PORT such as 127.0.0.1:8080, got %s (%v)", configQuote(s), err)
	}
	return ""
}

func configCheckOrigin(s string) string {
	if s == "*" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(s, "#") {
		return fmt.Sprintf(`must be an origin such as https://app.example.com (scheme://host[:port], no path), or "*" for any, got %s`, configQuote(s))
	}
	return ""
}

func configCheckHost(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\r\n/\\?#@,") {
		return fmt.Sprintf("must be a host or host:port such as localhost:8080, got %s", configQuote(s))
	}
	return ""
}

// configCheckExposed validates a reserved exposed name.
func configCheckExposed(name string) string {
	if name == "" || len(name) > 128 {
		return "a reserved name must be 1 to 128 characters"
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return "a reserved name must not contain control characters"
		}
	}
	return ""
}

// configCheckURL validates the url of a remote server of type typ. It never
// echoes the URL, which may carry credentials.
func configCheckURL(s, typ string) string {
	if s == "" {
		return "must not be empty"
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Sprintf("is not a valid URL: %v", err)
	}
	want1, want2 := "http", "https"
	if typ == configTypeWebSocket {
		want1, want2 = "ws", "wss"
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != want1 && scheme != want2:
		got := configQuote(u.Scheme)
		if u.Scheme == "" {
			got = "none"
		}
		return fmt.Sprintf("scheme must be %s or %s for a server of type %q, got %s", want1, want2, typ, got)
	case u.Host == "" || u.Hostname() == "":
		return "must include a host, such as " + want1 + "://localhost:3000/mcp"
	}
	return ""
}

// configUnknownKey explains an unknown key, suggesting the intended one when
// it differs only in case, "_" or "-".
func configUnknownKey(k string, valid []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, v := range valid {
		if norm(v) == norm(k) {
			return fmt.Sprintf("unknown key; did you mean %q?", v)
		}
	}
	return "unknown key; valid keys here are " + strings.Join(valid, ", ")
}

// configScaled converts the JSON number s to an integer count of 10^-scale
// units, rounding half away from zero. exact is false when rounding dropped
// non-zero digits; inRange is false when the magnitude exceeds MaxInt64.
func configScaled(s string, scale int) (v int64, exact, inRange bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expStr, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, true, true
	}
	exp := scale - len(frac)
	if hasExp {
		e, err := strconv.ParseInt(strings.TrimPrefix(expStr, "+"), 10, 32)
		if err != nil { // an exponent beyond ±2^31: far out of range either way
			if strings.HasPrefix(expStr, "-") {
				return 0, false, true
			}
			return 0, false, false
		}
		exp += int(e)
	}
	exact = true
	if exp < 0 {
		drop := -exp
		roundUp := false
		if drop >= len(digits) {
			roundUp = drop == len(digits) && digits[0] >= '5'
			exact = false
			digits = ""
		} else {
			dropped := digits[len(digits)-drop:]
			roundUp = dropped[0] >= '5'
			exact = strings.Trim(dropped, "0") == ""
			digits = digits[:len(digits)-drop]
		}
		exp = 0
		var u uint64
		if digits != "" {
			var err error
			if len(digits) > 19 {
				return 0, exact, false
			}
			if u, err = strconv.ParseUint(digits, 10, 64); err != nil {
				return 0, exact, false
			}
		}
		if roundUp {
			u++
		}
		if u > math.MaxInt64 {
			return 0, exact, false
		}
		v = int64(u)
	} else {
		if len(digits)+exp > 19 {
			return 0, true, false
		}
		u, err := strconv.ParseUint(digits+strings.Repeat("0", exp), 10, 64)
		if err != nil || u > math.MaxInt64 {
			return 0, true, false
		}
		v = int64(u)
	}
	if neg {
		v = -v
	}
	return v, exact, true
}
