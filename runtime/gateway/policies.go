package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
)

// This file keeps the policy configuration as a series of generations. A
// generation is an immutable chain of attachments; a change (a module
// upload, a rollback, an attach or detach, a config reload) builds and warms
// the next generation aside, swaps it in atomically, and closes the old one
// once the calls it is deciding have drained. A call holds a reference to
// the generation that decided it from its tool_call hook to its result
// hook, so every call is decided by exactly one version of every module:
// the call's callScope holds that reference and is released once, by defer,
// in the function that owns the call.

// policyGen is one generation of the policy configuration.
type policyGen struct {
	id    uint64
	chain *policy.Chain
	atts  []attachment // in chain order
	mods  []*loadedModule
	// refs counts the calls holding the generation, plus one while it is
	// current. It reaches zero once: the generation is then closed.
	refs atomic.Int64
}

func (pg *policyGen) hooks() policy.HookSet {
	if pg == nil {
		return 0
	}
	return pg.chain.Hooks()
}

// attachment is one entry of a generation's chain, as configured.
type attachment struct {
	spec   policy.Spec
	source string // "config" or "admin"
	module *loadedModule
}

// loadedModule is a module instance pool shared by the generations whose
// attachments have the same binary and options.
type loadedModule struct {
	key    moduleKey
	mod    *policy.Module
	digest string
	size   int
	refs   int // generations using it; guarded by policies.mu
}

// moduleKey identifies a loaded module: same binary, same options.
type moduleKey struct {
	digest  string
	options string
}

// policies owns the policy engine, the module store and the generations of
// one gateway.
type policies struct {
	log    *slog.Logger
	engine *policy.Engine // nil until the first module is needed
	store  *store.Store   // nil without a state directory
	cache  string         // compilation cache directory
	rec    *recorder      // nil unless hook inputs are recorded

	cur atomic.Pointer[policyGen]

	mu        sync.Mutex // serializes changes; guards the fields below
	nextID    uint64
	loaded    map[moduleKey]*loadedModule
	fileSpecs []policy.Spec // attachments from the config file
	fleet     *fleetControl // nil: admin changes are this process's (runtime/fleet)
	retired   sync.WaitGroup
	closed    bool
}

// current returns the current generation without taking a reference: for
// decisions that only peek (does any policy match?), never for running one.
func (p *policies) current() *policyGen { return p.cur.Load() }

// hooks returns the hooks of the current generation.
func (p *policies) hooks() policy.HookSet { return p.cur.Load().hooks() }

// acquire takes a reference to the current generation, or returns nil when
// there are no policies. Release it with release.
func (p *policies) acquire() *policyGen {
	for {
		pg := p.cur.Load()
		if pg == nil {
			return nil
		}
		n := pg.refs.Load()
		if n > 0 && pg.refs.CompareAndSwap(n, n+1) {
			return pg
		}
		// pg was retired between the load and the increment; the next
		// load sees its successor.
	}
}

// release drops a reference taken by acquire; the last one closes the
// generation. A nil pg is a no-op.
func (p *policies) release(pg *policyGen) {
	if pg == nil {
		return
	}
	if pg.refs.Add(-1) == 0 {
		go p.closeGen(pg)
	}
}

// callScope is what one call holds from the start of its chain until its
// answer: a reference to the policy generation that decides it (nil: no
// policy applies) and the upstream concurrency slot (nil: no limit). The
// function that owns the call takes it once and releases it once, with
// `defer sc.release()`; nothing else releases what it holds.
type callScope struct {
	pol  *policies
	pg   *policyGen
	slot func()
}

// scope returns a scope holding the current generation when its chain
// matches (for tools/call: any module; else: a result hook of kind), or an
// empty scope.
func (p *policies) scope(kind listKind, server, name string) callScope {
	match := func(pg *policyGen) bool {
		if kind == kindTools {
			return len(pg.chain.Match(server, name)) > 0
		}
		return resultPolicy(pg.chain, kind, server, name)
	}
	if cur := p.current(); cur == nil || !match(cur) {
		return callScope{}
	}
	pg := p.acquire()
	if pg != nil && !match(pg) {
		p.release(pg)
		pg = nil
	}
	return callScope{pol: p, pg: pg}
}

// held reports whether the scope holds anything to release.
func (sc *callScope) held() bool { return sc.pg != nil || sc.slot != nil }

// release gives back what the scope holds.
func (sc *callScope) release() {
	if sc.slot != nil {
		sc.slot()
	}
	if sc.pg != nil {
		sc.pol.release(sc.pg)
	}
}

// releaseAfter waits for a forwarded call to end (done closed; nil: it
// never went upstream), then releases the scope.
func (sc *callScope) releaseAfter(done <-chan struct{}) {
	defer sc.release()
	if done != nil {
		<-done
	}
}

// swap makes next the current generation (nil: no policies) and retires the
// previous one. Called with p.mu held.
func (p *policies) swapLocked(next *policyGen) {
	if next != nil {
		next.refs.Store(1)
	}
	old := p.cur.Swap(next)
	if old != nil {
		p.retired.Add(1)
		p.release(old)
	}
}

// closeGen closes a drained generation and the modules no other generation
// uses.
func (p *policies) closeGen(pg *policyGen) {
	defer p.retired.Done()
	if err := pg.chain.Close(); err != nil {
		p.log.Warn("closing policy generation", "generation", pg.id, "err", err)
	}
	p.mu.Lock()
	var done []*loadedModule
	for _, lm := range pg.mods {
		lm.refs--
		if lm.refs == 0 {
			delete(p.loaded, lm.key)
			done = append(done, lm)
		}
	}
	p.mu.Unlock()
	for _, lm := range done {
		lm.mod.Close()
	}
	p.log.Debug("policy generation closed", "generation", pg.id)
}

// open starts the engine and the store (when a state directory is given)
// and builds the first generation from the config's policies and the
// attachments saved in the store.
func (p *policies) open(specs []policy.Spec, stateDir string, keep int) error {
	p.loaded = make(map[moduleKey]*loadedModule)
	if stateDir != "" {
		st, err := store.Open(stateDir, store.Options{Keep: keep, Logger: p.log})
		if err != nil {
			return fmt.Errorf("opening the module store: %w", err)
		}
		p.store = st
		if p.cache == "" {
			p.cache = filepath.Join(stateDir, "cache")
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fileSpecs = specs
	atts, err := p.desiredLocked(specs, p.adminSpecs())
	if err != nil {
		return err
	}
	next, err := p.buildLocked(context.Background(), atts, nil)
	if err != nil {
		return err
	}
	p.swapLocked(next)
	return nil
}

// adminSpecs returns the attachments made through the admin API.
func (p *policies) adminSpecs() []policy.Spec {
	if p.store == nil {
		return nil
	}
	return p.store.Attachments()
}

// desiredLocked merges the config's attachments and the admin API's, in
// that order, checking names are unique.
func (p *policies) desiredLocked(fromConfig, admin []policy.Spec) ([]attachment, error) {
	seen := map[string]string{}
	var out []attachment
	for _, list := range []struct {
		source string
		specs  []policy.Spec
	}{{"config", fromConfig}, {"admin", admin}} {
		for _, sp := range list.specs {
			if prev, dup := seen[sp.Name]; dup {
				return nil, fmt.Errorf("policy %q is attached twice (by the %s and the %s)", sp.Name, prev, list.source)
			}
			seen[sp.Name] = list.source
			out = append(out, attachment{spec: sp, source: list.source})
		}
	}
	return out, nil
}

// wasmFor reads the binary a spec attaches.
func (p *policies) wasmFor(sp *policy.Spec) ([]byte, error) {
	if name, ok := config.UploadedModule(sp.Module); ok {
		if p.store == nil {
			return nil, fmt.Errorf("policy %q: module %q is not a file path and no module store is configured (admin.state_dir)", sp.Name, sp.Module)
		}
		wasm, _, err := p.store.ActiveWasm(name)
		if err != nil {
			return nil, fmt.Errorf("policy %q: uploaded module %q: %w", sp.Name, name, err)
		}
		return wasm, nil
	}
	wasm, err := os.ReadFile(sp.Module)
	if err != nil {
		return nil, fmt.Errorf("policy %q: reading module: %w", sp.Name, err)
	}
	return wasm, nil
}

// keyFor identifies the loaded module a spec needs.
func keyFor(sp *policy.Spec, wasm []byte) (moduleKey, error) {
	opts, err := policy.SpecOptions(sp)
	if err != nil {
		return moduleKey{}, fmt.Errorf("policy %q: %w", sp.Name, err)
	}
	o, _ := json.Marshal(struct {
		Config           json.RawMessage
		Timeout          time.Duration
		MemoryMB, Pool   int
		Grants           policy.Grants
		MaxIn, MaxOut    int
		Recycle, Failure int
		MaxWait          time.Duration
	}{opts.Config, opts.Timeout, opts.MemoryMB, opts.PoolSize, opts.Grants, opts.MaxInput, opts.MaxOutput,
		opts.RecycleAfterCalls, opts.FailureThreshold, opts.MaxWait})
	sum := sha256.Sum256(wasm)
	return moduleKey{digest: "sha256:" + hex.EncodeToString(sum[:]), options: string(o)}, nil
}

// engineLocked starts the engine on first use.
func (p *policies) engineLocked(ctx context.Context) (*policy.Engine, error) {
	if p.engine != nil {
		return p.engine, nil
	}
	dir := p.cache
	if dir == "" {
		if base, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(base, "edge-mcp", "wasm")
		}
	}
	ec := policy.EngineConfig{CacheDir: dir, Logger: p.log}
	if p.rec != nil {
		ec.Recorder = p.rec.record
	}
	e, err := policy.NewEngine(ctx, ec)
	if err != nil {
		return nil, fmt.Errorf("starting the policy engine: %w", err)
	}
	p.engine = e
	return e, nil
}

// buildLocked loads (or reuses) the module of every attachment and builds a
// generation; nothing changes when it fails. preloaded holds modules loaded
// and verified aside (by an upload), keyed like loaded ones; those not used
// are left to the caller.
func (p *policies) buildLocked(ctx context.Context, atts []attachment, preloaded map[moduleKey]*policy.Module) (*policyGen, error) {
	if len(atts) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	needs, err := p.needsOf(atts)
	if err != nil {
		return nil, err
	}
	fresh, err := p.loadFresh(ctx, atts, needs, preloaded)
	if err != nil {
		return nil, err
	}
	pg, err := p.chainOf(atts, needs, fresh)
	if err != nil {
		for k, lm := range fresh {
			if preloaded[k] == nil {
				lm.mod.Close()
			}
		}
		return nil, err
	}
	for k, lm := range fresh {
		p.loaded[k] = lm
	}
	return pg, nil
}

// moduleNeed is the module binary an attachment needs, and its key.
type moduleNeed struct {
	key  moduleKey
	wasm []byte
}

// needsOf validates each attachment and reads the binary it needs.
func (p *policies) needsOf(atts []attachment) ([]moduleNeed, error) {
	needs := make([]moduleNeed, len(atts))
	for i := range atts {
		sp := &atts[i].spec
		if err := sp.Validate(); err != nil {
			return nil, err
		}
		wasm, err := p.wasmFor(sp)
		if err != nil {
			return nil, err
		}
		key, err := keyFor(sp, wasm)
		if err != nil {
			return nil, err
		}
		needs[i] = moduleNeed{key, wasm}
	}
	return needs, nil
}

// loadFresh loads, concurrently, the modules that are neither loaded nor
// preloaded; on error it closes what it loaded and returns nothing.
func (p *policies) loadFresh(ctx context.Context, atts []attachment, needs []moduleNeed, preloaded map[moduleKey]*policy.Module) (map[moduleKey]*loadedModule, error) {
	fresh := map[moduleKey]*loadedModule{}
	var (
		wg   sync.WaitGroup
		fmu  sync.Mutex
		errs []error
	)
	for i, n := range needs {
		if _, ok := p.loaded[n.key]; ok {
			continue
		}
		if m := preloaded[n.key]; m != nil {
			fresh[n.key] = &loadedModule{key: n.key, mod: m, digest: n.key.digest, size: len(n.wasm)}
			continue
		}
		if _, ok := fresh[n.key]; ok {
			continue
		}
		fresh[n.key] = nil // claimed
		eng, err := p.engineLocked(ctx)
		if err != nil {
			errs = append(errs, err)
			break
		}
		sp := atts[i].spec
		wg.Go(func() {
			opts, _ := policy.SpecOptions(&sp)
			m, err := eng.Load(ctx, sp.Name, n.wasm, opts)
			fmu.Lock()
			defer fmu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			fresh[n.key] = &loadedModule{key: n.key, mod: m, digest: n.key.digest, size: len(n.wasm)}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for k, lm := range fresh {
			if lm != nil && preloaded[k] == nil {
				lm.mod.Close()
			}
		}
		return nil, err
	}
	return fresh, nil
}

// chainOf builds the generation's chain from loaded and fresh modules and
// counts the generation as a user of each module it uses.
func (p *policies) chainOf(atts []attachment, needs []moduleNeed, fresh map[moduleKey]*loadedModule) (*policyGen, error) {
	pg := &policyGen{}
	chainAtts := make([]policy.Attachment, len(atts))
	used := map[*loadedModule]bool{}
	for i := range atts {
		lm := p.loaded[needs[i].key]
		if lm == nil {
			lm = fresh[needs[i].key]
		}
		atts[i].module = lm
		a, err := policy.SpecAttachment(&atts[i].spec, lm.mod)
		if err != nil {
			return nil, err
		}
		chainAtts[i] = a
		if !used[lm] {
			used[lm] = true
			pg.mods = append(pg.mods, lm)
		}
	}
	ch, err := policy.NewChain(chainAtts...)
	if err != nil {
		return nil, err
	}
	for lm := range used {
		lm.refs++
	}
	p.nextID++
	pg.id, pg.chain, pg.atts = p.nextID, ch, atts
	return pg, nil
}

// buildFromLocked builds, aside, the generation of the config's and the
// admin API's attachments; the caller swaps it in (or drops it).
func (p *policies) buildFromLocked(ctx context.Context, fromConfig, admin []policy.Spec, preloaded map[moduleKey]*policy.Module) (*policyGen, error) {
	atts, err := p.desiredLocked(fromConfig, admin)
	if err != nil {
		return nil, err
	}
	return p.buildLocked(ctx, atts, preloaded)
}

// rebuildLocked builds a generation from the config's and the given admin
// attachments and swaps it in.
func (p *policies) rebuildLocked(ctx context.Context, admin []policy.Spec, preloaded map[moduleKey]*policy.Module) error {
	next, err := p.buildFromLocked(ctx, p.fileSpecs, admin, preloaded)
	if err != nil {
		return err
	}
	p.swapLocked(next)
	return nil
}

// close retires the current generation, waits for every generation to
// drain and close, then stops the engine.
func (p *policies) close() error {
	p.mu.Lock()
	p.closed = true
	p.swapLocked(nil)
	p.mu.Unlock()
	p.retired.Wait()
	if p.engine != nil {
		return p.engine.Close(context.Background())
	}
	return nil
}

// stats reports the modules of the current generation.
func (p *policies) stats() []policy.Stats {
	pg := p.cur.Load()
	if pg == nil {
		return nil
	}
	return pg.chain.Stats()
}

// openPolicies prepares the policy stage of a new gateway.
func (g *Gateway) openPolicies(cfg *config.Config) error {
	g.pol.log = g.log
	g.pol.cache = g.opts.PolicyCacheDir
	if g.opts.RecordDir != "" {
		rec, err := newRecorder(g.opts.RecordDir, g.log)
		if err != nil {
			return err
		}
		g.pol.rec = rec
	}
	// The module store lives where the pins and OAuth tokens do: one
	// state folder per config (stateDir), so unrelated gateways share no
	// modules.
	if err := g.pol.open(cfg.Policies, g.stateDir(cfg), cfg.Admin.KeepVersions); err != nil {
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
