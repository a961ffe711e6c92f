package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/spec"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// configStdioDefaults returns a stdio server with the default timeouts.
func configStdioDefaults(name, command string) Server {
	return Server{Name: name, Type: "stdio", Command: command, Active: true, Timeout: 60 * time.Second, SSEReadTimeout: 300 * time.Second}
}

// configRemoteDefaults returns a remote server with the default timeouts.
func configRemoteDefaults(name, typ, url string) Server {
	return Server{Name: name, Type: typ, URL: url, Active: true, Timeout: 60 * time.Second, SSEReadTimeout: 300 * time.Second}
}

// configWant returns the default config holding servers.
func configWant(servers ...Server) *Config {
	return &Config{Path: "gw.json", Listen: "127.0.0.1:8080", MaxBodyBytes: 4 << 20, LogLevel: "info", Servers: servers}
}

func TestParseConfigAccepts(t *testing.T) {
	t.Setenv("CFG_TEST_TOKEN", "tok-123")
	t.Setenv("CFG_TEST_EMPTY", "")
	os.Unsetenv("CFG_TEST_UNSET")

	withServer := func(s Server, edit func(*Server)) Server {
		edit(&s)
		return s
	}
	tests := []struct {
		name string
		in   string
		want *Config
	}{
		{"empty object gives defaults", `{}`, configWant()},
		{"empty mcpServers", ` {"mcpServers": {}} ` + "\n", configWant()},
		{"byte order mark", "\xef\xbb\xbf{}", configWant()},
		{"claude desktop stdio", `{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "pkg"], "env": {"A": "b"}}}}`,
			configWant(withServer(configStdioDefaults("fs", "npx"), func(s *Server) {
				s.Args = []string{"-y", "pkg"}
				s.Env = map[string]string{"A": "b"}
			}))},
		{"explicit stdio with cwd", `{"mcpServers": {"s": {"type": "stdio", "command": "/bin/srv", "cwd": "/tmp"}}}`,
			configWant(withServer(configStdioDefaults("s", "/bin/srv"), func(s *Server) { s.Cwd = "/tmp" }))},
		{"empty args and env are nil", `{"mcpServers": {"s": {"command": "x", "args": [], "env": {}}}}`,
			configWant(configStdioDefaults("s", "x"))},
		{"url infers streamable-http", `{"mcpServers": {"r": {"url": "https://h.example/mcp"}}}`,
			configWant(withServer(configRemoteDefaults("r", "streamable-http", "https://h.example/mcp"), func(s *Server) { s.TypeInferred = true }))},
		{"per-client sessions", `{"mcpServers": {"r": {"type": "sse", "url": "http://h/sse", "session": "per_client", "max_client_sessions": 4}}}`,
			configWant(withServer(configRemoteDefaults("r", "sse", "http://h/sse"), func(s *Server) {
				s.Session, s.MaxClientSessions = "per_client", 4
			}))},
		{"session auto", `{"mcpServers": {"r": {"type": "sse", "url": "http://h/sse", "session": "auto"}}}`,
			configWant(withServer(configRemoteDefaults("r", "sse", "http://h/sse"), func(s *Server) { s.Session = "auto" }))},
		{"health and retry settings", `{"mcpServers": {"r": {"type": "sse", "url": "http://h/sse", "health_interval": 5, "health_timeout": 0.5, "health_misses": 2, "retry_initial": 0.1, "retry_max": 10}}}`,
			configWant(withServer(configRemoteDefaults("r", "sse", "http://h/sse"), func(s *Server) {
				s.HealthInterval, s.HealthTimeout, s.HealthMisses = 5*time.Second, 500*time.Millisecond, 2
				s.RetryInitial, s.RetryMax = 100*time.Millisecond, 10*time.Second
			}))},
		{"type streamable-http", `{"mcpServers": {"r": {"type": "streamable-http", "url": "http://h/mcp"}}}`,
			configWant(configRemoteDefaults("r", "streamable-http", "http://h/mcp"))},
		{"alias http", `{"mcpServers": {"r": {"type": "http", "url": "http://h/mcp"}}}`,
			configWant(configRemoteDefaults("r", "streamable-http", "http://h/mcp"))},
		{"alias streamableHttp", `{"mcpServers": {"r": {"type": "streamableHttp", "url": "http://h/mcp"}}}`,
			configWant(configRemoteDefaults("r", "streamable-http", "http://h/mcp"))},
		{"alias streamable_http", `{"mcpServers": {"r": {"type": "streamable_http", "url": "http://h/mcp"}}}`,
			configWant(configRemoteDefaults("r", "streamable-http", "http://h/mcp"))},
		{"sse", `{"mcpServers": {"r": {"type": "sse", "url": "HTTPS://h:8443/sse"}}}`,
			configWant(configRemoteDefaults("r", "sse", "HTTPS://h:8443/sse"))},
		{"websocket wss", `{"mcpServers": {"r": {"type": "websocket", "url": "wss://h/ws"}}}`,
			configWant(configRemoteDefaults("r", "websocket", "wss://h/ws"))},
		{"alias ws", `{"mcpServers": {"r": {"type": "ws", "url": "ws://127.0.0.1:1/"}}}`,
			configWant(configRemoteDefaults("r", "websocket", "ws://127.0.0.1:1/"))},
		{"headers, bearer token, timeouts, prefix, description",
			`{"mcpServers": {"r": {"url": "http://h/mcp", "headers": {"X-Api-Key": "k", "x-trace": ""}, "bearer_token": "${CFG_TEST_TOKEN}",
			  "timeout": 2.5, "sse_read_timeout": 0.001, "prefix": "wx", "description": "Weather", "active": true}}}`,
			configWant(withServer(configRemoteDefaults("r", "streamable-http", "http://h/mcp"), func(s *Server) {
				s.Headers = map[string]string{"X-Api-Key": "k", "x-trace": ""}
				s.BearerToken = "tok-123"
				s.Timeout = 2500 * time.Millisecond
				s.SSEReadTimeout = time.Millisecond
				s.Prefix = "wx"
				s.Description = "Weather"
				s.TypeInferred = true
			}))},
		{"timeout forms", `{"mcpServers": {"a": {"command": "x", "timeout": 1}, "b": {"command": "x", "timeout": 1e-9}, "c": {"command": "x", "timeout": 15E-1},
			"d": {"command": "x", "timeout": 0.0000000015}, "e": {"command": "x", "timeout": 9223372036.854775807}}}`,
			configWant(
				withServer(configStdioDefaults("a", "x"), func(s *Server) { s.Timeout = time.Second }),
				withServer(configStdioDefaults("b", "x"), func(s *Server) { s.Timeout = 1 }),
				withServer(configStdioDefaults("c", "x"), func(s *Server) { s.Timeout = 1500 * time.Millisecond }),
				withServer(configStdioDefaults("d", "x"), func(s *Server) { s.Timeout = 2 }),
				withServer(configStdioDefaults("e", "x"), func(s *Server) { s.Timeout = time.Duration(1<<63 - 1) }),
			)},
		{"inactive servers are dropped and checked for shape only",
			`{"mcpServers": {"off": {"active": false, "url": "${CFG_TEST_UNSET}", "command": "both", "type": "nonsense"}, "on": {"command": "x"}}}`,
			configWant(configStdioDefaults("on", "x"))},
		{"gateway settings",
			`{"listen": "${CFG_TEST_UNSET:-0.0.0.0:9090}", "max_body_bytes": 1e3, "log_level": "debug",
			  "allowed_origins": ["https://app.example.com", "http://localhost:6274/", "*"], "allowed_hosts": ["localhost:8080", "[::1]:8080", "example.com", "*"]}`,
			&Config{Path: "gw.json", Listen: "0.0.0.0:9090", MaxBodyBytes: 1000, LogLevel: "debug",
				AllowedOrigins: []string{"https://app.example.com", "http://localhost:6274/", "*"},
				AllowedHosts:   []string{"localhost:8080", "[::1]:8080", "example.com", "*"}}},
		{"listen on all interfaces", `{"listen": ":0"}`,
			&Config{Path: "gw.json", Listen: ":0", MaxBodyBytes: 4 << 20, LogLevel: "info"}},
		{"reserved names, also pinned to an inactive server",
			`{"reserved": {"tools": {"fs_read": "fs", "send": "mail"}, "prompts": {"sum": "fs"}},
			  "mcpServers": {"fs": {"command": "x", "prefix": "fs"}, "mail": {"active": false}}}`,
			func() *Config {
				c := configWant(withServer(configStdioDefaults("fs", "x"), func(s *Server) { s.Prefix = "fs" }))
				c.Reserved = ReservedNames{Tools: map[string]string{"fs_read": "fs", "send": "mail"}, Prompts: map[string]string{"sum": "fs"}}
				return c
			}()},
		{"dollar forms in args", `{"mcpServers": {"s": {"command": "x", "args": ["$$", "$${CFG_TEST_TOKEN}", "a$b", "$", "${CFG_TEST_EMPTY}", "${CFG_TEST_EMPTY:-d}", "${CFG_TEST_UNSET:-a:-b}", "${CFG_TEST_TOKEN}${CFG_TEST_TOKEN}"]}}}`,
			configWant(withServer(configStdioDefaults("s", "x"), func(s *Server) {
				s.Args = []string{"$", "${CFG_TEST_TOKEN}", "a$b", "$", "", "d", "a:-b", "tok-123tok-123"}
			}))},
		{"type from the environment", `{"mcpServers": {"s": {"type": "${CFG_TEST_UNSET:-sse}", "url": "http://h/sse"}}}`,
			configWant(configRemoteDefaults("s", "sse", "http://h/sse"))},
		{"names with every allowed character", `{"mcpServers": {"Az09_.-": {"command": "x", "prefix": "P.q-r_9"}}}`,
			configWant(withServer(configStdioDefaults("Az09_.-", "x"), func(s *Server) { s.Prefix = "P.q-r_9" }))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("gw.json", []byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse mismatch\n got: %+v\nwant: %+v", got, tt.want)
			}
		})
	}
}

func TestParseConfigRejects(t *testing.T) {
	t.Setenv("CFG_TEST_SECRET", "s3cr3t\r\nInjected: 1")
	os.Unsetenv("CFG_TEST_UNSET")
	long := strings.Repeat("a", 65)

	tests := []struct {
		name, in, key, reason string
	}{
		// Syntax.
		{"empty file", " \n", "", "the file is empty"},
		{"top level array", `[]`, "", "must hold a JSON object, got an array"},
		{"top level string", `"x"`, "", "got a string"},
		{"missing value", `{"listen": }`, "listen", "invalid JSON at line 1, column 12"},
		{"error on a later line", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}", "mcpServers.a", "line 3, column 26: invalid character '}' looking for beginning of object key string"},
		{"truncated", `{"mcpServers": {"a": {`, "mcpServers.a", "unexpected end of input"},
		{"missing comma", `{"listen": "a:1" "log_level": "info"}`, "", "invalid JSON at line 1"},
		{"trailing object", `{} {}`, "", "unexpected data after the top-level object at line 1, column 4"},
		{"trailing garbage", "{}\n x", "", "line 2, column 2"},
		{"duplicate top-level key", `{"listen": "a:1", "listen": "b:2"}`, "listen", "duplicate key"},
		// Unknown keys.
		{"unknown top-level key", `{"lisen": "x"}`, "lisen", "unknown key; valid keys here are listen, "},
		{"top-level key in another case", `{"maxBodyBytes": 1}`, "maxBodyBytes", `did you mean "max_body_bytes"?`},
		{"unknown server key", `{"mcpServers": {"a": {"command": "x", "bearerToken": "t"}}}`, "mcpServers.a.bearerToken", `did you mean "bearer_token"?`},
		{"disabled from other formats", `{"mcpServers": {"a": {"command": "x", "disabled": true}}}`, "mcpServers.a.disabled", `"active": false`},
		{"transport from other formats", `{"mcpServers": {"a": {"transport": "sse"}}}`, "mcpServers.a.transport", `did you mean "type"?`},
		{"unknown reserved kind", `{"reserved": {"resources": {}}}`, "reserved.resources", "valid keys here are tools, prompts"},
		// Wrong JSON types.
		{"listen number", `{"listen": 8080}`, "listen", "must be a string, got a number"},
		{"mcpServers array", `{"mcpServers": []}`, "mcpServers", "must be an object, got an array"},
		{"mcpServers null", `{"mcpServers": null}`, "mcpServers", "must be an object, got null"},
		{"server string", `{"mcpServers": {"a": "npx"}}`, "mcpServers.a", "must be an object, got a string"},
		{"args string", `{"mcpServers": {"a": {"command": "x", "args": "-v"}}}`, "mcpServers.a.args", "must be an array of strings, got a string"},
		{"args element number", `{"mcpServers": {"a": {"command": "x", "args": ["ok", 1]}}}`, "mcpServers.a.args[1]", "must be a string, got a number"},
		{"headers array", `{"mcpServers": {"a": {"url": "http://h", "headers": ["X: y"]}}}`, "mcpServers.a.headers", "must be an object, got an array"},
		{"env value number", `{"mcpServers": {"a": {"command": "x", "env": {"PORT": 80}}}}`, "mcpServers.a.env.PORT", "must be a string, got a number"},
		{"active string", `{"mcpServers": {"a": {"command": "x", "active": "yes"}}}`, "mcpServers.a.active", `must be true or false, got "yes"`},
		{"reserved server number", `{"reserved": {"tools": {"t": 1}}}`, "reserved.tools.t", "must be a string, got a number"},
		{"allowed_hosts string", `{"allowed_hosts": "localhost"}`, "allowed_hosts", "must be an array of strings"},
		// Numbers.
		{"timeout string", `{"mcpServers": {"weather": {"command": "x", "timeout": "fast"}}}`, "mcpServers.weather.timeout", `must be a positive number of seconds, got "fast"`},
		{"timeout zero", `{"mcpServers": {"a": {"command": "x", "timeout": 0}}}`, "mcpServers.a.timeout", "must be a positive number of seconds, got 0"},
		{"timeout negative", `{"mcpServers": {"a": {"command": "x", "timeout": -1}}}`, "mcpServers.a.timeout", "got -1"},
		{"timeout below a nanosecond", `{"mcpServers": {"a": {"command": "x", "timeout": 1e-12}}}`, "mcpServers.a.timeout", "must be a positive number of seconds"},
		{"timeout too large", `{"mcpServers": {"a": {"command": "x", "timeout": 1e300}}}`, "mcpServers.a.timeout", "must be at most 9223372036 seconds"},
		{"sse_read_timeout bool", `{"mcpServers": {"a": {"url": "http://h", "sse_read_timeout": true}}}`, "mcpServers.a.sse_read_timeout", "got true"},
		{"max_body_bytes fraction", `{"max_body_bytes": 1.5}`, "max_body_bytes", "must be a positive whole number of bytes, got 1.5"},
		{"max_body_bytes zero", `{"max_body_bytes": 0}`, "max_body_bytes", "positive whole number"},
		{"max_body_bytes string", `{"max_body_bytes": "4MB"}`, "max_body_bytes", `got "4MB"`},
		{"max_body_bytes huge", `{"max_body_bytes": 1e19}`, "max_body_bytes", "must be at most"},
		// Server shape.
		{"neither url nor command", `{"mcpServers": {"a": {"description": "?"}}}`, "mcpServers.a", `needs "url" (a remote server) or "command"`},
		{"both url and command", `{"mcpServers": {"a": {"url": "http://h", "command": "x"}}}`, "mcpServers.a", `has both "url" and "command"`},
		{"remote type without url", `{"mcpServers": {"a": {"type": "sse"}}}`, "mcpServers.a.url", `is required for a server of type "sse"`},
		{"stdio without command", `{"mcpServers": {"a": {"type": "stdio", "args": []}}}`, "mcpServers.a.command", "is required for a stdio server"},
		{"stdio with url", `{"mcpServers": {"a": {"type": "stdio", "url": "http://h"}}}`, "mcpServers.a.url", "applies only to remote servers"},
		{"stdio with headers", `{"mcpServers": {"a": {"command": "x", "headers": {}}}}`, "mcpServers.a.headers", "applies only to remote servers"},
		{"stdio with sse_read_timeout", `{"mcpServers": {"a": {"command": "x", "sse_read_timeout": 1}}}`, "mcpServers.a.sse_read_timeout", "applies only to remote servers"},
		{"remote with args", `{"mcpServers": {"a": {"url": "http://h", "args": ["x"]}}}`, "mcpServers.a.args", `applies only to stdio servers, but this server's type is "streamable-http"`},
		{"remote with command", `{"mcpServers": {"a": {"type": "sse", "command": "x"}}}`, "mcpServers.a.command", "applies only to stdio servers"},
		{"unknown type", `{"mcpServers": {"a": {"type": "grpc", "url": "http://h"}}}`, "mcpServers.a.type", `must be "streamable-http", "sse", "websocket" or "stdio", got "grpc"`},
		{"type in wrong case", `{"mcpServers": {"a": {"type": "SSE", "url": "http://h"}}}`, "mcpServers.a.type", `got "SSE"`},
		// URLs.
		{"url unparsable", `{"mcpServers": {"a": {"url": "http://[::1"}}}`, "mcpServers.a.url", "is not a valid URL: missing ']' in host"},
		{"url scheme", `{"mcpServers": {"a": {"url": "ftp://h/x"}}}`, "mcpServers.a.url", `scheme must be http or https for a server of type "streamable-http", got "ftp"`},
		{"url relative", `{"mcpServers": {"a": {"url": "/mcp"}}}`, "mcpServers.a.url", "got none"},
		{"websocket with http", `{"mcpServers": {"a": {"type": "websocket", "url": "http://h/ws"}}}`, "mcpServers.a.url", "scheme must be ws or wss"},
		{"sse with ws", `{"mcpServers": {"a": {"type": "sse", "url": "ws://h/ws"}}}`, "mcpServers.a.url", "scheme must be http or https"},
		{"url without host", `{"mcpServers": {"a": {"url": "http:///mcp"}}}`, "mcpServers.a.url", "must include a host"},
		{"url empty", `{"mcpServers": {"a": {"url": ""}}}`, "mcpServers.a.url", "must not be empty"},
		// Names.
		{"server name with space", `{"mcpServers": {"bad name": {"command": "x"}}}`, "mcpServers", `server name "bad name" must be 1 to 64 characters`},
		{"server name too long", `{"mcpServers": {"` + long + `": {"command": "x"}}}`, "mcpServers", "must be 1 to 64 characters"},
		{"server name empty", `{"mcpServers": {"": {"command": "x"}}}`, "mcpServers", `server name "" must be`},
		{"duplicate server name", `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`, "mcpServers.a", "duplicate server name"},
		{"duplicate server key", `{"mcpServers": {"a": {"command": "x", "command": "y"}}}`, "mcpServers.a.command", "duplicate key"},
		{"prefix with colon", `{"mcpServers": {"a": {"command": "x", "prefix": "a:b"}}}`, "mcpServers.a.prefix", `got "a:b"`},
		{"prefix empty", `{"mcpServers": {"a": {"command": "x", "prefix": ""}}}`, "mcpServers.a.prefix", "omit the key for no prefix"},
		{"prefix too long", `{"mcpServers": {"a": {"command": "x", "prefix": "` + long + `"}}}`, "mcpServers.a.prefix", "1 to 64 characters"},
		// Reserved names.
		{"reserved unknown server", `{"reserved": {"tools": {"t": "ghost"}}, "mcpServers": {"a": {"command": "x"}}}`, "reserved.tools.t", `server "ghost" is not defined in mcpServers`},
		{"reserved without servers", `{"reserved": {"prompts": {"p": "a"}}}`, "reserved.prompts.p", "is not defined"},
		{"reserved empty name", `{"reserved": {"tools": {"": "a"}}, "mcpServers": {"a": {"command": "x"}}}`, "reserved.tools.", "1 to 128 characters"},
		// Gateway settings.
		{"log_level unknown", `{"log_level": "verbose"}`, "log_level", `must be "debug", "info", "warn" or "error", got "verbose"`},
		{"session unknown", `{"mcpServers": {"r": {"url": "http://h/mcp", "session": "per_user"}}}`, "mcpServers.r.session", `must be "auto", "shared" or "per_client", got "per_user"`},
		{"max_client_sessions zero", `{"mcpServers": {"r": {"url": "http://h/mcp", "max_client_sessions": 0}}}`, "mcpServers.r.max_client_sessions", "must be a whole number from 1 to 10000"},
		{"listen without port", `{"listen": "localhost"}`, "listen", `must be HOST:PORT such as 127.0.0.1:8080, got "localhost" (missing port in address)`},
		{"listen port out of range", `{"listen": "127.0.0.1:70000"}`, "listen", "port must be a number from 0 to 65535"},
		{"listen named port", `{"listen": "127.0.0.1:http"}`, "listen", "port must be a number"},
		{"origin with a path", `{"allowed_origins": ["https://a.example/app"]}`, "allowed_origins[0]", "(scheme://host[:port], no path)"},
		{"origin without scheme", `{"allowed_origins": ["ok.example", "x"]}`, "allowed_origins[0]", "must be an origin"},
		{"host with scheme", `{"allowed_hosts": ["localhost", "http://x"]}`, "allowed_hosts[1]", `must be a host or host:port such as localhost:8080, got "http://x"`},
		// Environment.
		{"unset variable", `{"mcpServers": {"a": {"command": "x", "args": ["${CFG_TEST_UNSET}"]}}}`, "mcpServers.a.args[0]", "environment variable CFG_TEST_UNSET is not set (set it, or write ${CFG_TEST_UNSET:-default})"},
		{"unset variable in listen", `{"listen": "${CFG_TEST_UNSET}"}`, "listen", "CFG_TEST_UNSET is not set"},
		{"unset variable in header", `{"mcpServers": {"a": {"url": "http://h", "headers": {"X-Api-Key": "${CFG_TEST_UNSET}"}}}}`, "mcpServers.a.headers.X-Api-Key", "CFG_TEST_UNSET is not set"},
		{"unset variable in reserved", `{"reserved": {"tools": {"t": "${CFG_TEST_UNSET}"}}, "mcpServers": {"a": {"command": "x"}}}`, "reserved.tools.t", "CFG_TEST_UNSET is not set"},
		{"invalid variable name", `{"mcpServers": {"a": {"command": "${1X}"}}}`, "mcpServers.a.command", "invalid variable reference ${1X}"},
		{"empty variable name", `{"mcpServers": {"a": {"command": "${}"}}}`, "mcpServers.a.command", "invalid variable reference ${}"},
		{"variable without colon default", `{"mcpServers": {"a": {"command": "${X-d}"}}}`, "mcpServers.a.command", "invalid variable reference ${X-d}"},
		{"unterminated variable", `{"mcpServers": {"a": {"command": "x", "cwd": "${HOME"}}}`, "mcpServers.a.cwd", `without a closing "}"`},
		// Headers, tokens and stdio values.
		{"header name with space", `{"mcpServers": {"a": {"url": "http://h", "headers": {"X Key": "v"}}}}`, "mcpServers.a.headers.X Key", "is not a valid HTTP header name"},
		{"header owned by transport", `{"mcpServers": {"a": {"url": "http://h", "headers": {"content-type": "text/plain"}}}}`, "mcpServers.a.headers.content-type", "set by the gateway's transport"},
		{"header repeated in another case", `{"mcpServers": {"a": {"url": "http://h", "headers": {"X-Key": "1", "x-key": "2"}}}}`, "mcpServers.a.headers.x-key", `repeats header "X-Key"`},
		{"header value with CRLF from env", `{"mcpServers": {"a": {"url": "http://h", "headers": {"X-Key": "${CFG_TEST_SECRET}"}}}}`, "mcpServers.a.headers.X-Key", "must not contain CR, LF or NUL"},
		{"bearer token with Bearer prefix", `{"mcpServers": {"a": {"url": "http://h", "bearer_token": "Bearer s3cr3t"}}}`, "mcpServers.a.bearer_token", `without the "Bearer " prefix`},
		{"bearer token with CRLF", `{"mcpServers": {"a": {"url": "http://h", "bearer_token": "${CFG_TEST_SECRET}"}}}`, "mcpServers.a.bearer_token", "must not contain spaces or control characters"},
		{"bearer token empty", `{"mcpServers": {"a": {"url": "http://h", "bearer_token": "${CFG_TEST_UNSET:-}"}}}`, "mcpServers.a.bearer_token", "must not be empty"},
		{"bearer token and Authorization header", `{"mcpServers": {"a": {"url": "http://h", "headers": {"authorization": "Basic s3cr3t"}, "bearer_token": "s3cr3t"}}}`, "mcpServers.a.bearer_token", "conflicts with headers.authorization"},
		{"env name with =", `{"mcpServers": {"a": {"command": "x", "env": {"A=B": "s3cr3t"}}}}`, "mcpServers.a.env.A=B", "is not a valid environment variable name"},
		{"env value with NUL", `{"mcpServers": {"a": {"command": "x", "env": {"A": "a\u0000b"}}}}`, "mcpServers.a.env.A", "must not contain NUL"},
		{"command empty", `{"mcpServers": {"a": {"command": ""}}}`, "mcpServers.a.command", "must not be empty"},
		{"arg with NUL", `{"mcpServers": {"a": {"command": "x", "args": ["ok", "a\u0000b"]}}}`, "mcpServers.a.args[1]", "must not contain NUL"},
		{"cwd empty", `{"mcpServers": {"a": {"command": "x", "cwd": ""}}}`, "mcpServers.a.cwd", "omit the key"},
		{"first error wins", `{"mcpServers": {"a": {"command": "x", "timeout": "slow"}, "b": {"url": "ftp://h"}}, "log_level": "loud"}`, "mcpServers.a.timeout", `got "slow"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("gw.json", []byte(tt.in))
			if err == nil {
				t.Fatalf("Parse accepted the input: %+v", cfg)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *Error", err, err)
			}
			if ce.File != "gw.json" || ce.Key != tt.key || !strings.Contains(ce.Reason, tt.reason) {
				t.Errorf("got File=%q Key=%q Reason=%q\nwant File=%q Key=%q Reason containing %q", ce.File, ce.Key, ce.Reason, "gw.json", tt.key, tt.reason)
			}
			for _, secret := range []string{"s3cr3t", "Injected"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q echoes a secret value", err)
				}
			}
		})
	}
}

func TestConfigErrorMessage(t *testing.T) {
	_, err := Parse("gw.json", []byte(`{"mcpServers": {"weather": {"url": "http://h", "timeout": "fast"}}}`))
	const want = `config gw.json: mcpServers.weather.timeout: must be a positive number of seconds, got "fast"`
	if err == nil || err.Error() != want {
		t.Fatalf("got error %v, want %s", err, want)
	}
	for _, tt := range []struct {
		e    Error
		want string
	}{
		{Error{File: "a.json", Reason: "r"}, "config a.json: r"},
		{Error{Key: "k", Reason: "r"}, "config: k: r"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestParseConfigKeepsServerOrder(t *testing.T) {
	in := `{"mcpServers": {
		"zeta": {"command": "z"},
		"alpha": {"url": "http://a/mcp"},
		"mid": {"command": "m", "active": false},
		"omega": {"type": "sse", "url": "http://o/sse"},
		"beta": {"command": "b"},
		"delta": {"type": "ws", "url": "ws://d/"}
	}}`
	cfg, err := Parse("gw.json", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range cfg.Servers {
		got = append(got, s.Name+":"+s.Type)
	}
	want := []string{"zeta:stdio", "alpha:streamable-http", "omega:sse", "beta:stdio", "delta:websocket"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("servers in order %v, want %v", got, want)
	}
}

func TestServerConfigExposedName(t *testing.T) {
	tests := []struct {
		prefix, name, want string
	}{
		{"", "get_weather", "get_weather"},
		{"wx", "get_weather", "wx_get_weather"},
		{"a.b-c", "x", "a.b-c_x"},
		{"p", "", "p_"},
	}
	for _, tt := range tests {
		t.Run(tt.prefix+"/"+tt.name, func(t *testing.T) {
			s := Server{Name: "s", Prefix: tt.prefix}
			if got := s.ExposedName(tt.name); got != tt.want {
				t.Errorf("ExposedName(%q) with prefix %q = %q, want %q", tt.name, tt.prefix, got, tt.want)
			}
		})
	}
}

func TestLoadConfigExample(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("DOCS_API_KEY", "docs-key")
	os.Unsetenv("EDGE_MCP_LISTEN")
	os.Unsetenv("LEGACY_TOKEN")
	path := filepath.Join("testdata", "config", "example.json")
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		Path: path, Listen: "127.0.0.1:8080", MaxBodyBytes: 4 << 20, LogLevel: "info", Protocol2026: ptr(true),
		AllowedOrigins: []string{"http://localhost:6274", "https://app.example.com"},
		AllowedHosts:   []string{"localhost:8080", "127.0.0.1:8080"},
		Reserved:       ReservedNames{Tools: map[string]string{"fs_read_file": "fs"}, Prompts: map[string]string{"summarize": "docs"}},
		Policies: []spec.Spec{{Name: "redact", Module: "testdata/config/wasm/redact-secrets.wasm", Tools: []string{"*"}, Servers: []string{"docs", "legacy"},
			Config: json.RawMessage(`{"replacement":"[REDACTED]"}`), OnError: "deny", TimeoutMS: 50, MemoryMB: 64}},
		Admin: Admin{Listen: "127.0.0.1:9090", Tokens: map[string]string{"ops": "change-me-to-a-long-random-token"},
			StateDir: "/var/lib/edge-mcp", MaxModuleBytes: 32 << 20, KeepVersions: 5, WatchConfig: ptr(true)},
		Auth: Auth{Mode: "api_key", APIKeys: []APIKey{
			{Name: "alice", SHA256: "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"},
			{Name: "ci-bot", Key: "ci-bot-key-0123456789abcdef"},
			{Name: "old-laptop", SHA256: "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9", Revoked: true}}},
		Access: []AccessRule{{Identities: []string{"alice"}, Servers: []string{"*"}, DenyTools: []string{"*delete*"}},
			{Identities: []string{"ci-*"}, Servers: []string{"docs"}, Tools: []string{"docs_search*"}}},
		Limits: Limits{ClientRate: &Rate{RPS: 20, Burst: 40}, ToolRate: &Rate{RPS: 5, Burst: 10},
			UpstreamConcurrency: 32, UpstreamQueue: ptr(64)},
		ToolRules: []ToolRule{{Servers: []string{"docs"}, Visibility: "deferred"},
			{Tools: []string{"*delete*", "*write*"}, RequireApproval: ptr(true), Timeout: 120},
			{Servers: []string{"legacy"}, ValidateArguments: ptr(false), Rate: &Rate{RPS: 1, Burst: 2}}},
		Pinning:       Pinning{Mode: "withhold"},
		Audit:         Audit{Path: "/var/log/edge-mcp/audit.jsonl", MaxSizeMB: 100, MaxBackups: 10, MaxAgeDays: 30, Compress: true},
		Telemetry:     Telemetry{ServiceName: "edge-mcp", SampleRatio: ptr(0.1)},
		Observability: Observability{Metrics: ptr(true), Compression: ptr(true), LogFormat: "json", RequiredServers: []string{"docs"}},
		Cluster: &Cluster{NatsURL: "nats://127.0.0.1:4222", Name: "edge", Replica: "edge-1",
			Secrets: []string{"change-me-to-a-long-random-fleet-secret"}},
		Servers: []Server{
			{Name: "fs", Type: "stdio", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/u/projects"},
				Env: map[string]string{"NODE_OPTIONS": "--max-old-space-size=256"}, Cwd: "/home/u", Prefix: "fs",
				Timeout: 30 * time.Second, SSEReadTimeout: 300 * time.Second, Active: true,
				Description: "Local files over stdio; the Claude Desktop form (command, args, env) works unchanged."},
			{Name: "docs", Type: "streamable-http", URL: "https://docs.example.com/mcp", Headers: map[string]string{"X-Api-Key": "docs-key"},
				Timeout: 12500 * time.Millisecond, SSEReadTimeout: 300 * time.Second, Active: true,
				HealthInterval: 30 * time.Second, HealthTimeout: 10 * time.Second, HealthMisses: 3,
				RetryInitial: time.Second, RetryMax: 300 * time.Second, ReconnectWait: 2 * time.Second,
				Description: `A streamable HTTP server; "type" may be omitted when "url" is set.`},
			{Name: "legacy", Type: "sse", URL: "http://127.0.0.1:9000/sse", BearerToken: "dev-token", Prefix: "legacy",
				Timeout: 60 * time.Second, SSEReadTimeout: 300 * time.Second, Active: true, Session: "per_client", MaxClientSessions: 8, MaxClientSessionsPerIdentity: 2,
				Description: "An HTTP+SSE (2024-11-05) server with a bearer token from the environment."},
			{Name: "tracker", Type: "streamable-http", TypeInferred: true, URL: "https://mcp.tracker.example.com/mcp",
				Timeout: 60 * time.Second, SSEReadTimeout: 300 * time.Second, Active: true, Identity: "shared",
				OAuth:       &OAuth{Grant: "authorization_code", ClientID: "edge-mcp", CallbackPort: 3118, Scopes: []string{"issues:read", "issues:write"}},
				Description: "A hosted server that wants OAuth: the mcpServers form of other clients works unchanged; run `edge-mcp auth login tracker` once."},
		},
		OAuth: OAuthSettings{KeyFile: "/var/lib/edge-mcp/oauth.key", PendingWait: 30 * time.Second, RedirectURL: "https://gateway.example.com/oauth/callback"},
		InterceptorServers: []Server{
			{Name: "pii", Type: "streamable-http", URL: "https://pii.internal/mcp", BearerToken: "pii-token",
				Timeout: 60 * time.Second, SSEReadTimeout: 300 * time.Second, Active: true,
				Description: "A SEP-2624 interceptor server: a PII model too big for Wasm, beside the gateway."},
		},
		VirtualServers: []virtual.Config{{Name: "docs-only", Path: "/mcp/docs", Title: "Docs", Instructions: "Search the docs before answering.",
			Tools: []string{"docs_*"}, Prompts: []string{"summarize"}, Resources: []string{"docs://*"},
			Overrides: []virtual.Override{{Tool: "docs_search", Name: "search", Description: "Search the product docs.", Arguments: []virtual.Argument{
				{Name: "lang", Fixed: json.RawMessage(`"en"`)}, {Name: "limit", Default: json.RawMessage(`5`)}, {Name: "debug", Hidden: true}}}},
			Allow: []string{"alice"}}},
		Interceptors: []InterceptorEntry{
			{Server: "pii", Names: []string{"pii/*"}, Tools: []string{"*"}, Servers: []string{"docs"}, Mode: "audit", FailOpen: ptr(true), TimeoutMS: 200},
			{Module: "redact", Tools: []string{"*"}, Servers: []string{"docs", "legacy"}, FailOpen: ptr(false), TimeoutMS: 50},
		},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("example config mismatch\n got: %+v\nwant: %+v", cfg, want)
	}

	// The example documents every key the decoder knows.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Reserved   map[string]json.RawMessage            `json:"reserved"`
		MCPServers map[string]map[string]json.RawMessage `json:"mcpServers"`
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, s := range doc.MCPServers {
		for k := range s {
			used[k] = true
		}
	}
	for _, k := range configTopKeys {
		if _, ok := top[k]; !ok {
			t.Errorf("example.json does not show top-level key %q", k)
		}
	}
	for _, k := range configReservedKeys {
		if _, ok := doc.Reserved[k]; !ok {
			t.Errorf("example.json does not show reserved.%s", k)
		}
	}
	for _, k := range configServerKeys {
		if !used[k] {
			t.Errorf("example.json does not show server key %q", k)
		}
	}
	for _, typ := range []string{"streamable-http", "sse", "websocket", "stdio"} {
		if !strings.Contains(string(data), `"type": "`+typ+`"`) {
			t.Errorf("example.json does not show type %q", typ)
		}
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file: got %v, want fs.ErrNotExist", err)
	}
}

func TestConfigScaled(t *testing.T) {
	tests := []struct {
		in             string
		scale          int
		v              int64
		exact, inRange bool
	}{
		{"0", 9, 0, true, true},
		{"-0.0", 9, 0, true, true},
		{"1", 9, 1e9, true, true},
		{"2.5", 9, 2.5e9, true, true},
		{"25e-1", 9, 2.5e9, true, true},
		{"1E+2", 0, 100, true, true},
		{"0.0000000005", 9, 1, false, true},
		{"0.0000000004", 9, 0, false, true},
		{"0.5", 0, 1, false, true},
		{"1.50", 0, 2, false, true},
		{"1.000", 0, 1, true, true},
		{"-3", 0, -3, true, true},
		{"9223372036854775807", 0, 1<<63 - 1, true, true},
		{"9223372036854775808", 0, 0, true, false},
		{"9223372036.8547758075", 9, 0, false, false},
		{"1e-99999999999", 9, 0, false, true},
		{"1e99999999999", 9, 0, false, false},
		{"00012", 0, 12, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			v, exact, inRange := configScaled(tt.in, tt.scale)
			if v != tt.v || exact != tt.exact || inRange != tt.inRange {
				t.Errorf("configScaled(%q, %d) = %d, %v, %v; want %d, %v, %v", tt.in, tt.scale, v, exact, inRange, tt.v, tt.exact, tt.inRange)
			}
		})
	}
}

func TestParseConfigRejectsBadPolicies(t *testing.T) {
	for _, tc := range []struct {
		name, policies, key, reason string
	}{
		{"not a list", `{"name": "x"}`, "policies", "list of policy attachments"},
		{"unknown field", `[{"name": "x", "module": "m.wasm", "tool": ["*"]}]`, "policies", `unknown field "tool"`},
		{"no module", `[{"name": "x"}]`, "policies[0]", "module"},
		{"bad on_error", `[{"name": "x", "module": "m.wasm", "on_error": "maybe"}]`, "policies[0]", "on_error"},
		{"duplicate name", `[{"name": "x", "module": "a.wasm"}, {"name": "x", "module": "b.wasm"}]`, "policies[1].name", "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gw.json", []byte(`{"policies": `+tc.policies+`}`))
			var cerr *Error
			if !errors.As(err, &cerr) || cerr.Key != tc.key || !strings.Contains(cerr.Reason, tc.reason) {
				t.Fatalf("err = %v, want key %s and a reason with %q", err, tc.key, tc.reason)
			}
		})
	}
	cfg, err := Parse("/etc/edge/gw.json", []byte(`{"policies": [{"name": "r", "module": "mods/r.wasm"}, {"name": "a", "module": "/abs/a.wasm"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Policies[0].Module != "/etc/edge/mods/r.wasm" || cfg.Policies[1].Module != "/abs/a.wasm" {
		t.Errorf("module paths not resolved against the config file: %q %q", cfg.Policies[0].Module, cfg.Policies[1].Module)
	}
}

func TestConfigAdminSection(t *testing.T) {
	t.Setenv("EDGE_TEST_ADMIN_TOKEN", "0123456789abcdef-from-env")
	cfg, err := Parse("a.json", []byte(`{"mcpServers": {}, "admin": {"listen": "0.0.0.0:9090", "tokens": {"ops": "${EDGE_TEST_ADMIN_TOKEN}"}, "keep_versions": 3}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Tokens["ops"] != "0123456789abcdef-from-env" || cfg.Admin.KeepVersions != 3 || cfg.Admin.Listen != "0.0.0.0:9090" {
		t.Errorf("admin = %+v", cfg.Admin)
	}
	for _, tc := range []struct{ name, admin, key, reason string }{
		{"non-loopback without a token", `{"listen": "0.0.0.0:9090"}`, "admin.listen", "needs admin.tokens"},
		{"short token", `{"tokens": {"ops": "short"}}`, "admin.tokens.ops", "at least 16"},
		{"unknown key", `{"tokenz": {}}`, "admin.tokenz", "unknown key; valid keys here are listen, tokens,"},
		{"wrong type", `{"keep_versions": "five"}`, "admin.keep_versions", "must be a number"},
		{"signed without keys", `{"require_signed": true}`, "admin.require_signed", "trusted_keys is empty"},
		{"unset variable", `{"tokens": {"ops": "${EDGE_TEST_UNSET_VAR}"}}`, "admin.tokens.ops", "EDGE_TEST_UNSET_VAR is not set"},
		{"not an object", `[]`, "admin", "must be an object, got an array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("a.json", []byte(`{"mcpServers": {}, "admin": `+tc.admin+`}`))
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "a.json" || ce.Key != tc.key || !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("got %v, want key %q and a reason with %q", err, tc.key, tc.reason)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestConfigFileReferences(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "token"), []byte("s3cret-from-file\n"), 0o600)
	cfg, err := Parse(filepath.Join(dir, "gw.json"), []byte(`{"mcpServers": {"a": {"url": "https://a.example/mcp", "bearer_token": "${file:token}", "headers": {"X-Key": "k-${file:`+filepath.Join(dir, "token")+`}"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Servers[0]; s.BearerToken != "s3cret-from-file" || s.Headers["X-Key"] != "k-s3cret-from-file" {
		t.Errorf("expanded %q %q", s.BearerToken, s.Headers["X-Key"])
	}
	_, err = Parse(filepath.Join(dir, "gw.json"), []byte(`{"mcpServers": {"a": {"url": "https://a.example/mcp", "bearer_token": "${file:missing}"}}}`))
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "mcpServers.a.bearer_token" || !strings.Contains(ce.Reason, "missing") {
		t.Errorf("missing file: %v", err)
	}
}
