package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
)

// This file decodes the gateway sections of the config file that are
// objects of plain settings ("admin", and the like): strictly (unknown keys
// are errors), with ${VAR} expanded in every string.

// Admin is the "admin" section: the admin API and the module store.
type Admin struct {
	// Listen is the admin API's address; empty means the command line
	// decides (default 127.0.0.1:9090). A non-loopback address requires a
	// token.
	Listen string `json:"listen,omitempty"`
	// Tokens maps an admin identity to its bearer token; every admin
	// request must present one. EDGE_MCP_ADMIN_TOKEN adds the identity
	// "env".
	Tokens map[string]string `json:"tokens,omitempty"`
	// StateDir holds the module store, the record of active modules and
	// run-time attachments, and the compilation cache.
	StateDir string `json:"state_dir,omitempty"`
	// RequireSigned rejects uploads without a valid detached ed25519
	// signature by one of TrustedKeys.
	RequireSigned bool `json:"require_signed,omitempty"`
	// TrustedKeys are ed25519 public keys (base64, or PEM) whose
	// signatures are accepted.
	TrustedKeys []string `json:"trusted_keys,omitempty"`
	// MaxModuleBytes caps an uploaded module (after decompression);
	// default 32 MiB.
	MaxModuleBytes int64 `json:"max_module_bytes,omitempty"`
	// KeepVersions is how many earlier versions of a module are kept for
	// rollback; default 5.
	KeepVersions int `json:"keep_versions,omitempty"`
	// WatchConfig reloads the config file when it changes (default true).
	WatchConfig *bool `json:"watch_config,omitempty"`
}

// DefaultMaxModuleBytes caps uploaded modules unless the config says
// otherwise.
const DefaultMaxModuleBytes = 32 << 20

// section decodes the value at path into v: strings expanded, unknown keys
// rejected.
func (d *configDecoder) section(path string, v any) *Error {
	var raw json.RawMessage
	if err := d.dec.Decode(&raw); err != nil {
		return d.fail(path, "must be a JSON object: %v", err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return d.fail(path, "must be a JSON object")
	}
	return d.decodeExpanded(path, raw, v)
}

// decodeExpanded expands ${VAR} in the strings of raw, then decodes it
// strictly into v.
func (d *configDecoder) decodeExpanded(path string, raw json.RawMessage, v any) *Error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return d.fail(path, "%v", err)
	}
	tree, cerr := d.expandTree(path, tree)
	if cerr != nil {
		return cerr
	}
	expanded, _ := json.Marshal(tree)
	strict := json.NewDecoder(bytes.NewReader(expanded))
	strict.DisallowUnknownFields()
	if err := strict.Decode(v); err != nil {
		return d.fail(sectionErrorPath(path, err), "%s", sectionErrorReason(err))
	}
	nilEmpty(reflect.ValueOf(v))
	return nil
}

// nilEmpty sets empty slices and maps inside v to nil: in the config,
// empty and absent mean the same.
func nilEmpty(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			nilEmpty(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				nilEmpty(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			if !v.IsNil() && v.CanSet() {
				v.Set(reflect.Zero(v.Type()))
			}
			return
		}
		for i := range v.Len() {
			nilEmpty(v.Index(i))
		}
	case reflect.Map:
		if v.Len() == 0 && !v.IsNil() && v.CanSet() {
			v.Set(reflect.Zero(v.Type()))
		}
	}
}

// list decodes the JSON array at path into v (a pointer to a slice), like
// section does for objects.
func (d *configDecoder) list(path string, v any) *Error {
	var raw json.RawMessage
	if err := d.dec.Decode(&raw); err != nil {
		return d.fail(path, "must be a JSON list: %v", err)
	}
	if len(raw) == 0 || raw[0] != '[' {
		return d.fail(path, "must be a JSON list")
	}
	return d.decodeExpanded(path, raw, v)
}

// expandTree expands ${VAR} in every string of a decoded JSON value.
func (d *configDecoder) expandTree(path string, v any) (any, *Error) {
	switch t := v.(type) {
	case string:
		return d.expand(configString{s: t, path: path, set: true})
	case []any:
		for i := range t {
			var cerr *Error
			if t[i], cerr = d.expandTree(fmt.Sprintf("%s[%d]", path, i), t[i]); cerr != nil {
				return nil, cerr
			}
		}
	case map[string]any:
		for k, e := range t {
			var cerr *Error
			if t[k], cerr = d.expandTree(configJoin(path, k), e); cerr != nil {
				return nil, cerr
			}
		}
	}
	return v, nil
}

// sectionErrorPath names the key a strict decoding error is about.
func sectionErrorPath(path string, err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return configJoin(path, te.Field)
	}
	msg := err.Error()
	if k, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return configJoin(path, strings.Trim(k, `"`))
	}
	return path
}

// sectionErrorReason says why a strict decoding failed, without the json
// package's prefix.
func sectionErrorReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("must be %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)
	}
	msg := err.Error()
	if _, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "is not a known key"
	}
	return strings.TrimPrefix(msg, "json: ")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "float64", "uint64", "int32":
		return "a number"
	case "slice":
		return "a list"
	case "map", "struct", "ptr":
		return "an object"
	}
	return goKind
}

// validateAdmin checks the admin section.
func (d *configDecoder) validateAdmin(path string, a *Admin) *Error {
	if len(a.TrustedKeys) == 0 {
		a.TrustedKeys = nil // empty and absent mean the same
	}
	if len(a.Tokens) == 0 {
		a.Tokens = nil
	}
	if a.Listen != "" && a.Listen != "off" {
		if reason := configCheckListen(a.Listen); reason != "" {
			return d.fail(configJoin(path, "listen"), "%s", reason)
		}
		if !loopbackAddr(a.Listen) && len(a.Tokens) == 0 {
			return d.fail(configJoin(path, "listen"), "is not a loopback address, so the admin API needs admin.tokens (anyone who reaches it could replace policy modules)")
		}
	}
	for name, tok := range a.Tokens {
		if name == "" {
			return d.fail(configJoin(path, "tokens"), "an admin identity name must not be empty")
		}
		if len(tok) < 16 {
			return d.fail(configJoin(path, "tokens."+name), "must be at least 16 characters (got %d)", len(tok))
		}
	}
	if a.RequireSigned && len(a.TrustedKeys) == 0 {
		return d.fail(configJoin(path, "require_signed"), "is true but admin.trusted_keys is empty: no upload could ever be accepted")
	}
	if a.MaxModuleBytes < 0 {
		return d.fail(configJoin(path, "max_module_bytes"), "must be positive, got %d", a.MaxModuleBytes)
	}
	if a.KeepVersions < 0 || a.KeepVersions > 100 {
		return d.fail(configJoin(path, "keep_versions"), "must be between 1 and 100, got %d", a.KeepVersions)
	}
	return nil
}

// loopbackAddr reports whether a listen address binds only to loopback.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackAddr reports whether a listen address binds only to loopback.
func LoopbackAddr(addr string) bool { return loopbackAddr(addr) }

// Auth is the "auth" section: how downstream clients authenticate.
type Auth struct {
	// Mode is "none" (default), "api_key" or "jwt".
	Mode string `json:"mode,omitempty"`
	// AllowUnauthenticated must be true to run mode "none" on a listener
	// that is not loopback.
	AllowUnauthenticated bool `json:"allow_unauthenticated,omitempty"`
	// APIKeys map keys (or, better, their sha256) to client identities.
	APIKeys []APIKey `json:"api_keys,omitempty"`
	// JWT configures mode "jwt".
	JWT *JWT `json:"jwt,omitempty"`
	// ResourceMetadata is served at /.well-known/oauth-protected-resource
	// (RFC 9728) and named in WWW-Authenticate.
	ResourceMetadata *ResourceMetadata `json:"resource_metadata,omitempty"`
}

// APIKey is one API key of mode "api_key".
type APIKey struct {
	Name    string `json:"name"`
	Key     string `json:"key,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	Revoked bool   `json:"revoked,omitempty"`
}

// JWT configures JWT verification.
type JWT struct {
	Issuer         string   `json:"issuer"`
	Audience       []string `json:"audience"`
	Algorithms     []string `json:"algorithms,omitempty"`
	HMACSecret     string   `json:"hmac_secret,omitempty"`
	HMACSecretFile string   `json:"hmac_secret_file,omitempty"`
	PublicKeysFile string   `json:"public_keys_file,omitempty"`
	JWKSURL        string   `json:"jwks_url,omitempty"`
	JWKSRefresh    float64  `json:"jwks_refresh,omitempty"` // seconds
	Leeway         float64  `json:"leeway,omitempty"`       // seconds
	IdentityClaim  string   `json:"identity_claim,omitempty"`
}

// ResourceMetadata is the RFC 9728 protected resource metadata.
type ResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// AccessRule grants the identities it names the servers and tools it
// names. With no rules everyone may use everything; with rules, an
// identity may use what any rule naming it allows.
type AccessRule struct {
	Identities []string `json:"identities"`
	Servers    []string `json:"servers,omitempty"`    // globs; empty: all
	Tools      []string `json:"tools,omitempty"`      // globs over exposed tool names; empty: all
	DenyTools  []string `json:"deny_tools,omitempty"` // globs, win over tools
}

// Rate is a token bucket: rps tokens per second, burst at most.
type Rate struct {
	RPS   float64 `json:"rps"`
	Burst int     `json:"burst,omitempty"`
}

// Limits is the "limits" section.
type Limits struct {
	// ClientRate limits each client identity's tool calls.
	ClientRate *Rate `json:"client_rate,omitempty"`
	// ToolRate limits each identity's calls of one tool.
	ToolRate *Rate `json:"tool_rate,omitempty"`
	// UpstreamConcurrency caps calls in flight per upstream; UpstreamQueue
	// is how many more may wait for a slot (default 2× concurrency).
	UpstreamConcurrency int  `json:"upstream_concurrency,omitempty"`
	UpstreamQueue       *int `json:"upstream_queue,omitempty"`
}

// ToolRule sets per-server or per-tool behaviour. Rules apply in order;
// a later rule's fields override an earlier one's for the tools both match.
type ToolRule struct {
	Servers []string `json:"servers,omitempty"` // globs; empty: all
	Tools   []string `json:"tools,omitempty"`   // globs over exposed names; empty: all
	// Visibility is "visible" or "deferred" (left out of tools/list,
	// found with tool_search).
	Visibility string `json:"visibility,omitempty"`
	// RequireApproval asks a person (through elicitation) before a call.
	RequireApproval *bool `json:"require_approval,omitempty"`
	// Timeout is the per-call timeout in seconds.
	Timeout float64 `json:"timeout,omitempty"`
	// ValidateArguments checks arguments against the tool's inputSchema
	// (default true).
	ValidateArguments *bool `json:"validate_arguments,omitempty"`
	// Rate limits each identity's calls of a matching tool.
	Rate *Rate `json:"rate,omitempty"`
}

// Pinning is the "pinning" section: what happens when an upstream
// changes a tool definition after it was first seen.
type Pinning struct {
	// Mode is "withhold" (default: the tool is hidden until approved),
	// "flag" (served, but logged and listed as pending) or "off".
	Mode string `json:"mode,omitempty"`
}

// Audit is the "audit" section: the JSONL audit log.
type Audit struct {
	Path             string `json:"path,omitempty"` // "-": stdout
	MaxSizeMB        int    `json:"max_size_mb,omitempty"`
	MaxBackups       int    `json:"max_backups,omitempty"`
	MaxAgeDays       int    `json:"max_age_days,omitempty"`
	Compress         bool   `json:"compress,omitempty"`
	IncludeArguments bool   `json:"include_arguments,omitempty"`
}

// Telemetry is the "telemetry" section: OpenTelemetry traces.
type Telemetry struct {
	OTLPEndpoint string            `json:"otlp_endpoint,omitempty"`
	ServiceName  string            `json:"service_name,omitempty"`
	SampleRatio  *float64          `json:"sample_ratio,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	Insecure     bool              `json:"insecure,omitempty"`
}

// Observability holds small switches: metrics, compression, log
// format and readiness.
type Observability struct {
	// Metrics serves Prometheus metrics at /metrics (default true).
	Metrics *bool `json:"metrics,omitempty"`
	// Compression compresses large JSON responses (default true).
	Compression *bool `json:"compression,omitempty"`
	// LogFormat is "text" (default) or "json".
	LogFormat string `json:"log_format,omitempty"`
	// RequiredServers must be connected for /readyz to answer 200.
	RequiredServers []string `json:"required_servers,omitempty"`
}

// validateAuth checks the auth section; secrets are never echoed.
func (d *configDecoder) validateAuth(path string, a *Auth) *Error {
	switch a.Mode {
	case "", "none":
		if len(a.APIKeys) > 0 || a.JWT != nil {
			return d.fail(configJoin(path, "mode"), `is "none" but api_keys or jwt are set: set mode to "api_key" or "jwt"`)
		}
	case "api_key":
		if len(a.APIKeys) == 0 {
			return d.fail(configJoin(path, "api_keys"), `is empty: mode "api_key" needs at least one key`)
		}
		for i, k := range a.APIKeys {
			p := fmt.Sprintf("%s.api_keys[%d]", path, i)
			if k.Name == "" {
				return d.fail(p+".name", "is required: it names the client identity")
			}
			if (k.Key == "") == (k.SHA256 == "") {
				return d.fail(p, `needs exactly one of "key" and "sha256"`)
			}
		}
	case "jwt":
		if a.JWT == nil {
			return d.fail(configJoin(path, "jwt"), `is required for mode "jwt"`)
		}
		j := a.JWT
		if j.Issuer == "" {
			return d.fail(path+".jwt.issuer", "is required")
		}
		if len(j.Audience) == 0 {
			return d.fail(path+".jwt.audience", "is required (the audience tokens must be issued for)")
		}
		n := 0
		for _, s := range []string{j.HMACSecret, j.HMACSecretFile, j.PublicKeysFile, j.JWKSURL} {
			if s != "" {
				n++
			}
		}
		if n != 1 {
			return d.fail(path+".jwt", "needs exactly one key source: hmac_secret, hmac_secret_file, public_keys_file or jwks_url")
		}
	default:
		return d.fail(configJoin(path, "mode"), `must be "none", "api_key" or "jwt", got %s`, configQuote(a.Mode))
	}
	if a.ResourceMetadata != nil && a.Mode != "jwt" {
		return d.fail(configJoin(path, "resource_metadata"), `applies to mode "jwt" (OAuth access tokens) only`)
	}
	return nil
}

// validateAccess checks the access rules.
func (d *configDecoder) validateAccess(path string, rules []AccessRule) *Error {
	for i, r := range rules {
		if len(r.Identities) == 0 {
			return d.fail(fmt.Sprintf("%s[%d].identities", path, i), "is required (globs over client identity names; \"*\" for everyone)")
		}
	}
	return nil
}

func (d *configDecoder) validateRate(path string, r *Rate) *Error {
	if r == nil {
		return nil
	}
	if r.RPS <= 0 {
		return d.fail(path+".rps", "must be a positive number of calls per second, got %v", r.RPS)
	}
	if r.Burst < 0 {
		return d.fail(path+".burst", "must not be negative")
	}
	return nil
}

func (d *configDecoder) validateLimits(path string, l *Limits) *Error {
	if cerr := d.validateRate(path+".client_rate", l.ClientRate); cerr != nil {
		return cerr
	}
	if cerr := d.validateRate(path+".tool_rate", l.ToolRate); cerr != nil {
		return cerr
	}
	if l.UpstreamConcurrency < 0 {
		return d.fail(path+".upstream_concurrency", "must not be negative")
	}
	if l.UpstreamQueue != nil && *l.UpstreamQueue < 0 {
		return d.fail(path+".upstream_queue", "must not be negative")
	}
	return nil
}

func (d *configDecoder) validateToolRules(path string, rules []ToolRule) *Error {
	for i, r := range rules {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch r.Visibility {
		case "", "visible", "deferred":
		default:
			return d.fail(p+".visibility", `must be "visible" or "deferred", got %s`, configQuote(r.Visibility))
		}
		if r.Timeout < 0 || r.Timeout > 86400 {
			return d.fail(p+".timeout", "must be between 0 and 86400 seconds, got %v", r.Timeout)
		}
		if cerr := d.validateRate(p+".rate", r.Rate); cerr != nil {
			return cerr
		}
	}
	return nil
}

// UploadedModule reports whether a policy's module names an uploaded module
// (a plain name) rather than a file (a path, or a name ending in .wasm).
func UploadedModule(module string) (string, bool) {
	if module == "" || strings.ContainsAny(module, `/\`) || strings.HasSuffix(module, ".wasm") {
		return "", false
	}
	return module, true
}
