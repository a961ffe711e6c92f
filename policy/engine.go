package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/edge-mcp/edge-mcp/policy/internal/meter"
)

// EngineConfig configures an Engine. It is copied by NewEngine and never
// changes afterwards.
type EngineConfig struct {
	// CacheDir, when set, persists compiled modules on disk so that a
	// restart loads them in milliseconds instead of compiling again. The
	// directory is created with mode 0700; an existing directory that group
	// or others can access is refused. Empty keeps the cache in memory.
	CacheDir string
	// Logger receives module load/failure records and the guests' stdout
	// and stderr lines. Nil discards them.
	Logger *slog.Logger
	// CloseOnContextDone makes wazero enforce deadlines itself
	// (RuntimeConfig.WithCloseOnContextDone) instead of the default
	// metering, in which the engine rewrites each module to count loop
	// iterations inline and consult the deadline every few thousand of
	// them. wazero's mechanism leaves Go to check at every loop header,
	// and Go's wasm backend routes every jump through one, which makes Go
	// guests several times slower. Both stop a guest that runs past its
	// deadline and replace its instance.
	CloseOnContextDone bool
	// Recorder, when set, receives every hook call's input (a copy of the
	// exact bytes the guest is handed; not edge_configure's) before the
	// guest runs, for capturing test vectors and replaying traffic. It is
	// called on the request path and must return quickly; see RedactInput
	// before storing inputs.
	Recorder func(Recorded)
}

// Engine compiles and runs policy modules. It owns one wazero runtime per
// memory limit (wazero caps memory per runtime) and one compilation cache
// shared by all of them, and compiles each distinct module binary once.
// An Engine is safe for concurrent use.
type Engine struct {
	log      *slog.Logger
	cache    wazero.CompilationCache
	meter    bool // metering (default) rather than CloseOnContextDone
	recorder func(Recorded)
	// ctx ends when Close begins: it stops instances being started and
	// (through the meter's tick) guests still running.
	ctx    context.Context
	cancel context.CancelFunc

	// byModule finds the instance a meter tick comes from.
	byModule sync.Map // api.Module -> *instance

	mu       sync.Mutex
	closed   bool
	classes  map[uint32]*runtimeClass // by memory limit in pages
	compiled map[compileKey]*compiledEntry

	instances atomic.Int64 // live guest instances across all modules
}

type runtimeClass struct {
	pages uint32
	rt    wazero.Runtime
}

type compileKey struct {
	pages  uint32
	digest [sha256.Size]byte
}

// compiledEntry is a compiled module shared by every Module loaded from the
// same bytes in the same runtime class. ready is closed when cm/err are set.
type compiledEntry struct {
	ready chan struct{}
	cm    wazero.CompiledModule
	shape moduleShape
	err   error
	refs  int
}

// NewEngine creates an Engine.
func NewEngine(ctx context.Context, cfg EngineConfig) (*Engine, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &Engine{
		log:      log,
		meter:    !cfg.CloseOnContextDone,
		recorder: cfg.Recorder,
		classes:  make(map[uint32]*runtimeClass),
		compiled: make(map[compileKey]*compiledEntry),
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	if cfg.CacheDir == "" {
		e.cache = wazero.NewCompilationCache()
		return e, nil
	}
	if err := prepareCacheDir(cfg.CacheDir); err != nil {
		e.cancel()
		return nil, err
	}
	cache, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
	if err != nil {
		e.cancel()
		return nil, fmt.Errorf("opening policy compilation cache %s: %w", cfg.CacheDir, err)
	}
	e.cache = cache
	return e, nil
}

func prepareCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating policy cache dir: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("checking policy cache dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("policy cache dir %s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("policy cache dir %s has mode %#o; it holds executable code, so it must not be accessible by group or others (chmod 700)", dir, perm)
	}
	return nil
}

// Close stops the instances being started and the guests still running
// (they fail with ErrClosed), then closes every runtime (and with them
// every module instance still open) and the compilation cache. Close
// modules first to see their close errors; Close is idempotent.
func (e *Engine) Close(ctx context.Context) error {
	e.cancel()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	classes := e.classes
	e.classes = nil
	e.mu.Unlock()
	var errs []error
	for _, c := range classes {
		if err := c.rt.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("closing policy runtime (%d pages): %w", c.pages, err))
		}
	}
	if err := e.cache.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("closing policy compilation cache: %w", err))
	}
	return errors.Join(errs...)
}

// Instances returns the number of live guest instances across all modules
// of this engine (for leak checks and metrics).
func (e *Engine) Instances() int64 { return e.instances.Load() }

// runtime returns the runtime for a memory limit, creating it on first use.
func (e *Engine) runtime(ctx context.Context, pages uint32) (*runtimeClass, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	if c, ok := e.classes[pages]; ok {
		return c, nil
	}
	cfg := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(!e.meter).
		WithMemoryLimitPages(pages).
		WithCompilationCache(e.cache).
		WithDebugInfoEnabled(false)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("instantiating WASI for policy runtime: %w", err)
	}
	if err := e.extismHost(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("instantiating the Extism kernel for policy runtime: %w", err)
	}
	if e.meter {
		_, err := rt.NewHostModuleBuilder(meter.ImportModule).
			NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(e.tick), nil, nil).Export(meter.ImportName).
			Instantiate(ctx)
		if err != nil {
			_ = rt.Close(ctx)
			return nil, fmt.Errorf("instantiating the meter for policy runtime: %w", err)
		}
	}
	c := &runtimeClass{pages: pages, rt: rt}
	e.classes[pages] = c
	return c, nil
}

var wasmMagic = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// compile returns the compiled module for wasm in runtime class rc,
// compiling it at most once however many goroutines ask at the same time.
// Each successful call must be paired with release.
func (e *Engine) compile(ctx context.Context, rc *runtimeClass, wasm []byte) (*compiledEntry, compileKey, error) {
	key := compileKey{pages: rc.pages, digest: sha256.Sum256(wasm)}
	if !bytes.HasPrefix(wasm, wasmMagic) {
		// Only WebAssembly binaries are accepted: never precompiled native
		// code, never the text format.
		return nil, key, errors.New("not a WebAssembly 1.0 binary (missing \\0asm version 1 header)")
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, key, ErrClosed
	}
	ent, ok := e.compiled[key]
	if ok {
		ent.refs++
		e.mu.Unlock()
		select {
		case <-ent.ready:
		case <-ctx.Done():
			e.release(key)
			return nil, key, fmt.Errorf("waiting for compilation: %w", ctx.Err())
		}
		if ent.err != nil {
			e.release(key)
			return nil, key, ent.err
		}
		return ent, key, nil
	}
	ent = &compiledEntry{ready: make(chan struct{}), refs: 1}
	e.compiled[key] = ent
	e.mu.Unlock()

	code := wasm
	var err error
	if e.meter {
		if code, err = meter.Instrument(wasm, fuelRefill); err != nil {
			code, err = nil, fmt.Errorf("compiling: %w", err)
		}
	}
	var cm wazero.CompiledModule
	if err != nil {
		ent.err = err
	} else if cm, err = rc.rt.CompileModule(ctx, code); err != nil {
		ent.err = fmt.Errorf("compiling: %w", err)
	} else if ent.shape, err = checkShape(cm, e.meter); err != nil {
		_ = cm.Close(ctx)
		ent.err = err
	} else {
		ent.cm = cm
	}
	close(ent.ready)
	if ent.err != nil {
		e.release(key)
		return nil, key, ent.err
	}
	return ent, key, nil
}

// release drops one reference to a compiled module and closes it when none
// are left.
func (e *Engine) release(key compileKey) {
	e.mu.Lock()
	ent, ok := e.compiled[key]
	if !ok {
		e.mu.Unlock()
		return
	}
	ent.refs--
	if ent.refs > 0 {
		e.mu.Unlock()
		return
	}
	delete(e.compiled, key)
	e.mu.Unlock()
	if ent.cm != nil {
		_ = ent.cm.Close(context.Background())
	}
}

func digestString(d [sha256.Size]byte) string { return "sha256:" + hex.EncodeToString(d[:]) }

// fuelRefill is how many loop iterations a metered guest runs between two
// deadline checks: a few tens of microseconds of guest time.
const fuelRefill = 1 << 13

// tick is the meter's host function, called by a metered guest whenever
// its fuel runs out and before every memory.grow: it aborts the guest when
// the caller's context ended, the deadline passed, or the module or the
// engine is closing, and refills the fuel otherwise. A module still being
// instantiated (running its start function) is not registered yet; its
// context carries its start deadline.
func (e *Engine) tick(ctx context.Context, mod api.Module, _ []uint64) {
	var inst *instance
	if v, ok := e.byModule.Load(mod); ok {
		inst = v.(*instance)
	}
	if code := e.stopCode(ctx, inst); code != 0 {
		_ = mod.CloseWithExitCode(ctx, code)
		panic(sys.NewExitError(code))
	}
	if inst != nil {
		inst.fuel.Set(api.EncodeI32(fuelRefill))
	} else if fuel, ok := mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal); ok {
		fuel.Set(api.EncodeI32(fuelRefill))
	}
}

// stopCode returns the exit code that stops a metered guest, or 0 to let
// it run on.
func (e *Engine) stopCode(ctx context.Context, inst *instance) uint32 {
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return sys.ExitCodeDeadlineExceeded
		}
		return sys.ExitCodeContextCanceled
	}
	if e.ctx.Err() != nil {
		return sys.ExitCodeContextCanceled
	}
	if inst == nil {
		return 0
	}
	if inst.closed.Load() {
		return sys.ExitCodeContextCanceled
	}
	if d := inst.deadline; d != 0 && time.Now().UnixNano() > d {
		return sys.ExitCodeDeadlineExceeded
	}
	return 0
}
