// Package admin is the HTTP side of the edge-mcp admin API: routing,
// admin-token authentication, JSON answers and errors, and the audit record
// of every admin action. The operations themselves (storing and activating
// modules, attaching policies, reloading, approving tool changes) belong to
// the gateway, which implements [Operations]; this package only translates
// between HTTP and those operations.
package admin

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/interceptchain"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
)

// Operations are what the admin API asks of the gateway. A failure the
// caller can act on is an *Error (its status and code reach the client);
// any other error is answered as 500.
type Operations interface {
	// UploadModule verifies a module and stores it as the name's active
	// version; attachments that use the name switch to it.
	UploadModule(ctx context.Context, up Upload) (ModuleInfo, error)
	ListModules() ([]ModuleInfo, error)
	GetModule(name string) (ModuleInfo, error)
	DeleteModule(ctx context.Context, name string) error
	// RollbackModule activates the version before the active one.
	RollbackModule(ctx context.Context, name string) (ModuleInfo, error)

	// ListPolicies returns the generation and its attachments, in chain
	// order.
	ListPolicies() (generation uint64, policies []PolicyInfo)
	// AttachPolicy inserts spec at position among the run-time
	// attachments; a negative position means last.
	AttachPolicy(ctx context.Context, spec policy.Spec, position int) error
	DetachPolicy(ctx context.Context, name string) error
	ReorderPolicies(ctx context.Context, order []string) error
	// PromotePolicy turns a shadow attachment into an enforcing one.
	PromotePolicy(ctx context.Context, name string) error

	// Reload reads the config file again; configPath names it even when
	// the reload fails.
	Reload(ctx context.Context) (configPath string, result fmt.Stringer, err error)

	// VirtualServers describes the virtual servers of the running
	// configuration, each with its view of the catalogue now.
	VirtualServers() []VirtualServer

	// PendingToolChanges lists tool definitions changed since pinned that
	// await a decision.
	PendingToolChanges() []PendingToolChange
	// ApproveToolChange accepts the changed definition as the new pin.
	ApproveToolChange(ctx context.Context, server, tool string) error
	// RejectToolChange keeps the old pin and the tool withheld, and stops
	// offering this definition for approval until it changes again.
	RejectToolChange(ctx context.Context, server, tool string) error

	// Interceptors lists the running interceptor chain (SEP-2624): its
	// servers' state, every interceptor known with its counts; empty
	// without a chain.
	Interceptors() *interceptchain.Listing
	// SetInterceptorMode runs the chain member name in mode ("active":
	// promoted from audit; "audit": demoted) from now on, without a
	// reload, and returns the mode it ran in before. The override lasts
	// until the next reload. Errors: interceptchain.ErrNoChain,
	// ErrNotInChain, ErrSameMode (ChangeInterceptorMode makes them
	// *Error).
	SetInterceptorMode(ctx context.Context, name, mode string) (was string, err error)

	// OAuthStatus lists the upstream OAuth authorizations (no tokens).
	OAuthStatus() []oauth.Status
	// OAuthLogin starts (or joins) the authorization of server; the
	// status carries the URL a person must open, unless none is needed.
	OAuthLogin(ctx context.Context, server string) (oauth.Status, error)
	// OAuthLogout forgets the tokens of server for identity ("" the
	// shared one; a downstream identity with "identity": "per_client").
	OAuthLogout(server, identity string) error
}

// Upload is one module upload as the request carried it.
type Upload struct {
	Name            string
	Body            io.Reader
	ContentLength   int64  // -1 when unknown
	ContentEncoding string // "", "gzip" or "zstd"
	Digest          string // X-Module-SHA256; "" when not sent
	Signature       string // X-Module-Signature, base64; "" when not sent
	Vectors         []byte // X-Module-Test-Vectors, decoded JSON; nil when not sent
	Identity        string // the admin identity uploading
}

// Request headers of an upload.
const (
	HeaderModuleDigest    = "X-Module-SHA256"
	HeaderModuleSignature = "X-Module-Signature"
	HeaderModuleVectors   = "X-Module-Test-Vectors"
)

// ModuleInfo describes an uploaded module.
type ModuleInfo struct {
	Name        string          `json:"name"`
	Digest      string          `json:"digest"`
	Size        int64           `json:"size"`
	ABIVersion  string          `json:"abi_version,omitempty"`
	UploadedBy  string          `json:"uploaded_by,omitempty"`
	SignedBy    string          `json:"signed_by,omitempty"`
	ActivatedAt time.Time       `json:"activated_at,omitzero"`
	Healthy     bool            `json:"healthy"`
	Calls       uint64          `json:"calls"`
	Failures    uint64          `json:"failures"`
	AttachedAs  []string        `json:"attached_as"`
	History     []store.Version `json:"history,omitempty"`
	// Replicas says, in a fleet, which version each replica runs and why
	// one refused the fleet's latest change.
	Replicas []ModuleReplica `json:"replicas,omitempty"`
}

// ModuleReplica is one replica's line of a module in a fleet.
type ModuleReplica struct {
	Replica string `json:"replica"`
	// Digest is the version active there; "" when the replica has none.
	Digest string `json:"digest,omitempty"`
	// Generation is the fleet revision active there.
	Generation uint64    `json:"generation"`
	LastSeen   time.Time `json:"last_seen"`
	// Error is why the replica did not activate the fleet's latest
	// revision; it serves the previous one meanwhile.
	Error string `json:"error,omitempty"`
}

// PolicyInfo describes one attachment of the current generation.
type PolicyInfo struct {
	policy.Spec
	Source   string `json:"source"`
	Digest   string `json:"digest"`
	Healthy  bool   `json:"healthy"`
	Calls    uint64 `json:"calls"`
	Failures uint64 `json:"failures"`
	// ShadowRuns and ShadowDiffs count a shadow attachment's runs and the
	// runs whose decision differed from the enforced one.
	ShadowRuns  uint64 `json:"shadow_runs,omitempty"`
	ShadowDiffs uint64 `json:"shadow_diffs,omitempty"`
}

// VirtualServer is a virtual server and what it serves now.
type VirtualServer struct {
	Name      string        `json:"name"`
	Path      string        `json:"path"`
	Title     string        `json:"title,omitempty"`
	Allow     []string      `json:"allow,omitempty"`
	Tools     []VirtualTool `json:"tools"`
	Prompts   []string      `json:"prompts"`
	Resources []string      `json:"resources"` // URIs and URI templates
}

// VirtualTool is a tool of a virtual server: its name there, the
// catalogue's name and server, and whether an override changes it.
type VirtualTool struct {
	Name       string `json:"name"`
	Tool       string `json:"tool"`
	Server     string `json:"server"`
	Overridden bool   `json:"overridden,omitempty"`
}

// PendingToolChange is a changed tool definition awaiting a decision.
type PendingToolChange struct {
	Server    string    `json:"server"`
	Tool      string    `json:"tool"`
	Diff      string    `json:"diff"`
	ChangedAt time.Time `json:"changed_at"`
	Withheld  bool      `json:"withheld"`
}

// Record is the audit record of one admin change: what, which digest,
// when and by which admin identity.
type Record struct {
	Time     time.Time `json:"time"`
	Identity string    `json:"identity"`
	Action   string    `json:"action"`
	Target   string    `json:"target,omitempty"`
	Digest   string    `json:"digest,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// Error is an admin API failure: an HTTP status, a short code and a reason
// a person can act on.
type Error struct {
	Status int
	Code   string
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// Errorf makes an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Reason: fmt.Sprintf(format, args...)}
}
