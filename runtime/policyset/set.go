// Package policyset keeps a gateway's policy configuration as a series of
// generations. A generation is an immutable chain of attachments; a change
// (a module upload, a rollback, an attach or detach, a config reload)
// builds and warms the next generation aside, swaps it in atomically, and closes the old one
// once the calls it is deciding have drained. A call holds a reference to
// the generation that decided it from its tool_call hook to its result
// hook, so every call is decided by exactly one version of every module:
// the call's Scope holds that reference and is released once, by defer,
// in the function that owns the call.
//
// A Set is safe for concurrent use: Current, Hooks, Acquire, Release and
// Scope are lock-free and run on every call's path; changes (Open,
// Rebuild, BuildLocked/CommitLocked, the admin API's Change, the fleet's
// Policies view) are serialized by the Set's lock. It lives as long as its
// gateway: Close retires the last generation and stops the engine once
// every call holding a generation has released it.
package policyset

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
	"github.com/edge-mcp/edge-mcp/runtime/fleet"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/store"
)

// Gen is one generation of the policy configuration.
type Gen struct {
	id    uint64
	chain *policy.Chain
	atts  []attachment // in chain order
	mods  []*loadedModule
	reg   *config.Admin // the registry settings it was built with
	// refs counts the calls holding the generation, plus one while it is
	// current. It reaches zero once: the generation is then closed.
	refs atomic.Int64
}

// Hooks returns the hooks the generation's chain runs; none for nil.
func (pg *Gen) Hooks() policy.HookSet {
	if pg == nil {
		return 0
	}
	return pg.chain.Hooks()
}

// Chain is the generation's chain of attachments.
func (pg *Gen) Chain() *policy.Chain { return pg.chain }

// Module is the loaded module of the attachment named name; nil when pg
// has none (or pg is nil). It lives as long as the generation.
func (pg *Gen) Module(name string) *policy.Module {
	if pg == nil {
		return nil
	}
	for _, a := range pg.atts {
		if a.spec.Name == name && a.module != nil {
			return a.module.mod
		}
	}
	return nil
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
	refs   int // generations using it; guarded by Set.mu
}

// moduleKey identifies a loaded module: same binary, same options.
type moduleKey struct {
	digest  string
	options string
}

// Set owns the policy engine, the module store and the generations of one
// gateway. Its zero value holds no policies; Open loads them.
type Set struct {
	log    *slog.Logger
	engine *policy.Engine // nil until the first module is needed
	store  *store.Store   // nil without a state directory
	cache  string         // compilation cache directory
	rec    *recorder      // nil unless hook inputs are recorded

	cur atomic.Pointer[Gen]

	mu        sync.Mutex // serializes changes; guards the fields below
	nextID    uint64
	loaded    map[moduleKey]*loadedModule
	fileSpecs []policy.Spec  // attachments from the config file
	reg       *config.Admin  // registry settings of oci:// modules (nil: defaults)
	share     *fleet.Fleet   // shares oci:// pulls among replicas (nil: none)
	fleet     *fleet.Control // nil: admin changes are this process's (runtime/fleet)
	retired   sync.WaitGroup
	closed    bool
}

// Current returns the current generation without taking a reference: for
// decisions that only peek (does any policy match?), never for running one.
func (p *Set) Current() *Gen { return p.cur.Load() }

// Hooks returns the hooks of the current generation.
func (p *Set) Hooks() policy.HookSet { return p.cur.Load().Hooks() }

// Acquire takes a reference to the current generation, or returns nil when
// there are no policies. Release it with Release.
func (p *Set) Acquire() *Gen {
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

// Release drops a reference taken by Acquire; the last one closes the
// generation. A nil pg is a no-op.
func (p *Set) Release(pg *Gen) {
	if pg == nil {
		return
	}
	if pg.refs.Add(-1) == 0 {
		go p.closeGen(pg)
	}
}

// Scope is what one call holds from the start of its chain until its
// answer: a reference to the policy generation that decides it (nil: no
// policy applies) and the upstream concurrency slot (nil: no limit). The
// function that owns the call takes it once and releases it once, with
// `defer sc.Release()`; nothing else releases what it holds.
type Scope struct {
	pol  *Set
	Gen  *Gen
	Slot func()
}

// Scope returns a scope holding the current generation when its chain
// matches server and name (result 0, for tools/call: any module; else: a
// module with that result hook), or an empty scope.
func (p *Set) Scope(result policy.Hook, server, name string) Scope {
	match := func(pg *Gen) bool {
		if result == 0 {
			return len(pg.chain.Match(server, name)) > 0
		}
		return pg.chain.Hooks().Has(result) && len(pg.chain.Match(server, name)) > 0
	}
	if cur := p.Current(); cur == nil || !match(cur) {
		return Scope{}
	}
	pg := p.Acquire()
	if pg != nil && !match(pg) {
		p.Release(pg)
		pg = nil
	}
	return Scope{pol: p, Gen: pg}
}

// Held reports whether the scope holds anything to release.
func (sc *Scope) Held() bool { return sc.Gen != nil || sc.Slot != nil }

// Release gives back what the scope holds.
func (sc *Scope) Release() {
	if sc.Slot != nil {
		sc.Slot()
	}
	if sc.Gen != nil {
		sc.pol.Release(sc.Gen)
	}
}

// ReleaseAfter waits for a forwarded call to end (done closed; nil: it
// never went upstream), then releases the scope.
func (sc *Scope) ReleaseAfter(done <-chan struct{}) {
	defer sc.Release()
	if done != nil {
		<-done
	}
}

// swap makes next the current generation (nil: no policies) and retires the
// previous one. Called with p.mu held.
func (p *Set) swapLocked(next *Gen) {
	if next != nil {
		next.refs.Store(1)
	}
	old := p.cur.Swap(next)
	if old != nil {
		p.retired.Add(1)
		p.Release(old)
	}
}

// DiscardLocked closes a generation BuildLocked made that will not be
// committed (a later step of a reload failed). Called with p.mu held: the
// closing runs once the lock is released.
func (p *Set) DiscardLocked(pg *Gen) {
	p.retired.Add(1)
	go p.closeGen(pg)
}

// closeGen closes a drained generation and the modules no other generation
// uses.
func (p *Set) closeGen(pg *Gen) {
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

// Options are what a Set needs besides the config.
type Options struct {
	Log *slog.Logger
	// CacheDir is the compilation cache ("": the state directory's
	// cache folder, else the user's cache directory).
	CacheDir string
	// RecordDir, when set, receives the input of every hook call.
	RecordDir string
	// StateDir holds the module store ("": no store).
	StateDir string
	// Keep is how many versions of each module the store keeps.
	Keep int
	// Admin holds the settings of pulling oci:// modules (registries,
	// signatures, pull policy); nil: the defaults.
	Admin *config.Admin
	// Fleet, when not nil, shares pulls of oci:// modules among the
	// replicas: one pulls, the others use its bytes.
	Fleet *fleet.Fleet
}

// Open starts the engine and the store (when a state directory is given)
// and builds the first generation from the config's policies and the
// attachments saved in the store.
func (p *Set) Open(opts Options, specs []policy.Spec) error {
	p.log, p.cache = opts.Log, opts.CacheDir
	if opts.RecordDir != "" {
		rec, err := newRecorder(opts.RecordDir, p.log)
		if err != nil {
			return err
		}
		p.rec = rec
	}
	stateDir, keep := opts.StateDir, opts.Keep
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
	p.fileSpecs, p.reg, p.share = specs, opts.Admin, opts.Fleet
	atts, err := p.desiredLocked(specs, p.adminSpecs())
	if err != nil {
		return err
	}
	next, err := p.buildLocked(context.Background(), atts, nil, p.reg)
	if err != nil {
		return err
	}
	p.swapLocked(next)
	return nil
}

// adminSpecs returns the attachments made through the admin API.
func (p *Set) adminSpecs() []policy.Spec {
	if p.store == nil {
		return nil
	}
	return p.store.Attachments()
}

// desiredLocked merges the config's attachments and the admin API's, in
// that order, checking names are unique.
func (p *Set) desiredLocked(fromConfig, admin []policy.Spec) ([]attachment, error) {
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

// wasmFor reads the binary a spec attaches: an uploaded module, an
// oci:// reference (pulled as reg says, oci.go) or a file.
func (p *Set) wasmFor(ctx context.Context, sp *policy.Spec, reg *config.Admin) ([]byte, error) {
	if config.OCIModule(sp.Module) {
		return p.ociWasm(ctx, sp, reg)
	}
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
func (p *Set) engineLocked(ctx context.Context) (*policy.Engine, error) {
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
func (p *Set) buildLocked(ctx context.Context, atts []attachment, preloaded map[moduleKey]*policy.Module, reg *config.Admin) (*Gen, error) {
	if len(atts) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	needs, err := p.needsOf(ctx, atts, reg)
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
	pg.reg = reg
	return pg, nil
}

// moduleNeed is the module binary an attachment needs, and its key.
type moduleNeed struct {
	key  moduleKey
	wasm []byte
}

// needsOf validates each attachment and reads the binary it needs.
func (p *Set) needsOf(ctx context.Context, atts []attachment, reg *config.Admin) ([]moduleNeed, error) {
	needs := make([]moduleNeed, len(atts))
	for i := range atts {
		sp := &atts[i].spec
		if err := sp.Validate(); err != nil {
			return nil, err
		}
		wasm, err := p.wasmFor(ctx, sp, reg)
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
func (p *Set) loadFresh(ctx context.Context, atts []attachment, needs []moduleNeed, preloaded map[moduleKey]*policy.Module) (map[moduleKey]*loadedModule, error) {
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
func (p *Set) chainOf(atts []attachment, needs []moduleNeed, fresh map[moduleKey]*loadedModule) (*Gen, error) {
	pg := &Gen{}
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

// BuildLocked builds, aside, the generation of the config's attachments
// fromConfig and the admin API's, pulling oci:// modules as reg says;
// CommitLocked swaps it in. Called with the Set's lock held (Lock), which
// it keeps until the commit.
func (p *Set) BuildLocked(ctx context.Context, fromConfig []policy.Spec, reg *config.Admin) (*Gen, error) {
	return p.buildFromLocked(ctx, fromConfig, p.adminSpecs(), nil, reg)
}

// CommitLocked makes next, built by BuildLocked from fromConfig, the
// current generation; its registry settings apply to later changes.
func (p *Set) CommitLocked(fromConfig []policy.Spec, next *Gen) {
	p.fileSpecs = fromConfig
	if next != nil && next.reg != nil {
		p.reg = next.reg
	}
	p.swapLocked(next)
}

// buildFromLocked builds, aside, the generation of the config's and the
// admin API's attachments; the caller swaps it in (or drops it).
func (p *Set) buildFromLocked(ctx context.Context, fromConfig, admin []policy.Spec, preloaded map[moduleKey]*policy.Module, reg *config.Admin) (*Gen, error) {
	atts, err := p.desiredLocked(fromConfig, admin)
	if err != nil {
		return nil, err
	}
	return p.buildLocked(ctx, atts, preloaded, reg)
}

// rebuildLocked builds a generation from the config's and the given admin
// attachments and swaps it in.
func (p *Set) rebuildLocked(ctx context.Context, admin []policy.Spec, preloaded map[moduleKey]*policy.Module) error {
	next, err := p.buildFromLocked(ctx, p.fileSpecs, admin, preloaded, p.reg)
	if err != nil {
		return err
	}
	p.swapLocked(next)
	return nil
}

// Close retires the current generation, waits for every generation to
// drain and close, then stops the engine.
func (p *Set) Close() error {
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

// Stats reports the modules of the current generation.
func (p *Set) Stats() []policy.Stats {
	pg := p.cur.Load()
	if pg == nil {
		return nil
	}
	return pg.chain.Stats()
}
