package policyset

import (
	"context"
	"fmt"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// ociWasm returns the module of an attachment whose module is an oci://
// reference: pulled with the registry settings reg (credentials, plain
// HTTP registries, required signatures, pull policy, size cap, timeout),
// checked by loading it, and cached by digest in the module store of the
// state folder, so that a rebuild with the reference unchanged reads it
// from there (store.Resolve). In a fleet one replica pulls and the others
// use its bytes (fleet.OCIModule). Called with the Set's lock held.
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
	if v, ok := p.store.Cached(sp.Module, o); ok && o.PullPolicy != store.PullAlways {
		return p.storedWasm(sp, v)
	}
	wasm, v, fromFleet, err := p.share.OCIModule(ctx, fleet.OCIRequest{
		Reference: sp.Module,
		Usable:    func(v store.Version) bool { return o.Reuses(v, sp.Module) },
		Fresh:     freshness(o.PullPolicy),
		MaxBytes:  ro.MaxBytes,
		Wait:      pullTimeout(ro) + 10*time.Second,
		Pull: func(ctx context.Context) ([]byte, store.Version, error) {
			_, v, err := p.store.Resolve(ctx, sp.Module, o)
			if err != nil {
				return nil, v, err
			}
			wasm, err := p.storedWasm(sp, v)
			return wasm, v, err
		},
	})
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", sp.Name, err)
	}
	if fromFleet {
		// Another replica pulled and verified it; the fleet's record is
		// sealed and the bytes match its digest. Check them as a pull
		// here would be, then cache them.
		if v.ABIVersion, err = o.Check(wasm); err != nil {
			return nil, fmt.Errorf("policy %q: module %s (%s, pulled by another replica): %w", sp.Name, sp.Module, v.Digest, err)
		}
		ref, _ := ociwasm.ParseRef(sp.Module)
		if _, err := p.store.Commit(store.OCIName(ref), wasm, v); err != nil {
			return nil, fmt.Errorf("policy %q: module %s: %w", sp.Name, sp.Module, err)
		}
	}
	return wasm, nil
}

// fleetFresh is how old another replica's pull of a reference may be for
// a replica with pull policy always to use it instead of asking the
// registry: replicas reloading one config together pull once.
const fleetFresh = 30 * time.Second

func freshness(pullPolicy string) time.Duration {
	if pullPolicy == store.PullAlways {
		return fleetFresh
	}
	return 0
}

func pullTimeout(o ociwasm.Options) time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return ociwasm.DefaultTimeout
}

// storedWasm reads the bytes of a stored version of an oci:// module.
func (p *Set) storedWasm(sp *policy.Spec, v store.Version) ([]byte, error) {
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
