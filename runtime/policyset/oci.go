package policyset

import (
	"context"
	"fmt"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// ociWasm returns the module of an attachment whose module is an oci://
// reference: pulled with the registry settings reg (credentials, plain
// HTTP registries, required signatures, pull policy, size cap, timeout),
// checked by loading it, and cached by digest in the module store of the
// state folder, so that a rebuild with the reference unchanged reads it
// from there (store.Resolve). Called with the Set's lock held.
func (p *Set) ociWasm(ctx context.Context, sp *policy.Spec, reg *config.Admin) ([]byte, error) {
	if p.store == nil {
		return nil, fmt.Errorf("policy %q: module %s: an oci:// module is cached in the module store, and no state folder is configured (admin.state_dir)", sp.Name, sp.Module)
	}
	if reg == nil {
		reg = &config.Admin{}
	}
	ro, err := reg.RegistryOptions(sp.Module)
	if err != nil {
		return nil, fmt.Errorf("policy %q: module %s: %w", sp.Name, sp.Module, err)
	}
	o := store.OCIOptions{Options: ro, PullPolicy: reg.PullPolicy, Check: p.checkPulled(ctx, sp)}
	_, v, err := p.store.Resolve(ctx, sp.Module, o)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", sp.Name, err)
	}
	wasm, err := p.store.Blob(v.Digest)
	if err != nil {
		return nil, fmt.Errorf("policy %q: module %s (%s): %w", sp.Name, sp.Module, v.Digest, err)
	}
	return wasm, nil
}

// checkPulled loads a pulled module with the options of the attachment
// that names it, before it is stored; it returns the module's ABI version.
func (p *Set) checkPulled(ctx context.Context, sp *policy.Spec) func([]byte) (string, error) {
	return func(wasm []byte) (string, error) {
		eng, err := p.engineLocked(ctx)
		if err != nil {
			return "", err
		}
		opts, err := policy.SpecOptions(sp)
		if err != nil {
			return "", err
		}
		m, err := eng.Load(ctx, sp.Name, wasm, opts)
		if err != nil {
			return "", err
		}
		defer m.Close()
		return m.Stats().ABIVersion, nil
	}
}
