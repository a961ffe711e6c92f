package config

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzParseSection fuzzes the value of one gateway section, the part of
// the file the table decodes through nested objects, lists of objects and
// pointers: Parse never panics, every error is a complete *Error, and an
// accepted config written back in canonical form parses the same.
func FuzzParseSection(f *testing.F) {
	seeds := []struct {
		section uint8
		value   string
	}{
		{0, `{"listen": "127.0.0.1:9090", "tokens": {"ops": "0123456789abcdef"}, "keep_versions": 3, "watch_config": false}`},
		{1, `{"mode": "api_key", "api_keys": [{"name": "a", "key": "k"}, {"name": "b", "sha256": "x", "revoked": true}]}`},
		{1, `{"mode": "jwt", "jwt": {"issuer": "i", "audience": ["a"], "jwks_url": "https://k", "leeway": 5}, "resource_metadata": {"resource": "r", "authorization_servers": null}}`},
		{2, `[{"identities": ["*"], "servers": ["a"], "deny_tools": ["*x*"]}]`},
		{3, `{"client_rate": {"rps": 0.5, "burst": 2}, "tool_rate": {"rps": 1e1}, "upstream_concurrency": 4, "upstream_queue": 0}`},
		{4, `[{"tools": ["a*"], "visibility": "deferred", "timeout": 1.5, "rate": {"rps": 1}}, {"validate_arguments": false}]`},
		{5, `{"mode": "flag"}`},
		{6, `{"path": "-", "max_size_mb": 1e2, "compress": true}`},
		{7, `{"otlp_endpoint": "http://c", "sample_ratio": 0.25, "headers": {"A": "b"}}`},
		{8, `{"metrics": false, "log_format": "json", "required_servers": []}`},
		{3, `{"client_rate": {"rps": 1}, "client_rate": {"rps": 2}}`},
	}
	for _, s := range seeds {
		f.Add(s.section, []byte(s.value))
	}
	sections := []string{"admin", "auth", "access", "limits", "tool_rules", "pinning", "audit", "telemetry", "observability"}
	f.Fuzz(func(t *testing.T, section uint8, value []byte) {
		name := sections[int(section)%len(sections)]
		data := append([]byte(`{"`+name+`": `), value...)
		data = append(data, '}')
		cfg, err := Parse("fuzz.json", data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "fuzz.json" || ce.Reason == "" {
				t.Fatalf("error %T %v is not a complete *Error", err, err)
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
