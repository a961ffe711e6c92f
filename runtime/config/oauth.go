package config

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// This file holds the OAuth keys: the "oauth" section of an upstream
// server (edge-mcp as an OAuth client of that server) and the top-level
// "oauth" section (the token store's key, the callback, how long a call
// waits for a pending authorization).

// OAuth is a server's "oauth" section. It accepts as-is the shape other
// MCP clients' mcpServers files carry ({"clientId", "clientSecret",
// "callbackPort", "scopes"}).
type OAuth struct {
	// Grant is "authorization_code" (the default: a person approves once,
	// with `edge-mcp auth login SERVER`) or "client_credentials" (no
	// person: the pre-registered client's own access).
	Grant string
	// ClientID and ClientSecret are a pre-registered client ("clientId",
	// "clientSecret"); the secret may be empty (a public client).
	ClientID, ClientSecret string
	// ClientPrivateKey is a PEM private key ("client_private_key") the
	// client authenticates with at the token endpoint instead of a
	// secret (private_key_jwt, RFC 7523): client_credentials only.
	ClientPrivateKey string
	// ClientMetadataURL is a Client ID Metadata Document URL
	// ("client_metadata_url"): an https URL with a path, used as the
	// client id when the authorization server supports it.
	ClientMetadataURL string
	// DynamicRegistration is set when neither a client id nor a metadata
	// URL is configured, or as the fallback of a metadata URL: the client
	// registers itself (RFC 7591).
	DynamicRegistration bool
	// Scopes replace the scopes discovered from the server's challenge or
	// metadata (a step-up still adds to them).
	Scopes []string
	// CallbackPort is the loopback port `edge-mcp auth login` listens on
	// for the redirect (http://localhost:PORT/callback) when the gateway is
	// not running ("callbackPort"; 0: the gateway's callback).
	CallbackPort int
	// RedirectURL is the redirect URI registered for this server
	// ("redirect_url"); default: the loopback one with callbackPort, else
	// the gateway's oauth.redirect_url.
	RedirectURL string
	// TokenEndpointAuthMethod is asked for at dynamic registration:
	// "client_secret_basic", "client_secret_post" or "none"; empty: the
	// authorization server decides. Pre-registered clients use what the
	// authorization server advertises.
	TokenEndpointAuthMethod string
	// TokenURL is the token endpoint of "grant": "token_exchange"
	// ("token_url"); Audience and Resource are sent with each exchange
	// (RFC 8693) when set.
	TokenURL, Audience, Resource string
}

// OAuthSettings is the top-level "oauth" section: where upstream tokens
// are kept and how authorizations complete.
type OAuthSettings struct {
	// Key is the token store's 32-byte key, base64 or hex; write it as
	// ${file:…} or ${VAR}, never literally. Empty with KeyFile empty: a
	// key is generated in the state folder.
	Key string `json:"key,omitempty"`
	// KeyFile is a file holding the key (base64 or hex).
	KeyFile string `json:"key_file,omitempty"`
	// PendingWait is how long a call waits for a pending authorization
	// before it fails (0: 30 s).
	PendingWait time.Duration `json:"pending_wait,omitempty"`
	// RedirectURL is the gateway's callback as the authorization servers
	// redirect to it (default http://LISTEN/oauth/callback).
	RedirectURL string `json:"redirect_url,omitempty"`
}

// DefaultOAuthPendingWait is how long a call waits for a pending
// authorization unless oauth.pending_wait says otherwise.
const DefaultOAuthPendingWait = 30 * time.Second

// configRawOAuth is a server's oauth section as decoded; strings are
// expanded when the server is finished (an inactive server's secrets need
// not resolve).
type configRawOAuth struct {
	grant, authMethod                         string
	clientID, clientSecret, cimd, redirectURL configString
	privateKey                                configString
	tokenURL, audience, resource              configString
	scopes                                    []configString
	callbackPort                              int
	seen                                      map[string]bool
}

func (o *configRawOAuth) mark(key string) {
	if o.seen == nil {
		o.seen = make(map[string]bool)
	}
	o.seen[key] = true
}

func oa[F any](f func(*configRawOAuth) *F) func(any) any { return at(f) }

var serverOAuthKeys = []key{
	{name: "mcpServers.*.oauth", field: srv(func(s *configRawServer) **configRawOAuth { return &s.oauth }),
		doc: "edge-mcp as an OAuth client of this server (remote types; see [Fronting servers that need OAuth](oauth.md)); `{}`: discovery and dynamic registration"},
	{name: "mcpServers.*.oauth.grant", def: "`authorization_code`", field: oa(func(o *configRawOAuth) *string { return &o.grant }), check: oneOf("authorization_code", "client_credentials", "token_exchange"),
		doc: "`authorization_code` (an operator approves once: `edge-mcp auth login SERVER`), `client_credentials` (the client's own access, no person) or `token_exchange` (RFC 8693: each downstream JWT exchanged for an upstream token; needs `identity: per_client` and `auth.mode: jwt`)"},
	{name: "mcpServers.*.oauth.token_url", field: oa(func(o *configRawOAuth) *configString { return &o.tokenURL }),
		doc: "with `token_exchange` (required): the token endpoint the exchanges are posted to (`clientId`/`clientSecret` sent as HTTP Basic)"},
	{name: "mcpServers.*.oauth.audience", field: oa(func(o *configRawOAuth) *configString { return &o.audience }),
		doc: "with `token_exchange`: the `audience` asked for"},
	{name: "mcpServers.*.oauth.resource", field: oa(func(o *configRawOAuth) *configString { return &o.resource }),
		doc: "with `token_exchange`: the `resource` asked for (an absolute URI)"},
	{name: "mcpServers.*.oauth.clientId", field: oa(func(o *configRawOAuth) *configString { return &o.clientID }),
		doc: "a pre-registered client id"},
	{name: "mcpServers.*.oauth.clientSecret", field: oa(func(o *configRawOAuth) *configString { return &o.clientSecret }),
		doc: "its secret (write `${VAR}` or `${file:…}`); none: a public client"},
	{name: "mcpServers.*.oauth.client_private_key", field: oa(func(o *configRawOAuth) *configString { return &o.privateKey }),
		doc: "with `client_credentials`: a PEM private key (write `${file:…}`; EC P-256/P-384, RSA or Ed25519) the client proves itself with (`private_key_jwt`) instead of `clientSecret`"},
	{name: "mcpServers.*.oauth.client_metadata_url", field: oa(func(o *configRawOAuth) *configString { return &o.cimd }),
		doc: "a Client ID Metadata Document (https URL with a path) used as the client id where the authorization server supports it, else dynamic registration"},
	{name: "mcpServers.*.oauth.scopes", def: "discovered", field: oa(func(o *configRawOAuth) *[]configString { return &o.scopes }),
		doc: "scopes to ask for instead of those of the server's challenge or metadata (a step-up adds to them)"},
	{name: "mcpServers.*.oauth.callbackPort", def: "the gateway's callback", field: oa(func(o *configRawOAuth) *int { return &o.callbackPort }), check: between(1, 65535),
		doc: "loopback port `edge-mcp auth login` receives the redirect on (`http://localhost:PORT/callback`)"},
	{name: "mcpServers.*.oauth.redirect_url", def: "see `callbackPort`", field: oa(func(o *configRawOAuth) *configString { return &o.redirectURL }),
		doc: "the redirect URI registered for this server; default the loopback one of `callbackPort`, else `oauth.redirect_url`"},
	{name: "mcpServers.*.oauth.token_endpoint_auth_method", def: "the server's choice", field: oa(func(o *configRawOAuth) *string { return &o.authMethod }), check: oneOf("client_secret_basic", "client_secret_post", "none"),
		doc: "asked for at dynamic registration: `client_secret_basic`, `client_secret_post` or `none`"},
	{name: "mcpServers.*.identity", def: "`shared`", field: srv(func(s *configRawServer) *string { return &s.identity }), check: oneOf("shared", "per_client"),
		doc: "with `oauth`: `shared`, one upstream token for the gateway; `per_client`, one per downstream identity (API key name, JWT subject), each authorized by its own person"},
}

var oauthKeys = []key{
	{name: "oauth.key", field: at(func(o *OAuthSettings) *string { return &o.Key }), check: checkString(configCheckOAuthKey),
		doc: "the upstream token store's 32-byte key, base64 or hex: write `${file:…}` or `${VAR}`; neither this nor `key_file`: a key generated in the state folder"},
	{name: "oauth.key_file", field: at(func(o *OAuthSettings) *string { return &o.KeyFile }),
		doc: "a file holding that key"},
	{name: "oauth.pending_wait", def: "30", field: at(func(o *OAuthSettings) *time.Duration { return &o.PendingWait }),
		doc: "how long a call waits for a pending authorization before failing with an error that names the server"},
	{name: "oauth.redirect_url", def: "`http://LISTEN/oauth/callback`", field: at(func(o *OAuthSettings) *string { return &o.RedirectURL }), check: checkString(configCheckRedirect),
		doc: "the gateway's `/oauth/callback` as authorization servers redirect to it (set it behind a proxy)"},
}

func init() {
	configKeyHints["mcpServers.*.oauth.client_id"] = `unknown key; write "clientId"`
	configKeyHints["mcpServers.*.oauth.client_secret"] = `unknown key; write "clientSecret"`
	configKeyHints["mcpServers.*.oauth.callback_port"] = `unknown key; write "callbackPort"`
}

// OAuthKey decodes a token store key written as base64 (standard or URL,
// padded or not) or hex: 32 bytes.
func OAuthKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, dec := range []func(string) ([]byte, error){hex.DecodeString, base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString, base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString} {
		if b, err := dec(s); err == nil && len(b) == 32 {
			return b, nil
		}
	}
	return nil, fmt.Errorf("must be 32 bytes written as base64 or hex (for example the output of `openssl rand -base64 32`)")
}

func configCheckOAuthKey(s string) string {
	if s == "" {
		return "" // as if absent: ${OAUTH_KEY:-} may leave it empty
	}
	if _, err := OAuthKey(s); err != nil {
		return err.Error()
	}
	return ""
}

func configCheckRedirect(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("must be an absolute http or https URL, got %s", configQuote(s))
	}
	if u.Fragment != "" {
		return "must not have a fragment"
	}
	return ""
}

// finishOAuth expands and validates a remote server's oauth section and
// its identity.
func (d *decoder) finishOAuth(rs *configRawServer, sc *Server) *Error {
	sc.Identity = rs.identity
	if rs.oauth == nil {
		if sc.Identity == "per_client" {
			return d.fail(configJoin(rs.path, "identity"), `"per_client" needs an "oauth" section: upstream identities are OAuth tokens`)
		}
		return nil
	}
	ro, opath := rs.oauth, configJoin(rs.path, "oauth")
	o := &OAuth{Grant: ro.grant, CallbackPort: ro.callbackPort, TokenEndpointAuthMethod: ro.authMethod}
	if o.Grant == "" {
		o.Grant = "authorization_code"
	}
	for _, f := range []struct {
		cs  configString
		dst *string
	}{{ro.clientID, &o.ClientID}, {ro.clientSecret, &o.ClientSecret}, {ro.cimd, &o.ClientMetadataURL}, {ro.redirectURL, &o.RedirectURL}, {ro.privateKey, &o.ClientPrivateKey},
		{ro.tokenURL, &o.TokenURL}, {ro.audience, &o.Audience}, {ro.resource, &o.Resource}} {
		if !f.cs.set {
			continue
		}
		v, cerr := d.expand(f.cs)
		if cerr != nil {
			return cerr
		}
		*f.dst = v
	}
	for _, s := range ro.scopes {
		v, cerr := d.expand(s)
		if cerr != nil {
			return cerr
		}
		if v == "" || strings.ContainsAny(v, " \t\r\n\"\\") {
			return d.fail(s.path, "must be one scope token (no spaces or quotes), got %s", configQuote(v))
		}
		o.Scopes = append(o.Scopes, v)
	}
	if cerr := d.checkOAuth(ro, o, opath); cerr != nil {
		return cerr
	}
	if cerr := d.checkExchange(o, opath, sc.Identity); cerr != nil {
		return cerr
	}
	sc.OAuth = o
	return nil
}

// checkOAuth checks the combinations of an expanded oauth section.
func (d *decoder) checkOAuth(ro *configRawOAuth, o *OAuth, opath string) *Error {
	switch {
	case ro.clientID.set && o.ClientID == "":
		return d.fail(configJoin(opath, "clientId"), "must not be empty (omit it to register dynamically)")
	case ro.clientSecret.set && o.ClientID == "":
		return d.fail(configJoin(opath, "clientSecret"), `needs "clientId"`)
	case o.Grant == "client_credentials" && (o.ClientID == "" || (o.ClientSecret == "" && o.ClientPrivateKey == "")):
		return d.fail(configJoin(opath, "grant"), `"client_credentials" needs a pre-registered "clientId" and "clientSecret" (or "client_private_key")`)
	case o.ClientPrivateKey != "" && o.Grant != "client_credentials":
		return d.fail(configJoin(opath, "client_private_key"), `needs "grant": "client_credentials"`)
	case o.ClientPrivateKey != "" && o.ClientSecret != "":
		return d.fail(configJoin(opath, "client_private_key"), `set "clientSecret" or "client_private_key", not both`)
	case o.ClientPrivateKey != "" && !strings.Contains(o.ClientPrivateKey, "PRIVATE KEY-----"):
		return d.fail(configJoin(opath, "client_private_key"), "must be a PEM private key (-----BEGIN PRIVATE KEY-----)")
	case o.ClientMetadataURL != "":
		if u, err := url.Parse(o.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" {
			return d.fail(configJoin(opath, "client_metadata_url"), "must be an https URL with a path (the client id of a Client ID Metadata Document), got %s", configQuote(o.ClientMetadataURL))
		}
	}
	if o.RedirectURL != "" {
		if reason := configCheckRedirect(o.RedirectURL); reason != "" {
			return d.fail(configJoin(opath, "redirect_url"), "%s", reason)
		}
	}
	if o.ClientID == "" {
		o.DynamicRegistration = true
	}
	return nil
}

// checkExchange checks the keys of "grant": "token_exchange" (auth.mode
// is checked by parse, which sees the whole file).
func (d *decoder) checkExchange(o *OAuth, opath, identity string) *Error {
	if o.Grant != "token_exchange" {
		for _, f := range [][2]string{{"token_url", o.TokenURL}, {"audience", o.Audience}, {"resource", o.Resource}} {
			if f[1] != "" {
				return d.fail(configJoin(opath, f[0]), `needs "grant": "token_exchange"`)
			}
		}
		return nil
	}
	switch {
	case identity != "per_client":
		return d.fail(configJoin(opath, "grant"), `"token_exchange" needs "identity": "per_client" (each downstream identity's own token is exchanged)`)
	case o.TokenURL == "":
		return d.fail(configJoin(opath, "token_url"), `is required with "grant": "token_exchange"`)
	case o.ClientID == "" || o.ClientSecret == "":
		return d.fail(configJoin(opath, "grant"), `"token_exchange" needs a pre-registered "clientId" and "clientSecret"`)
	}
	if reason := configCheckRedirect(o.TokenURL); reason != "" {
		return d.fail(configJoin(opath, "token_url"), "%s", reason)
	}
	if u, err := url.Parse(o.Resource); o.Resource != "" && (err != nil || !u.IsAbs() || u.Fragment != "") {
		return d.fail(configJoin(opath, "resource"), "must be an absolute URI without a fragment, got %s", configQuote(o.Resource))
	}
	return nil
}

func checkOAuthSettings(v any) (at, reason string) {
	o := v.(*OAuthSettings)
	if o.Key != "" && o.KeyFile != "" {
		return "key_file", `set "key" or "key_file", not both`
	}
	return "", ""
}
