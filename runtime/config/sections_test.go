package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseSectionsRejects covers the gateway sections, which the key
// table decodes like the rest of the file: keys at any depth, lists of
// objects, duplicate keys, and checks of one key or of a whole object.
func TestParseSectionsRejects(t *testing.T) {
	t.Setenv("CFG_TEST_SECRET", "s3cr3t")
	for _, tc := range []struct{ name, in, key, reason string }{
		{"duplicate key in a section", `{"audit": {"path": "a", "path": "b"}}`, "audit.path", "duplicate key"},
		{"unknown key in a nested object", `{"auth": {"mode": "jwt", "jwt": {"Issuer": "i"}}}`, "auth.jwt.Issuer", `did you mean "issuer"?`},
		{"unknown key in a list element", `{"access": [{"identities": ["a"]}, {"identity": ["b"]}]}`, "access[1].identity", "valid keys here are identities, servers, tools, deny_tools"},
		{"list of objects holds a string", `{"access": ["alice"]}`, "access[0]", "must be an object, got a string"},
		{"section list is an object", `{"tool_rules": {}}`, "tool_rules", "must be an array of objects, got an object"},
		{"string list holds a number", `{"observability": {"required_servers": [1]}}`, "observability.required_servers[0]", "must be a string, got a number"},
		{"bool is a string", `{"observability": {"metrics": "yes"}}`, "observability.metrics", `must be true or false, got "yes"`},
		{"whole number with a fraction", `{"audit": {"max_backups": 1.5}}`, "audit.max_backups", "must be a whole number, got 1.5"},
		{"negative count", `{"audit": {"max_size_mb": -1}}`, "audit.max_size_mb", "must not be negative"},
		{"module size zero", `{"admin": {"max_module_bytes": 0}}`, "admin.max_module_bytes", "must be a positive whole number of bytes, got 0"},
		{"keep_versions out of range", `{"admin": {"keep_versions": 101}}`, "admin.keep_versions", "from 0 to 100, got 101"},
		{"float too large", `{"telemetry": {"sample_ratio": 1e400}}`, "telemetry.sample_ratio", "must be a finite number"},
		{"sample ratio above 1", `{"telemetry": {"sample_ratio": 1.5}}`, "telemetry.sample_ratio", "must be between 0 and 1, got 1.5"},
		{"rate without rps", `{"limits": {"tool_rate": {"burst": 3}}}`, "limits.tool_rate.rps", "must be a positive number of calls per second"},
		{"rate in a tool rule", `{"tool_rules": [{"rate": {"rps": 1, "burst": -1}}]}`, "tool_rules[0].rate.burst", "must not be negative"},
		{"visibility", `{"tool_rules": [{}, {"visibility": "hidden"}]}`, "tool_rules[1].visibility", `must be "visible" or "deferred", got "hidden"`},
		{"tool rule timeout", `{"tool_rules": [{"timeout": 90000}]}`, "tool_rules[0].timeout", "must be between 0 and 86400 seconds"},
		{"pinning mode", `{"pinning": {"mode": "strict"}}`, "pinning.mode", `must be "withhold", "flag" or "off", got "strict"`},
		{"log format", `{"observability": {"log_format": "xml"}}`, "observability.log_format", `must be "text" or "json"`},
		{"access without identities", `{"access": [{"servers": ["*"]}]}`, "access[0].identities", "is required"},
		{"api key without name", `{"auth": {"mode": "api_key", "api_keys": [{"key": "k"}]}}`, "auth.api_keys[0].name", "is required"},
		{"api key with key and hash", `{"auth": {"mode": "api_key", "api_keys": [{"name": "a", "key": "${CFG_TEST_SECRET}", "sha256": "x"}]}}`, "auth.api_keys[0]", `exactly one of "key" and "sha256"`},
		{"jwt without issuer", `{"auth": {"mode": "jwt", "jwt": {"audience": ["a"]}}}`, "auth.jwt.issuer", "is required"},
		{"jwt with two key sources", `{"auth": {"mode": "jwt", "jwt": {"issuer": "i", "audience": ["a"], "hmac_secret": "${CFG_TEST_SECRET}", "jwks_url": "https://k"}}}`, "auth.jwt", "exactly one key source"},
		{"jwt in mode none", `{"auth": {"jwt": {}}}`, "auth.mode", `is "none" but api_keys or jwt are set`},
		{"unknown mode", `{"auth": {"mode": "basic"}}`, "auth.mode", `must be "none", "api_key" or "jwt", got "basic"`},
		{"cluster without nats_url", `{"cluster": {"secret": "${CFG_TEST_SECRET}"}}`, "cluster.nats_url", "is required"},
		{"cluster without secret", `{"cluster": {"nats_url": "nats://127.0.0.1:4222"}}`, "cluster.secret", "is required"},
		{"cluster secret too short", `{"cluster": {"nats_url": "nats://n:4222", "secret": ["0123456789abcdef0123456789abcdef", "${CFG_TEST_SECRET}"]}}`, "cluster.secret[1]", "at least 32 characters (got 6)"},
		{"cluster secret is a number", `{"cluster": {"nats_url": "nats://n:4222", "secret": 7}}`, "cluster.secret", "must be a string or an array of strings, got a number"},
		{"cluster session_ttl too short", `{"cluster": {"nats_url": "nats://n:4222", "secret": "0123456789abcdef0123456789abcdef", "session_ttl": 30}}`, "cluster.session_ttl", "must be between 60 and 2592000 seconds (30 days), got 30"},
		{"cluster session_ttl too long", `{"cluster": {"nats_url": "nats://n:4222", "secret": "0123456789abcdef0123456789abcdef", "session_ttl": 2592001}}`, "cluster.session_ttl", "must be between 60 and 2592000 seconds"},
		{"cluster session_ttl a string", `{"cluster": {"nats_url": "nats://n:4222", "secret": "0123456789abcdef0123456789abcdef", "session_ttl": "1h"}}`, "cluster.session_ttl", "must be a positive number of seconds, got \"1h\""},
		{"cluster name with a dot", `{"cluster": {"nats_url": "nats://n:4222", "name": "a.b", "secret": "0123456789abcdef0123456789abcdef"}}`, "cluster.name", "letters, digits"},
		{"cluster url not a url", `{"cluster": {"nats_url": "nats://n:4222, 127.0.0.1", "secret": "0123456789abcdef0123456789abcdef"}}`, "cluster.nats_url", `got "127.0.0.1"`},
		{"cluster tls half a pair", `{"cluster": {"nats_url": "nats://n:4222", "secret": "0123456789abcdef0123456789abcdef", "nats_tls": {"cert_file": "c"}}}`, "cluster.nats_tls", "go together"},
		{"unset variable in a list", `{"admin": {"trusted_keys": ["${CFG_TEST_UNSET_KEY}"]}}`, "admin.trusted_keys[0]", "CFG_TEST_UNSET_KEY is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gw.json", []byte(tc.in))
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "gw.json" || ce.Key != tc.key || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("got %v, want key %q and a reason with %q", err, tc.key, tc.reason)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q echoes a secret value", err)
			}
		})
	}
}

// TestParseSectionsAccepts shows what the sections decode to: empty and
// null lists are nil, optional objects are allocated only when present,
// whole numbers may have an exponent, strings expand.
func TestParseSectionsAccepts(t *testing.T) {
	t.Setenv("CFG_TEST_ENDPOINT", "http://otel:4318")
	for _, tc := range []struct {
		name, in string
		got      func(*Config) any
		want     any
	}{
		{"empty list is nil", `{"observability": {"required_servers": []}}`, func(c *Config) any { return c.Observability.RequiredServers }, []string(nil)},
		{"null list is nil", `{"auth": {"mode": "jwt", "jwt": {"issuer": "i", "audience": ["a"], "jwks_url": "https://k"}, "resource_metadata": {"authorization_servers": null}}}`,
			func(c *Config) any { return *c.Auth.ResourceMetadata }, ResourceMetadata{}},
		{"empty map is nil", `{"telemetry": {"headers": {}}}`, func(c *Config) any { return c.Telemetry.Headers }, map[string]string(nil)},
		{"absent rate is nil", `{"limits": {"upstream_concurrency": 1e1}}`, func(c *Config) any { return c.Limits }, Limits{UpstreamConcurrency: 10}},
		{"pointers", `{"limits": {"upstream_queue": 0}, "observability": {"metrics": false}}`,
			func(c *Config) any { return []any{*c.Limits.UpstreamQueue, *c.Observability.Metrics} }, []any{0, false}},
		{"expanded string", `{"telemetry": {"otlp_endpoint": "${CFG_TEST_ENDPOINT}"}}`, func(c *Config) any { return c.Telemetry.OTLPEndpoint }, "http://otel:4318"},
		{"cluster secret as one string", `{"cluster": {"nats_url": "nats://a:4222,nats://b:4222", "secret": "0123456789abcdef0123456789abcdef"}}`,
			func(c *Config) any { return *c.Cluster }, Cluster{NatsURL: "nats://a:4222,nats://b:4222", Secrets: []string{"0123456789abcdef0123456789abcdef"}}},
		{"cluster session_ttl", `{"cluster": {"nats_url": "nats://a:4222", "secret": "0123456789abcdef0123456789abcdef", "session_ttl": 604800}}`,
			func(c *Config) any { return c.Cluster.SessionTTL }, 7 * 24 * time.Hour},
		{"no cluster section", `{}`, func(c *Config) any { return c.Cluster }, (*Cluster)(nil)},
		{"tool rules in order", `{"tool_rules": [{"tools": ["a*"], "timeout": 1.5}, {"require_approval": true}]}`,
			func(c *Config) any { return c.ToolRules }, []ToolRule{{Tools: []string{"a*"}, Timeout: 1.5}, {RequireApproval: ptr(true)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("gw.json", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.got(cfg); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}
