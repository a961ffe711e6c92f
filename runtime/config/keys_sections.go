package config

import "time"

// sectionKeys are the keys inside the gateway sections: admin, auth,
// access, limits, tool_rules, pinning, audit, telemetry, observability.
// Every string in them expands ${VAR}. Defaults in def are the gateway's:
// the Config holds zero values for absent keys.
var sectionKeys = concat(adminKeys, authKeys, accessKeys, limitKeys, toolRuleKeys, observeKeys, clusterKeys, oauthKeys)

func concat(tables ...[]key) []key {
	var all []key
	for _, t := range tables {
		all = append(all, t...)
	}
	return all
}

var adminKeys = []key{
	{name: "admin.listen", def: "`127.0.0.1:9090`", field: at(func(a *Admin) *string { return &a.Listen }),
		doc: "the admin API's address (`--admin` overrides; `off`: none); not loopback: `tokens` required"},
	{name: "admin.tokens", field: at(func(a *Admin) *map[string]string { return &a.Tokens }),
		doc: "admin identity → bearer token (16 characters at least)"},
	{name: "admin.state_dir", field: at(func(a *Admin) *string { return &a.StateDir }),
		doc: "module store, active modules and attachments, compilation cache, tool pins"},
	{name: "admin.require_signed", def: "false", field: at(func(a *Admin) *bool { return &a.RequireSigned }),
		doc: "refuse uploads without a detached ed25519 signature by a trusted key"},
	{name: "admin.trusted_keys", field: at(func(a *Admin) *[]string { return &a.TrustedKeys }),
		doc: "ed25519 public keys (base64 or PEM) whose signatures are accepted"},
	{name: "admin.max_module_bytes", def: "33554432", field: at(func(a *Admin) *int64 { return &a.MaxModuleBytes }),
		doc: "largest uploaded module, after decompression"},
	{name: "admin.keep_versions", def: "5", field: at(func(a *Admin) *int { return &a.KeepVersions }), check: between(0, 100),
		doc: "earlier versions of a module kept for rollback"},
	{name: "admin.watch_config", def: "true", field: at(func(a *Admin) **bool { return &a.WatchConfig }),
		doc: "reload the config file when it changes"},
}

var authKeys = []key{
	{name: "auth.mode", def: "`none`", field: at(func(a *Auth) *string { return &a.Mode }),
		doc: "`none`, `api_key` or `jwt`"},
	{name: "auth.allow_unauthenticated", def: "false", field: at(func(a *Auth) *bool { return &a.AllowUnauthenticated }),
		doc: "allow mode `none` on a listener that is not loopback"},
	{name: "auth.api_keys", field: at(func(a *Auth) *[]APIKey { return &a.APIKeys }),
		doc: "the keys of mode `api_key`"},
	{name: "auth.api_keys[].name", field: at(func(k *APIKey) *string { return &k.Name }),
		doc: "the client identity the key stands for (required)"},
	{name: "auth.api_keys[].key", field: at(func(k *APIKey) *string { return &k.Key }),
		doc: "the key itself; or:"},
	{name: "auth.api_keys[].sha256", field: at(func(k *APIKey) *string { return &k.SHA256 }),
		doc: "the key's SHA-256, hex (`sha256:` prefix allowed)"},
	{name: "auth.api_keys[].revoked", def: "false", field: at(func(k *APIKey) *bool { return &k.Revoked }),
		doc: "refuse the key"},
	{name: "auth.jwt", field: at(func(a *Auth) **JWT { return &a.JWT }),
		doc: "the settings of mode `jwt`"},
	{name: "auth.jwt.issuer", field: at(func(j *JWT) *string { return &j.Issuer }),
		doc: "the `iss` tokens must carry (required)"},
	{name: "auth.jwt.audience", field: at(func(j *JWT) *[]string { return &j.Audience }),
		doc: "`aud` values accepted, one at least (required)"},
	{name: "auth.jwt.algorithms", def: "by the key source", field: at(func(j *JWT) *[]string { return &j.Algorithms }),
		doc: "accepted algorithms: `HS256`, `RS256`, `ES256`"},
	{name: "auth.jwt.hmac_secret", field: at(func(j *JWT) *string { return &j.HMACSecret }),
		doc: "HS256 secret; exactly one of the four key sources is set"},
	{name: "auth.jwt.hmac_secret_file", field: at(func(j *JWT) *string { return &j.HMACSecretFile }),
		doc: "file holding the HS256 secret"},
	{name: "auth.jwt.public_keys_file", field: at(func(j *JWT) *string { return &j.PublicKeysFile }),
		doc: "PEM file of RSA or ECDSA public keys"},
	{name: "auth.jwt.jwks_url", field: at(func(j *JWT) *string { return &j.JWKSURL }),
		doc: "JWKS document, fetched and cached"},
	{name: "auth.jwt.jwks_refresh", typ: "number (s)", def: "300", field: at(func(j *JWT) *float64 { return &j.JWKSRefresh }), check: inRange(0, 1e9, " seconds"),
		doc: "how often the JWKS is fetched again"},
	{name: "auth.jwt.leeway", typ: "number (s)", def: "30", field: at(func(j *JWT) *float64 { return &j.Leeway }), check: inRange(0, 300, " seconds"),
		doc: "clock skew allowed on `exp` and `nbf`"},
	{name: "auth.jwt.identity_claim", def: "`sub`", field: at(func(j *JWT) *string { return &j.IdentityClaim }),
		doc: "the claim that names the client identity"},
	{name: "auth.resource_metadata", field: at(func(a *Auth) **ResourceMetadata { return &a.ResourceMetadata }),
		doc: "RFC 9728 metadata served at `/.well-known/oauth-protected-resource` (mode `jwt`)"},
	{name: "auth.resource_metadata.resource", field: at(func(r *ResourceMetadata) *string { return &r.Resource }),
		doc: "the gateway's resource identifier"},
	{name: "auth.resource_metadata.authorization_servers", field: at(func(r *ResourceMetadata) *[]string { return &r.AuthorizationServers }),
		doc: "issuers of the access tokens"},
	{name: "auth.resource_metadata.scopes_supported", field: at(func(r *ResourceMetadata) *[]string { return &r.ScopesSupported }),
		doc: "scopes clients may ask for"},
	{name: "auth.resource_metadata.bearer_methods_supported", field: at(func(r *ResourceMetadata) *[]string { return &r.BearerMethodsSupported }),
		doc: "how tokens may be sent"},
	{name: "auth.resource_metadata.resource_name", field: at(func(r *ResourceMetadata) *string { return &r.ResourceName }),
		doc: "a name for people"},
}

var accessKeys = []key{
	{name: "access[].identities", field: at(func(r *AccessRule) *[]string { return &r.Identities }),
		doc: "globs over client identities the rule applies to (required)"},
	{name: "access[].servers", def: "all", field: at(func(r *AccessRule) *[]string { return &r.Servers }),
		doc: "globs over server names granted"},
	{name: "access[].tools", def: "all", field: at(func(r *AccessRule) *[]string { return &r.Tools }),
		doc: "globs over exposed tool names granted"},
	{name: "access[].deny_tools", field: at(func(r *AccessRule) *[]string { return &r.DenyTools }),
		doc: "globs over exposed tool names refused, over `tools`"},
}

// rateKeys are the keys of a token bucket at path.
func rateKeys(path string) []key {
	return []key{
		{name: path + ".rps", field: at(func(r *Rate) *float64 { return &r.RPS }),
			doc: "calls per second (required, positive)"},
		{name: path + ".burst", def: "1", field: at(func(r *Rate) *int { return &r.Burst }), check: notNegative,
			doc: "calls allowed at once"},
	}
}

var limitKeys = concat([]key{
	{name: "limits.client_rate", field: at(func(l *Limits) **Rate { return &l.ClientRate }), check: checkRate,
		doc: "token bucket per client identity, over its tool calls (shared by the fleet with `cluster`)"},
}, rateKeys("limits.client_rate"), []key{
	{name: "limits.tool_rate", field: at(func(l *Limits) **Rate { return &l.ToolRate }), check: checkRate,
		doc: "token bucket per identity and tool (shared by the fleet with `cluster`)"},
}, rateKeys("limits.tool_rate"), []key{
	{name: "limits.upstream_concurrency", def: "unlimited", field: at(func(l *Limits) *int { return &l.UpstreamConcurrency }), check: notNegative,
		doc: "calls in flight per upstream, per replica"},
	{name: "limits.upstream_queue", def: "2 × `upstream_concurrency`", field: at(func(l *Limits) **int { return &l.UpstreamQueue }), check: notNegative,
		doc: "calls that may wait for a slot (FIFO); more are refused at once"},
	{name: "limits.read_header_timeout", def: "10", field: at(func(l *Limits) *time.Duration { return &l.ReadHeaderTimeout }),
		doc: "time a client has to send a request's headers; then the connection is closed"},
	{name: "limits.max_header_bytes", def: "65536", field: at(func(l *Limits) *int { return &l.MaxHeaderBytes }), check: notNegative,
		doc: "bytes of a request's line and headers; over it HTTP 431"},
	{name: "limits.body_read_timeout", def: "30", field: at(func(l *Limits) *time.Duration { return &l.BodyReadTimeout }),
		doc: "time a client has to send a request body, from the request's start (a request refused before its body is read too); then the connection is closed (streams are not cut)"},
	{name: "limits.idle_timeout", def: "120", field: at(func(l *Limits) *time.Duration { return &l.IdleTimeout }),
		doc: "how long an idle keep-alive connection is kept"},
	{name: "limits.resume_events", def: "256", field: at(func(l *Limits) *int { return &l.ResumeEvents }),
		doc: "events (messages, at most 4 MiB) each streamable HTTP session keeps so that a client can resume a dropped stream with `Last-Event-ID`; negative turns event ids and resumption off; read at start"},
	{name: "limits.max_connections", def: "4096", field: at(func(l *Limits) *int { return &l.MaxConnections }), check: notNegative,
		doc: "downstream connections open at once; more are closed at once (clients retry)"},
	{name: "limits.max_connections_per_ip", def: "¼ of `max_connections`", field: at(func(l *Limits) *int { return &l.MaxConnectionsPerIP }), check: notNegative,
		doc: "of those, from one client address; behind a proxy or load balancer raise it to `max_connections`"},
	{name: "limits.upstream_bytes_in_flight", def: "¼ of the memory limit, else 256 MiB", field: at(func(l *Limits) *int64 { return &l.UpstreamBytesInFlight }), check: notNegative,
		doc: "bytes of upstream answers being read at once, gateway-wide; a call over it gets an error"},
	{name: "limits.shutdown_grace", def: "10", field: at(func(l *Limits) *time.Duration { return &l.ShutdownGrace }),
		doc: "on SIGTERM: new sessions get 503 while the calls in flight finish, for at most this long"},
	{name: "limits.input_timeout", def: "60", field: at(func(l *Limits) *time.Duration { return &l.InputTimeout }),
		doc: "time a 2026-07-28 client has to retry a call answered with `input_required` (a 2025 upstream asked it for sampling, elicitation or roots), then the upstream's call is cancelled; and a 2025 client has to answer the requests a 2026-07-28 upstream's `input_required` became, then its call gets an error"},
	{name: "limits.input_rounds", def: "8", field: at(func(l *Limits) *int { return &l.InputRounds }), check: between(0, 1000),
		doc: "`input_required` rounds a 2026-07-28 upstream may ask a 2025 client for (sampling, elicitation, roots) in one call; one more and the client gets an error"},
	{name: "limits.client_memory", def: "¼ of the memory limit (at least 16 MiB), else 1 GiB", field: at(func(l *Limits) *int64 { return &l.ClientMemory }), check: notNegative,
		doc: "bytes clients can make the gateway hold for them (events kept for resumption, requests parked for an `input_required` retry, task records, `per_client` upstream sessions, open streams), gateway-wide; over it the oldest resumable events and tasks go first and new parked requests, `per_client` sessions and streams are refused; read at start"},
	{name: "limits.client_memory_per_identity", def: "¼ of `client_memory`", field: at(func(l *Limits) *int64 { return &l.ClientMemoryPerIdentity }), check: notNegative,
		doc: "of those, what one authenticated identity may hold (without authentication every client is one identity and shares the whole); read at start"},
	{name: "limits.memory_mb", def: "90% of the cgroup limit", field: at(func(l *Limits) *int { return &l.MemoryMB }), check: notNegative,
		doc: "the Go runtime's soft memory limit (`debug.SetMemoryLimit`)"},
})

var toolRuleKeys = concat([]key{
	{name: "tool_rules[].servers", def: "all", field: at(func(r *ToolRule) *[]string { return &r.Servers }),
		doc: "globs over server names the rule applies to"},
	{name: "tool_rules[].tools", def: "all", field: at(func(r *ToolRule) *[]string { return &r.Tools }),
		doc: "globs over exposed tool names the rule applies to"},
	{name: "tool_rules[].visibility", def: "`visible`", field: at(func(r *ToolRule) *string { return &r.Visibility }), check: oneOf("", "visible", "deferred"),
		doc: "`visible`, or `deferred`: left out of `tools/list`, found with `tool_search`"},
	{name: "tool_rules[].require_approval", def: "false", field: at(func(r *ToolRule) **bool { return &r.RequireApproval }),
		doc: "ask a person (elicitation) before each call"},
	{name: "tool_rules[].timeout", typ: "number (s)", def: "the server's", field: at(func(r *ToolRule) *float64 { return &r.Timeout }), check: inRange(0, 86400, " seconds"),
		doc: "per-call timeout"},
	{name: "tool_rules[].validate_arguments", def: "true", field: at(func(r *ToolRule) **bool { return &r.ValidateArguments }),
		doc: "check arguments against the tool's `inputSchema`"},
	{name: "tool_rules[].rate", field: at(func(r *ToolRule) **Rate { return &r.Rate }), check: checkRate,
		doc: "token bucket per identity and matching tool"},
}, rateKeys("tool_rules[].rate"))

var observeKeys = []key{
	{name: "pinning.mode", def: "`withhold`", field: at(func(p *Pinning) *string { return &p.Mode }), check: oneOf("", "withhold", "flag", "off"),
		doc: "a changed tool is `withhold`: hidden until approved, `flag`: served and listed as pending, `off`: not tracked"},
	{name: "audit.path", def: "off", field: at(func(a *Audit) *string { return &a.Path }),
		doc: "the JSONL audit log; `-`: standard output"},
	{name: "audit.max_size_mb", def: "100", field: at(func(a *Audit) *int { return &a.MaxSizeMB }), check: notNegative,
		doc: "size at which the file is rotated"},
	{name: "audit.max_backups", def: "all", field: at(func(a *Audit) *int { return &a.MaxBackups }), check: notNegative,
		doc: "rotated files kept"},
	{name: "audit.max_age_days", def: "any", field: at(func(a *Audit) *int { return &a.MaxAgeDays }), check: notNegative,
		doc: "days rotated files are kept"},
	{name: "audit.compress", def: "false", field: at(func(a *Audit) *bool { return &a.Compress }),
		doc: "gzip rotated files"},
	{name: "audit.include_arguments", def: "false", field: at(func(a *Audit) *bool { return &a.IncludeArguments }),
		doc: "log tool arguments verbatim instead of their shape"},
	{name: "telemetry.otlp_endpoint", def: "off", field: at(func(t *Telemetry) *string { return &t.OTLPEndpoint }),
		doc: "OTLP/HTTP collector traces are sent to"},
	{name: "telemetry.service_name", def: "`edge-mcp`", field: at(func(t *Telemetry) *string { return &t.ServiceName }),
		doc: "the `service.name` resource attribute"},
	{name: "telemetry.sample_ratio", def: "1", field: at(func(t *Telemetry) **float64 { return &t.SampleRatio }), check: inRange(0, 1, ""),
		doc: "fraction of new traces sampled"},
	{name: "telemetry.headers", field: at(func(t *Telemetry) *map[string]string { return &t.Headers }),
		doc: "HTTP headers sent to the collector"},
	{name: "telemetry.insecure", def: "false", field: at(func(t *Telemetry) *bool { return &t.Insecure }),
		doc: "plain HTTP for an `otlp_endpoint` given without a scheme"},
	{name: "observability.metrics", def: "true", field: at(func(o *Observability) **bool { return &o.Metrics }),
		doc: "serve Prometheus metrics at `/metrics`"},
	{name: "observability.compression", def: "true", field: at(func(o *Observability) **bool { return &o.Compression }),
		doc: "compress large JSON answers (zstd or gzip)"},
	{name: "observability.log_format", def: "`text`", field: at(func(o *Observability) *string { return &o.LogFormat }), check: oneOf("", "text", "json"),
		doc: "`text` or `json`"},
	{name: "observability.required_servers", field: at(func(o *Observability) *[]string { return &o.RequiredServers }),
		doc: "upstreams that must be connected for `/readyz` to answer 200"},
}
