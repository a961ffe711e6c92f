package gateway

import (
	"errors"
	"fmt"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
)

// The policy generations live in runtime/policyset (g.pol); a call holds
// the generation that decides it in its callScope, taken once and
// released once, by defer, in the function that owns the call.

// callScope is what one call holds until its answer (policyset.Scope).
type callScope = policyset.Scope

// policyScope returns the scope of a call of kind to server's name: for
// tools/call any matching module holds the generation, else a module with
// the kind's result hook.
func policyScope(p *policyset.Set, kind listKind, server, name string) callScope {
	if kind == kindTools {
		return p.Scope(0, server, name)
	}
	return p.Scope(resultHooks[kind], server, name)
}

// openPolicies prepares the policy stage of a new gateway.
func openPolicies(g *Gateway, cfg *config.Config) error {
	// The module store lives where the pins and OAuth tokens do: one
	// state folder per config (config.Config.StateDirUnder), so
	// unrelated gateways share no modules.
	opts := policyset.Options{Log: g.log, CacheDir: g.opts.PolicyCacheDir, RecordDir: g.opts.RecordDir,
		StateDir: cfg.StateDirUnder(g.opts.StateDir), Keep: cfg.Admin.KeepVersions, Admin: &cfg.Admin, Fleet: g.fleet}
	if err := g.pol.Open(opts, cfg.Policies); err != nil {
		return fmt.Errorf("loading policies: %w", err)
	}
	return nil
}

func orChain(module string) string {
	if module == "" {
		return "chain"
	}
	return module
}

func policyModuleOf(err error) string {
	var ce *policy.CallError
	if errors.As(err, &ce) {
		return ce.Module
	}
	return "chain"
}
