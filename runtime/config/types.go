package config

import (
	"time"

	"github.com/edge-mcp/edge-mcp/internal/limits"
	"github.com/edge-mcp/edge-mcp/policy/spec"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
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
	Policies []spec.Spec
	// InterceptorServers are the active SEP-2624 interceptor servers
	// ("interceptorServers"), in file order, shaped like Servers.
	InterceptorServers []Server
	// Interceptors are the interceptor chain's entries ("interceptors")
	// as written, less those of inactive servers; InterceptorChain adds
	// the policies no entry names.
	Interceptors []InterceptorEntry
	// VirtualServers are the curated endpoints over the catalogue
	// ("virtual_servers"), in file order, each checked (runtime/virtual).
	VirtualServers []virtual.Config
	// LogLevel is "debug", "info", "warn" or "error" ("log_level"), default
	// "info".
	LogLevel string
	// Protocol2026 serves MCP 2026-07-28 downstream beside the 2025
	// revisions ("protocol_2026"; nil: true).
	Protocol2026 *bool
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
	// Cluster joins this process to a fleet of replicas over NATS
	// ("cluster"); nil: one process, no NATS code runs.
	Cluster *Cluster
	// OAuth holds the upstream token store's key and the authorization
	// callback ("oauth").
	OAuth OAuthSettings
}

// Cluster is the "cluster" section: the fleet this replica belongs to.
type Cluster struct {
	// NatsURL lists the NATS servers, comma-separated ("nats_url").
	NatsURL string `json:"nats_url,omitempty"`
	// Name prefixes every subject, bucket and stream of the fleet
	// ("name"), so that several fleets can share one NATS.
	Name string `json:"name,omitempty"`
	// Secrets are the keys of the sealed session tokens ("secret"): the
	// first seals, all open (rotation).
	Secrets []string `json:"secret,omitempty"`
	// Replica is this replica's id ("replica"); "": host name + listen port.
	Replica string `json:"replica,omitempty"`
	// NatsCreds is a NATS credentials file ("nats_creds").
	NatsCreds string `json:"nats_creds,omitempty"`
	// NatsNkey is a file holding a NATS user nkey seed ("nats_nkey").
	NatsNkey string `json:"nats_nkey,omitempty"`
	// AllowAnonymousNATS lets the replica join a NATS that accepts clients
	// without credentials ("allow_anonymous_nats").
	AllowAnonymousNATS bool `json:"allow_anonymous_nats,omitempty"`
	// NatsTLS configures TLS to NATS ("nats_tls"); nil: none unless the
	// URL says tls://.
	NatsTLS *ClusterTLS `json:"nats_tls,omitempty"`
	// SessionTTL is how long a session token is valid after it was issued
	// ("session_ttl"); 0: the default, 24 h.
	SessionTTL time.Duration `json:"session_ttl,omitempty"`
}

// ClusterTLS is "cluster.nats_tls".
type ClusterTLS struct {
	// CAFile verifies the NATS servers ("ca_file").
	CAFile string `json:"ca_file,omitempty"`
	// CertFile and KeyFile are the client certificate ("cert_file",
	// "key_file"), both or neither.
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
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
	// ReconnectWait is how long a call to the server while it is
	// disconnected waits for the reconnection it triggers, at most the
	// call's timeout ("reconnect_wait", seconds; default 2 s).
	ReconnectWait time.Duration
	// Session is "shared" (one upstream session for every downstream
	// session), "per_client" (one per downstream session that calls the
	// server) or "auto" (the default: shared, refusing server→client
	// requests that cannot be attributed to one client).
	Session string
	// ProtocolVersion is the MCP revision spoken upstream
	// ("protocol_version"): "auto" (the default: probe server/discover,
	// fall back to initialize), "2025-11-25" or "2026-07-28".
	ProtocolVersion string
	// MaxClientSessions bounds the upstream sessions open at once with
	// per_client ("max_client_sessions"; default 16), and how many of them
	// one authenticated identity may hold ("max_client_sessions_per_identity";
	// default half of them, at least 1).
	MaxClientSessions            int
	MaxClientSessionsPerIdentity int
	// OAuth makes the gateway an OAuth client of this server ("oauth");
	// nil: none.
	OAuth *OAuth
	// Identity is "shared" (or "": one upstream token for the gateway) or
	// "per_client" (one per downstream identity; needs OAuth).
	Identity string
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
	// InsecureRegistries are OCI registries reached over plain HTTP;
	// loopback registries always are.
	InsecureRegistries []string `json:"insecure_registries,omitempty"`
	// DockerConfig is the Docker config.json with registry credentials;
	// empty: $DOCKER_CONFIG/config.json or ~/.docker/config.json.
	DockerConfig string `json:"docker_config,omitempty"`
	// PullPolicy is "if_not_present" (default) or "always".
	PullPolicy string `json:"pull_policy,omitempty"`
	// PullTimeout bounds one pull, in seconds; 0: 30.
	PullTimeout float64 `json:"pull_timeout,omitempty"`
	// RequireSignature lists the registries and repositories whose
	// modules must be signed.
	RequireSignature []SignatureRule `json:"require_signature,omitempty"`
}

// SignatureRule requires a cosign signature of the oci:// modules under
// Prefix by one of CosignKeys, or a keyless Sigstore bundle whose
// certificate chains to TrustedRoot and names the identity and issuer.
type SignatureRule struct {
	Prefix     string   `json:"prefix"`
	CosignKeys []string `json:"cosign_keys,omitempty"`
	// TrustedRoot is a Sigstore trusted_root.json (its text, e.g.
	// "${file:/etc/edge/trusted_root.json}") for keyless bundles.
	TrustedRoot               string `json:"trusted_root,omitempty"`
	CertificateIdentity       string `json:"certificate_identity,omitempty"`
	CertificateIdentityRegexp string `json:"certificate_identity_regexp,omitempty"`
	CertificateOIDCIssuer     string `json:"certificate_oidc_issuer,omitempty"`
}

// DefaultMaxModuleBytes caps uploaded modules unless the config says
// otherwise.
const DefaultMaxModuleBytes = 32 << 20

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

// Rate is a token bucket: rps tokens per second, burst at most (the type
// of internal/limits, which virtual server configurations share).
type Rate = limits.Rate

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
	// ReadHeaderTimeout, BodyReadTimeout and IdleTimeout bound how long a
	// downstream client may take to send a request's headers, a POST body,
	// and how long an idle keep-alive connection is kept (0: the default).
	ReadHeaderTimeout time.Duration `json:"read_header_timeout,omitempty"`
	BodyReadTimeout   time.Duration `json:"body_read_timeout,omitempty"`
	IdleTimeout       time.Duration `json:"idle_timeout,omitempty"`
	// MaxHeaderBytes bounds a request's line and headers (0: 64 KiB).
	MaxHeaderBytes int `json:"max_header_bytes,omitempty"`
	// ResumeEvents is how many recent events, in messages, each streamable
	// HTTP session keeps for clients resuming a stream with Last-Event-ID
	// (0: 256; negative: no event ids, no resumption).
	ResumeEvents int `json:"resume_events,omitempty"`
	// MaxConnections caps the downstream connections open at once (0: the
	// default).
	MaxConnections int `json:"max_connections,omitempty"`
	// MaxConnectionsPerIP caps those from one client address (0: a quarter
	// of MaxConnections).
	MaxConnectionsPerIP int `json:"max_connections_per_ip,omitempty"`
	// UpstreamBytesInFlight caps the bytes of upstream messages being read
	// at once, gateway-wide (0: derived from the memory limit).
	UpstreamBytesInFlight int64 `json:"upstream_bytes_in_flight,omitempty"`
	// ShutdownGrace is how long a stopping gateway (SIGTERM) lets the calls
	// in flight finish before it closes what is left (0: the default).
	ShutdownGrace time.Duration `json:"shutdown_grace,omitempty"`
	// InputTimeout is how long a 2026-07-28 client has to retry a call
	// answered with input_required (a 2025 upstream's sampling,
	// elicitation or roots request); then the upstream's request is
	// answered with an error and its call cancelled (0: 60 s). It is also
	// how long a 2025 client has to answer the requests a 2026-07-28
	// upstream's input_required result became.
	InputTimeout time.Duration `json:"input_timeout,omitempty"`
	// InputRounds caps the input_required rounds a 2026-07-28 upstream may
	// ask a 2025 client for in one call (0: 8).
	InputRounds int `json:"input_rounds,omitempty"`
	// ClientMemory caps the bytes clients can make the gateway hold for
	// them after their requests are answered (resumable events, requests
	// parked for an input_required retry, task records), process-wide (0: a quarter of
	// the memory limit, else 1 GiB). ClientMemoryPerIdentity is one
	// authenticated identity's share of it (0: a quarter of ClientMemory).
	ClientMemory            int64 `json:"client_memory,omitempty"`
	ClientMemoryPerIdentity int64 `json:"client_memory_per_identity,omitempty"`
	// MemoryMB sets the Go runtime's soft memory limit (0: 90% of the
	// cgroup's memory limit when there is one, else none).
	MemoryMB int `json:"memory_mb,omitempty"`
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
