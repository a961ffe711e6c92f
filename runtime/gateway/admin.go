package gateway

import (
	"context"
	"fmt"
	"net/http"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/console"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
)

// This file connects the admin API (package admin, which owns the HTTP
// side and the checks of each operation) to the gateway: policyHost gives
// admin.PolicyOps the policy generations, the module store and the fleet
// (runtime/policyset carries out a change); adminOps does the rest
// (reload here, tool-pin decisions in pins.go, OAuth in oauth.go).

// The admin API's types, under the names callers of package gateway know.
type (
	ModuleInfo        = admin.ModuleInfo
	PolicyInfo        = admin.PolicyInfo
	PendingToolChange = admin.PendingToolChange
)

// AdminHandler returns the admin API. It checks every request's Origin and
// Host with the gateway's guard, then authenticates it with the admin
// tokens of the running config (and EDGE_MCP_ADMIN_TOKEN).
func (g *Gateway) AdminHandler() http.Handler {
	ops := adminAPI{admin.NewPolicyOps(policyHost{&g.pol, g}), adminOps{g}}
	srv := admin.New(admin.Options{
		Ops:    ops,
		Tokens: func() map[string]string { return g.config().Admin.Tokens },
		Audit:  g.audit,
		Log:    g.log,
		Guard:  g.door,
	})
	// The operator console under /ui/ (console.go).
	srv.MountUI(console.New(console.Options{Ops: ops, Source: consoleSource{g}, Auth: srv, Audit: g.audit, Log: g.log, Tail: g.tail,
		KeyFile: console.KeyFileIn(g.StateDir())}))
	return srv
}

// adminAPI is admin.Operations for a gateway: the policy and module
// operations of package admin, the rest of adminOps.
type adminAPI struct {
	*admin.PolicyOps
	adminOps
}

var _ admin.Operations = adminAPI{}

// adminOps carries out the admin operations on the gateway itself.
type adminOps struct{ g *Gateway }

func (o adminOps) Reload(ctx context.Context) (string, fmt.Stringer, error) {
	res, err := o.g.ReloadFile(ctx)
	return o.g.config().Path, res, err
}

// policyHost implements admin.PolicyHost for a gateway: the policy set
// (runtime/policyset) gives Policies, Store and Change.
type policyHost struct {
	*policyset.Set
	g *Gateway
}

func (h policyHost) Config() *config.Config         { return h.g.config() }
func (h policyHost) Writable() error                { return h.g.fleet.Writable() }
func (h policyHost) AddReplicas(infos []ModuleInfo) { h.g.fleet.AddReplicas(infos) }

// checkSignature is admin.CheckSignature: the fleet's modules are checked
// as uploads are (runtime/fleet).
var checkSignature = admin.CheckSignature
