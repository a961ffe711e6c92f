package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// FuzzParseConfig checks that Parse never panics, that every error is a
// *Error naming the file and a key or reason, and that an accepted
// config written back in canonical form parses to the same Config.
func FuzzParseConfig(f *testing.F) {
	seeds := []string{
		`{}`,
		`{"mcpServers": {"a": {"command": "x", "args": ["$$", "${HOME:-h}"], "env": {"K": "v"}, "cwd": "/", "timeout": 0.25}}}`,
		`{"mcpServers": {"r": {"type": "sse", "url": "https://h/sse", "headers": {"X-K": "v"}, "bearer_token": "t", "sse_read_timeout": 1e1, "prefix": "p"}}}`,
		`{"mcpServers": {"w": {"type": "ws", "url": "ws://h/"}, "off": {"active": false}}, "reserved": {"tools": {"t": "off"}, "prompts": {"p": "w"}}}`,
		`{"listen": ":0", "max_body_bytes": 1024, "log_level": "warn", "allowed_origins": ["https://a.example"], "allowed_hosts": ["a:1"]}`,
		`{"mcpServers": {"a": {"url": "http://h", "command": "x"}}}`,
		`{"mcpServers": {"a": {"command": "x", "timeout": "fast"}}} trailing`,
		"{\n\"mcpServers\": {\"a\": {\"command\": \"${UNSET_CFG_FUZZ}\"}}}",
		`{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`,
		`[1, 2]`,
		``,
		`{"virtual_servers": {"t": {"path": "/mcp/t", "title": "T $$x", "tools": ["a.*", "b"], "allow": ["x"], "deferred_tools": true, "rate_limit": {"rps": 1, "burst": 2}, "interceptors": ["p"], "overrides": {"a.b": {"name": "c", "arguments": {"r": {"fixed": {"k": [1, "$"]}}, "d": {"default": null}, "h": {"hidden": true}}}}}}}`,
		`{"interceptorServers": {"pii": {"url": "http://127.0.0.1:1/mcp", "bearer_token": "t"}, "off": {"active": false}}, "interceptors": [{"server": "pii", "names": ["pii/*"], "mode": "audit", "fail_open": true, "priority": -3, "timeout_ms": 50, "config": {"k": "$${X}", "n": [1, 2]}}, {"server": "off"}]}`,
		`{"interceptors": [{"server": "x", "module": "y"}, {"names": [""]}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	if data, err := os.ReadFile(filepath.Join("testdata", "config", "example.json")); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.json", data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v is not a *Error", err, err)
			}
			if ce.File != "fuzz.json" || ce.Key == "" && ce.Reason == "" {
				t.Fatalf("incomplete Error %+v", ce)
			}
			return
		}
		canon := configCanonical(t, cfg)
		again, err := Parse("fuzz.json", canon)
		if err != nil {
			t.Fatalf("canonical form of an accepted config is rejected: %v\ninput: %q\ncanonical: %s", err, data, canon)
		}
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("canonical form parses differently\n first: %+v\nsecond: %+v\ncanonical: %s", cfg, again, canon)
		}
	})
}

// configCanonical writes cfg back as a config file: servers in order, every
// string escaped against expansion, durations as exact decimals, and an
// inactive placeholder for each reserved server that is not active.
func configCanonical(t *testing.T, cfg *Config) []byte {
	t.Helper()
	str := func(s string) string {
		b, err := json.Marshal(strings.ReplaceAll(s, "$", "$$"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	key := func(s string) string {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	list := func(l []string) string {
		parts := make([]string, len(l))
		for i, s := range l {
			parts[i] = str(s)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	object := func(m map[string]string) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = key(k) + ":" + str(m[k])
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	seconds := func(d time.Duration) string {
		return fmt.Sprintf("%d.%09d", d/time.Second, d%time.Second)
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, `{"listen":%s,"max_body_bytes":%d,"log_level":%s`, str(cfg.Listen), cfg.MaxBodyBytes, str(cfg.LogLevel))
	if cfg.Protocol2026 != nil {
		fmt.Fprintf(&b, `,"protocol_2026":%t`, *cfg.Protocol2026)
	}
	if cfg.AllowedOrigins != nil {
		fmt.Fprintf(&b, `,"allowed_origins":%s`, list(cfg.AllowedOrigins))
	}
	if cfg.AllowedHosts != nil {
		fmt.Fprintf(&b, `,"allowed_hosts":%s`, list(cfg.AllowedHosts))
	}
	fmt.Fprintf(&b, `,"reserved":{"tools":%s,"prompts":%s}`, object(cfg.Reserved.Tools), object(cfg.Reserved.Prompts))
	if cfg.Policies != nil {
		p, err := json.Marshal(cfg.Policies)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, `,"policies":%s`, p)
	}
	for key, section := range map[string]any{"admin": cfg.Admin, "auth": cfg.Auth, "limits": cfg.Limits,
		"pinning": cfg.Pinning, "audit": cfg.Audit, "telemetry": cfg.Telemetry, "observability": cfg.Observability, "cluster": cfg.Cluster} {
		if !reflect.ValueOf(section).IsZero() {
			m, err := json.Marshal(section)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, `,%q:%s`, key, strings.ReplaceAll(string(m), "$", "$$"))
		}
	}
	for key, list := range map[string]any{"access": cfg.Access, "tool_rules": cfg.ToolRules} {
		if !reflect.ValueOf(list).IsNil() {
			m, err := json.Marshal(list)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, `,%q:%s`, key, strings.ReplaceAll(string(m), "$", "$$"))
		}
	}
	if o := cfg.OAuth; o != (OAuthSettings{}) {
		fmt.Fprintf(&b, `,"oauth":{"key_file":%s`, str(o.KeyFile))
		if o.Key != "" {
			fmt.Fprintf(&b, `,"key":%s`, str(o.Key))
		}
		if o.PendingWait != 0 {
			fmt.Fprintf(&b, `,"pending_wait":%s`, seconds(o.PendingWait))
		}
		if o.RedirectURL != "" {
			fmt.Fprintf(&b, `,"redirect_url":%s`, str(o.RedirectURL))
		}
		b.WriteByte('}')
	}
	writeServer := func(s Server) {
		fmt.Fprintf(&b, `%s:{"timeout":%s`, key(s.Name), seconds(s.Timeout))
		if !s.TypeInferred {
			fmt.Fprintf(&b, `,"type":%s`, str(s.Type))
		}
		for k, d := range map[string]time.Duration{"health_interval": s.HealthInterval, "health_timeout": s.HealthTimeout, "retry_initial": s.RetryInitial, "retry_max": s.RetryMax, "reconnect_wait": s.ReconnectWait} {
			if d != 0 {
				fmt.Fprintf(&b, `,%q:%s`, k, seconds(d))
			}
		}
		if s.Session != "" {
			fmt.Fprintf(&b, `,"session":%q`, s.Session)
		}
		if s.MaxClientSessions != 0 {
			fmt.Fprintf(&b, `,"max_client_sessions":%d`, s.MaxClientSessions)
		}
		if s.MaxClientSessionsPerIdentity != 0 {
			fmt.Fprintf(&b, `,"max_client_sessions_per_identity":%d`, s.MaxClientSessionsPerIdentity)
		}
		if s.HealthMisses != 0 {
			fmt.Fprintf(&b, `,"health_misses":%d`, s.HealthMisses)
		}
		if s.Type == "stdio" {
			fmt.Fprintf(&b, `,"command":%s`, str(s.Command))
			if s.Args != nil {
				fmt.Fprintf(&b, `,"args":%s`, list(s.Args))
			}
			if s.Env != nil {
				fmt.Fprintf(&b, `,"env":%s`, object(s.Env))
			}
			if s.Cwd != "" {
				fmt.Fprintf(&b, `,"cwd":%s`, str(s.Cwd))
			}
		} else {
			fmt.Fprintf(&b, `,"url":%s,"sse_read_timeout":%s`, str(s.URL), seconds(s.SSEReadTimeout))
			if s.Headers != nil {
				fmt.Fprintf(&b, `,"headers":%s`, object(s.Headers))
			}
			if s.BearerToken != "" {
				fmt.Fprintf(&b, `,"bearer_token":%s`, str(s.BearerToken))
			}
			if o := s.OAuth; o != nil {
				fmt.Fprintf(&b, `,"oauth":{"grant":%s,"client_metadata_url":%s,"redirect_url":%s`, str(o.Grant), str(o.ClientMetadataURL), str(o.RedirectURL))
				if o.TokenEndpointAuthMethod != "" {
					fmt.Fprintf(&b, `,"token_endpoint_auth_method":%s`, str(o.TokenEndpointAuthMethod))
				}
				if o.ClientID != "" {
					fmt.Fprintf(&b, `,"clientId":%s,"clientSecret":%s`, str(o.ClientID), str(o.ClientSecret))
				}
				if o.TokenURL != "" {
					fmt.Fprintf(&b, `,"token_url":%s,"audience":%s,"resource":%s`, str(o.TokenURL), str(o.Audience), str(o.Resource))
				}
				if o.CallbackPort != 0 {
					fmt.Fprintf(&b, `,"callbackPort":%d`, o.CallbackPort)
				}
				if o.Scopes != nil {
					fmt.Fprintf(&b, `,"scopes":%s`, list(o.Scopes))
				}
				b.WriteByte('}')
			}
		}
		if s.Identity != "" {
			fmt.Fprintf(&b, `,"identity":%q`, s.Identity)
		}
		if s.Description != "" {
			fmt.Fprintf(&b, `,"description":%s`, str(s.Description))
		}
		if s.Prefix != "" {
			fmt.Fprintf(&b, `,"prefix":%s`, str(s.Prefix))
		}
		b.WriteByte('}')
	}
	if cfg.InterceptorServers != nil {
		b.WriteString(`,"interceptorServers":{`)
		for i, s := range cfg.InterceptorServers {
			if i > 0 {
				b.WriteByte(',')
			}
			writeServer(s)
		}
		b.WriteByte('}')
	}
	if cfg.Interceptors != nil {
		b.WriteString(`,"interceptors":[`)
		for i, e := range cfg.Interceptors {
			if i > 0 {
				b.WriteByte(',')
			}
			raw := e.Config // not expanded: written as it is
			e.Config = nil
			m, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			m = []byte(strings.ReplaceAll(string(m), "$", "$$"))
			if raw != nil {
				m = append(append(append(m[:len(m)-1:len(m)-1], `,"config":`...), raw...), '}')
			}
			b.Write(m)
		}
		b.WriteByte(']')
	}
	if cfg.VirtualServers != nil {
		b.WriteString(`,"virtual_servers":{`)
		for i, v := range cfg.VirtualServers {
			if i > 0 {
				b.WriteByte(',')
			}
			writeVirtual(&b, v, str, key)
		}
		b.WriteByte('}')
	}
	b.WriteString(`,"mcpServers":{`)
	active := map[string]bool{}
	for i, s := range cfg.Servers {
		active[s.Name] = true
		if i > 0 {
			b.WriteByte(',')
		}
		writeServer(s)
	}
	for _, m := range []map[string]string{cfg.Reserved.Tools, cfg.Reserved.Prompts} {
		for _, srv := range m {
			if !active[srv] {
				active[srv] = true
				if b.Bytes()[b.Len()-1] != '{' {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `%s:{"active":false}`, key(srv))
			}
		}
	}
	b.WriteString("}}")
	return b.Bytes()
}

// writeVirtual writes a virtual server in canonical form: strings
// escaped by str, keys by key, argument values as written.
func writeVirtual(b *bytes.Buffer, v virtual.Config, str, key func(string) string) {
	strs := func(l []string) string {
		q := make([]string, len(l))
		for i, s := range l {
			q[i] = str(s)
		}
		return "[" + strings.Join(q, ",") + "]"
	}
	fmt.Fprintf(b, `%s:{"path":%s,"title":%s,"instructions":%s,"tools":%s,"prompts":%s,"resources":%s,"allow":%s,"deferred_tools":%t,"overrides":{`,
		key(v.Name), str(v.Path), str(v.Title), str(v.Instructions), strs(v.Tools), strs(v.Prompts), strs(v.Resources), strs(v.Allow), v.DeferredTools)
	for i, o := range v.Overrides {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(b, `%s:{"name":%s,"description":%s,"arguments":{`, key(o.Tool), str(o.Name), str(o.Description))
		for j, a := range o.Arguments {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, `%s:{"hidden":%t`, key(a.Name), a.Hidden)
			if a.Fixed != nil {
				fmt.Fprintf(b, `,"fixed":%s`, a.Fixed)
			}
			if a.Default != nil {
				fmt.Fprintf(b, `,"default":%s`, a.Default)
			}
			b.WriteByte('}')
		}
		b.WriteString("}}")
	}
	b.WriteString("}}")
}
