package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseOAuthAccepts(t *testing.T) {
	t.Setenv("CFG_TEST_OAUTH_SECRET", "s3cr3t")
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		in       string
		server   *OAuth
		identity string
		settings OAuthSettings
	}{
		{"mcpServers form of other clients", `{"mcpServers": {"a": {"url": "https://h/mcp", "oauth": {"clientId": "cid", "clientSecret": "${CFG_TEST_OAUTH_SECRET}", "callbackPort": 3118, "scopes": ["read", "write"]}}}}`,
			&OAuth{Grant: "authorization_code", ClientID: "cid", ClientSecret: "s3cr3t", CallbackPort: 3118, Scopes: []string{"read", "write"}}, "", OAuthSettings{}},
		{"empty section: dynamic registration", `{"mcpServers": {"a": {"url": "https://h/mcp", "oauth": {}}}}`,
			&OAuth{Grant: "authorization_code", DynamicRegistration: true}, "", OAuthSettings{}},
		{"metadata document with registration fallback", `{"mcpServers": {"a": {"url": "https://h/mcp", "oauth": {"client_metadata_url": "https://gw.example.com/client.json", "redirect_url": "https://gw.example.com/oauth/callback", "token_endpoint_auth_method": "none"}}}}`,
			&OAuth{Grant: "authorization_code", ClientMetadataURL: "https://gw.example.com/client.json", RedirectURL: "https://gw.example.com/oauth/callback", TokenEndpointAuthMethod: "none", DynamicRegistration: true}, "", OAuthSettings{}},
		{"client credentials, per client identity", `{"mcpServers": {"a": {"type": "sse", "url": "https://h/sse", "identity": "per_client", "oauth": {"grant": "client_credentials", "clientId": "c", "clientSecret": "s"}}}}`,
			&OAuth{Grant: "client_credentials", ClientID: "c", ClientSecret: "s"}, "per_client", OAuthSettings{}},
		{"client credentials with a private key", `{"mcpServers": {"a": {"url": "https://h/mcp", "oauth": {"grant": "client_credentials", "clientId": "c", "client_private_key": "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"}}}}`,
			&OAuth{Grant: "client_credentials", ClientID: "c", ClientPrivateKey: "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"}, "", OAuthSettings{}},
		{"token exchange", `{"auth": {"mode": "jwt", "jwt": {"issuer": "https://idp", "audience": ["gw"], "hmac_secret": "0123456789abcdef0123456789abcdef"}}, "mcpServers": {"a": {"url": "https://h/mcp", "identity": "per_client", "oauth": {"grant": "token_exchange", "token_url": "https://idp/token", "audience": "api", "resource": "https://h/mcp", "scopes": ["tools"], "clientId": "c", "clientSecret": "s"}}}}`,
			&OAuth{Grant: "token_exchange", ClientID: "c", ClientSecret: "s", TokenURL: "https://idp/token", Audience: "api", Resource: "https://h/mcp", Scopes: []string{"tools"}}, "per_client", OAuthSettings{}},
		{"top-level section", `{"mcpServers": {}, "oauth": {"key": "${file:` + keyFile + `}", "pending_wait": 2.5, "redirect_url": "https://gw.example.com/oauth/callback"}}`,
			nil, "", OAuthSettings{Key: strings.Repeat("ab", 32), PendingWait: 2500 * time.Millisecond, RedirectURL: "https://gw.example.com/oauth/callback"}},
		{"inactive server's secret need not resolve", `{"mcpServers": {"a": {"url": "https://h/mcp", "active": false, "oauth": {"clientId": "c", "clientSecret": "${CFG_TEST_UNSET_SECRET}"}}}}`,
			nil, "", OAuthSettings{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("gw.json", []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var got *OAuth
			var identity string
			if len(cfg.Servers) > 0 {
				got, identity = cfg.Servers[0].OAuth, cfg.Servers[0].Identity
			}
			if !reflect.DeepEqual(got, tt.server) || identity != tt.identity {
				t.Errorf("server oauth = %+v identity %q, want %+v identity %q", got, identity, tt.server, tt.identity)
			}
			if !reflect.DeepEqual(cfg.OAuth, tt.settings) {
				t.Errorf("oauth = %+v, want %+v", cfg.OAuth, tt.settings)
			}
		})
	}
}

func TestParseOAuthRejects(t *testing.T) {
	tests := []struct{ name, in, key, reason string }{
		{"snake case client id", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"client_id": "c"}}}}`, "mcpServers.a.oauth.client_id", `write "clientId"`},
		{"unknown grant", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"grant": "password"}}}}`, "mcpServers.a.oauth.grant", `"client_credentials" or "token_exchange"`},
		{"client credentials without secret", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"grant": "client_credentials", "clientId": "c"}}}}`, "mcpServers.a.oauth.grant", `needs a pre-registered "clientId" and "clientSecret"`},
		{"private key without client credentials", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"clientId": "c", "client_private_key": "-----BEGIN PRIVATE KEY-----"}}}}`, "mcpServers.a.oauth.client_private_key", `needs "grant": "client_credentials"`},
		{"private key and secret", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"grant": "client_credentials", "clientId": "c", "clientSecret": "s", "client_private_key": "-----BEGIN PRIVATE KEY-----"}}}}`, "mcpServers.a.oauth.client_private_key", `not both`},
		{"private key not PEM", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"grant": "client_credentials", "clientId": "c", "client_private_key": "abc"}}}}`, "mcpServers.a.oauth.client_private_key", `must be a PEM private key`},
		{"token exchange shared", `{"auth": {"mode": "jwt", "jwt": {"issuer": "https://idp", "audience": ["gw"], "hmac_secret": "0123456789abcdef0123456789abcdef"}}, "mcpServers": {"a": {"url": "https://h", "oauth": {"grant": "token_exchange", "token_url": "https://idp/token", "clientId": "c", "clientSecret": "s3cr3t"}}}}`, "mcpServers.a.oauth.grant", `needs "identity": "per_client"`},
		{"token exchange without jwt auth", `{"mcpServers": {"a": {"url": "https://h", "identity": "per_client", "oauth": {"grant": "token_exchange", "token_url": "https://idp/token", "clientId": "c", "clientSecret": "s3cr3t"}}}}`, "mcpServers.a.oauth.grant", `needs "auth": {"mode": "jwt"}`},
		{"token exchange without token url", `{"auth": {"mode": "jwt", "jwt": {"issuer": "https://idp", "audience": ["gw"], "hmac_secret": "0123456789abcdef0123456789abcdef"}}, "mcpServers": {"a": {"url": "https://h", "identity": "per_client", "oauth": {"grant": "token_exchange", "clientId": "c", "clientSecret": "s3cr3t"}}}}`, "mcpServers.a.oauth.token_url", "is required"},
		{"token exchange without secret", `{"auth": {"mode": "jwt", "jwt": {"issuer": "https://idp", "audience": ["gw"], "hmac_secret": "0123456789abcdef0123456789abcdef"}}, "mcpServers": {"a": {"url": "https://h", "identity": "per_client", "oauth": {"grant": "token_exchange", "token_url": "https://idp/token", "clientId": "c"}}}}`, "mcpServers.a.oauth.grant", `needs a pre-registered "clientId" and "clientSecret"`},
		{"token exchange token url not absolute", `{"auth": {"mode": "jwt", "jwt": {"issuer": "https://idp", "audience": ["gw"], "hmac_secret": "0123456789abcdef0123456789abcdef"}}, "mcpServers": {"a": {"url": "https://h", "identity": "per_client", "oauth": {"grant": "token_exchange", "token_url": "/token", "clientId": "c", "clientSecret": "s3cr3t"}}}}`, "mcpServers.a.oauth.token_url", "absolute http or https URL"},
		{"token exchange resource not absolute", `{"auth": {"mode": "jwt", "jwt": {"issuer": "https://idp", "audience": ["gw"], "hmac_secret": "0123456789abcdef0123456789abcdef"}}, "mcpServers": {"a": {"url": "https://h", "identity": "per_client", "oauth": {"grant": "token_exchange", "token_url": "https://idp/token", "clientId": "c", "clientSecret": "s3cr3t", "resource": "api"}}}}`, "mcpServers.a.oauth.resource", "absolute URI"},
		{"audience without token exchange", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"audience": "api"}}}}`, "mcpServers.a.oauth.audience", `needs "grant": "token_exchange"`},
		{"secret without id", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"clientSecret": "s3cr3t"}}}}`, "mcpServers.a.oauth.clientSecret", `needs "clientId"`},
		{"metadata URL over http", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"client_metadata_url": "http://gw/c.json"}}}}`, "mcpServers.a.oauth.client_metadata_url", "https URL with a path"},
		{"metadata URL at the root", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"client_metadata_url": "https://gw/"}}}}`, "mcpServers.a.oauth.client_metadata_url", "https URL with a path"},
		{"callback port out of range", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"callbackPort": 70000}}}}`, "mcpServers.a.oauth.callbackPort", "from 1 to 65535"},
		{"redirect not absolute", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"redirect_url": "/cb"}}}}`, "mcpServers.a.oauth.redirect_url", "absolute http or https URL"},
		{"scope with a space", `{"mcpServers": {"a": {"url": "https://h", "oauth": {"scopes": ["a b"]}}}}`, "mcpServers.a.oauth.scopes[0]", "one scope token"},
		{"oauth on stdio", `{"mcpServers": {"a": {"command": "x", "oauth": {}}}}`, "mcpServers.a.oauth", "applies only to remote servers"},
		{"oauth and bearer token", `{"mcpServers": {"a": {"url": "https://h", "bearer_token": "s3cr3t", "oauth": {}}}}`, "mcpServers.a.bearer_token", `conflicts with "oauth"`},
		{"oauth and Authorization header", `{"mcpServers": {"a": {"url": "https://h", "headers": {"Authorization": "Bearer s3cr3t"}, "oauth": {}}}}`, "mcpServers.a.headers.Authorization", `conflicts with "oauth"`},
		{"per client without oauth", `{"mcpServers": {"a": {"url": "https://h", "identity": "per_client"}}}`, "mcpServers.a.identity", `needs an "oauth" section`},
		{"unknown identity", `{"mcpServers": {"a": {"url": "https://h", "identity": "mine"}}}`, "mcpServers.a.identity", `"shared" or "per_client"`},
		{"short key", `{"mcpServers": {}, "oauth": {"key": "c2hvcnQ="}}`, "oauth.key", "must be 32 bytes"},
		{"key and key file", `{"mcpServers": {}, "oauth": {"key": "` + strings.Repeat("00", 32) + `", "key_file": "/k"}}`, "oauth.key_file", `not both`},
		{"redirect of the gateway", `{"mcpServers": {}, "oauth": {"redirect_url": "gw/cb"}}`, "oauth.redirect_url", "absolute http or https URL"},
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
			if ce.Key != tt.key || !strings.Contains(ce.Reason, tt.reason) {
				t.Errorf("got Key=%q Reason=%q\nwant Key=%q Reason containing %q", ce.Key, ce.Reason, tt.key, tt.reason)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q echoes a secret", err)
			}
		})
	}
}

func TestOAuthKey(t *testing.T) {
	raw := []byte(strings.Repeat("k", 32))
	for _, s := range []string{strings.Repeat("6b", 32), "a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s=", "a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s"} {
		got, err := OAuthKey(s)
		if err != nil || string(got) != string(raw) {
			t.Errorf("OAuthKey(%q) = %q, %v", s, got, err)
		}
	}
}
