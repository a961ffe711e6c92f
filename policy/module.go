package policy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/edge-mcp/edge-mcp/policy/internal/jsonx"
	"github.com/edge-mcp/edge-mcp/policy/internal/meter"
	"github.com/edge-mcp/edge-mcp/policy/spec"
)

// Defaults applied by Load to zero ModuleOptions fields.
const (
	DefaultTimeout           = 50 * time.Millisecond
	DefaultMemoryMB          = 64
	DefaultMaxInput          = 4 << 20
	DefaultMaxOutput         = 4 << 20
	DefaultRecycleAfterCalls = 100_000
	DefaultMaxWait           = time.Second
	DefaultFailureThreshold  = 5
	DefaultMaxShadowPending  = 64
	// DefaultInitTimeout bounds starting one instance: instantiation (the
	// module's start function included), _initialize, edge_abi_version,
	// edge_hooks and edge_configure. A Go guest starts in 3 to 6 ms.
	DefaultInitTimeout = time.Second

	// probeInterval is how often an unhealthy module gets a trial call.
	probeInterval = time.Second
	// minMemoryMB: a Go guest needs about 37 pages (2.3 MiB) to start.
	minMemoryMB = spec.MinMemoryMB
	maxMemoryMB = spec.MaxMemoryMB
)

// Grants lists the optional capabilities an operator gives a module. The
// zero value grants nothing beyond the sandbox defaults: no files, no
// network, no arguments or environment, a fake clock that starts at a fixed
// date and advances 1 ms per reading, sleeps that return at once, random
// bytes from crypto/rand, and stdout/stderr lines sent to the host log.
type Grants struct {
	// Clock gives the guest the real wall clock and monotonic clock.
	Clock bool
	// AllowedHosts are the hosts an Extism plugin's http_request may
	// reach (globs on the host name, or on host:port with a colon);
	// empty: none.
	AllowedHosts []string `json:",omitempty"`
}

// ModuleOptions configures one loaded module. Zero fields take the
// documented defaults.
type ModuleOptions struct {
	// Config is handed to the guest's edge_configure on every instance
	// ({} when empty). It must be a JSON object.
	Config json.RawMessage
	// Timeout bounds every hook call (default 50 ms). A guest still running
	// at the deadline is stopped and its instance replaced.
	Timeout time.Duration
	// MemoryMB caps the linear memory of all the module's instances
	// together (default 64, minimum 4): a pool of PoolSize instances shares
	// it. A guest growing past what is left fails its call with
	// ErrMemoryLimit.
	MemoryMB int
	// MaxInput and MaxOutput cap hook input and output sizes in bytes
	// (default 4 MiB each).
	MaxInput, MaxOutput int
	// PoolSize is the number of instances, i.e. how many calls run at once
	// (default GOMAXPROCS, at most 8).
	PoolSize int
	// RecycleAfterCalls replaces an instance after this many calls (default
	// 100000; negative never). Instances are also replaced when their
	// memory passes three quarters of MemoryMB.
	RecycleAfterCalls int
	// MaxWait bounds how long a call waits for a free instance (default 1 s).
	MaxWait time.Duration
	// FailureThreshold is the number of consecutive failed calls after which
	// the module is marked unhealthy; an unhealthy module fails calls at once
	// (ErrUnhealthy) except for one trial call per second (default 5).
	FailureThreshold int
	// Grants lists optional capabilities.
	Grants Grants
	// MaxShadowPending bounds the shadow runs of this module (see
	// Attachment.Shadow) started but not finished; further runs are
	// skipped and counted in Stats.ShadowSkipped (default 64).
	MaxShadowPending int
	// InitTimeout bounds starting each instance, from instantiation to
	// edge_configure (default 1 s). Load refuses a module whose first
	// instances do not start in time with ErrInitTimeout.
	InitTimeout time.Duration
	// MaxVarBytes bounds an Extism plugin instance's vars, keys and values
	// together (default 64 KiB); a var_set past it fails the call with
	// ErrForbiddenCall.
	MaxVarBytes int
}

func (o ModuleOptions) withDefaults() (ModuleOptions, error) {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = DefaultMemoryMB
	}
	if o.MaxInput == 0 {
		o.MaxInput = DefaultMaxInput
	}
	if o.MaxOutput == 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.PoolSize == 0 {
		o.PoolSize = min(runtime.GOMAXPROCS(0), 8)
	}
	if o.RecycleAfterCalls == 0 {
		o.RecycleAfterCalls = DefaultRecycleAfterCalls
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.MaxShadowPending == 0 {
		o.MaxShadowPending = DefaultMaxShadowPending
	}
	if o.InitTimeout == 0 {
		o.InitTimeout = DefaultInitTimeout
	}
	if o.MaxVarBytes <= 0 {
		o.MaxVarBytes = defaultMaxVarBytes
	}
	if err := checkHosts(o.Grants.AllowedHosts); err != nil {
		return o, err
	}
	switch {
	case o.Timeout < 0 || o.InitTimeout < 0:
		return o, fmt.Errorf("timeouts must not be negative (timeout %v, init timeout %v)", o.Timeout, o.InitTimeout)
	case o.MemoryMB < minMemoryMB || o.MemoryMB > maxMemoryMB:
		return o, fmt.Errorf("memory_mb %d out of range [%d, %d]", o.MemoryMB, minMemoryMB, maxMemoryMB)
	case o.MaxInput < 0 || o.MaxOutput < 0:
		return o, errors.New("max input/output sizes must not be negative")
	case o.PoolSize < 0 || o.PoolSize > spec.MaxPoolSize:
		return o, fmt.Errorf("pool size %d out of range [1, 1024]", o.PoolSize)
	case o.MaxWait < 0:
		return o, fmt.Errorf("max wait %v is negative", o.MaxWait)
	case o.FailureThreshold < 0:
		return o, fmt.Errorf("failure threshold %d is negative", o.FailureThreshold)
	case o.MaxShadowPending < 0:
		return o, fmt.Errorf("max shadow pending %d is negative", o.MaxShadowPending)
	}
	if len(bytes.TrimSpace(o.Config)) == 0 {
		o.Config = json.RawMessage("{}")
	} else if !json.Valid(o.Config) || jsonx.Kind(o.Config) != '{' {
		return o, staged(ErrConfigure, errors.New("config must be a JSON object"))
	}
	return o, nil
}

// Module is a loaded, configured policy module: a compiled binary and a
// pool of initialized instances that run one call at a time each. A Module
// is safe for concurrent use. Close it when done; nothing is released
// implicitly.
type Module struct {
	name   string
	eng    *Engine
	rc     *runtimeClass
	ent    *compiledEntry
	key    compileKey
	opts   ModuleOptions
	hooks  HookSet
	abi    uint32
	limit  uint64 // memory limit in bytes
	high   uint32 // recycle above this memory size
	modCfg wazero.ModuleConfig
	// mem is the memory of all instances together; minMem the bytes an
	// instance has when it starts (its memory's minimum), reserved before
	// instantiating.
	mem    memBudget
	minMem uint64

	free      chan *instance // idle instances; nil marks an empty slot
	done      chan struct{}  // closed by Close
	bgCtx     context.Context
	bgCancel  context.CancelFunc
	refills   sync.WaitGroup
	closed    atomic.Bool
	closeOnce sync.Once

	calls       atomic.Uint64
	failures    atomic.Uint64
	consecutive atomic.Int64
	lastProbe   atomic.Int64
	live        atomic.Int64
	recycled    atomic.Uint64
	peakMemory  atomic.Uint64
	lastErr     atomic.Pointer[string]

	// shadows tracks the shadow runs of this module in flight; Close
	// waits for them.
	shadows       gate
	shadowRuns    atomic.Uint64
	shadowDiffs   atomic.Uint64
	shadowSkipped atomic.Uint64
}

type instance struct {
	mod    api.Module
	mem    api.Memory
	memory *guestMemory      // mem's allocation against the module's budget
	fuel   api.MutableGlobal // metered engines only
	closed *atomic.Bool      // the module's; the meter's tick stops a guest when set
	// deadline is the current call's deadline in Unix nanoseconds (0:
	// none), read by the meter's tick.
	deadline int64
	alloc    api.Function
	hooks    [numHooks]api.Function
	log      *guestLog
	inPtr    uint32
	inCap    uint32
	calls    int
	stack    [2]uint64
	ext      *extismState // Extism plugins only
}

// Load compiles wasm (once per distinct binary and memory limit), checks it
// against the ABI, starts PoolSize instances and configures each one. name
// identifies the module in errors, logs and stats. A refused module comes
// back as a *LoadError whose Kind names the stage that failed.
func (e *Engine) Load(ctx context.Context, name string, wasm []byte, opts ModuleOptions) (*Module, error) {
	if name == "" {
		return nil, errors.New("loading policy module: empty name")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, newLoadError(name, err)
	}
	pages := uint32(opts.MemoryMB) * 16
	rc, err := e.runtime(ctx, pages)
	if err != nil {
		return nil, newLoadError(name, err)
	}
	start := time.Now()
	if err := checkImports(wasm); err != nil {
		return nil, newLoadError(name, err)
	}
	ent, key, err := e.compile(ctx, rc, wasm)
	if err != nil {
		var se *stageError
		if !errors.As(err, &se) && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
			err = staged(ErrCompile, err)
		}
		return nil, newLoadError(name, err)
	}
	m := &Module{
		name:  name,
		eng:   e,
		rc:    rc,
		ent:   ent,
		key:   key,
		opts:  opts,
		limit: uint64(pages) * 65536,
		high:  uint32(uint64(pages) * 65536 * 3 / 4),
		free:  make(chan *instance, opts.PoolSize),
		done:  make(chan struct{}),
	}
	m.mem.limit = m.limit
	if mem, ok := ent.cm.ExportedMemories()[exportMemory]; ok {
		m.minMem = uint64(mem.Min()) * 65536
	}
	// Instances start under bgCtx's cancellation (besides their caller's
	// and their InitTimeout), which ends when the module or the engine
	// closes.
	m.bgCtx, m.bgCancel = context.WithCancel(e.ctx)
	m.modCfg = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithRandSource(rand.Reader)
	if opts.Grants.Clock {
		m.modCfg = m.modCfg.WithSysWalltime().WithSysNanotime()
	}
	compiled := time.Since(start)

	first, err := m.newInstance(ctx, true)
	if err != nil {
		m.bgCancel()
		e.release(key)
		return nil, newLoadError(name, err)
	}
	m.free <- first
	for i := 1; i < opts.PoolSize; i++ {
		inst, err := m.newInstance(ctx, false)
		if err != nil {
			for j := i; j < opts.PoolSize; j++ {
				m.free <- nil // Close drains every slot
			}
			m.Close()
			return nil, newLoadError(name, fmt.Errorf("starting instance %d: %w", i+1, err))
		}
		m.free <- inst
	}
	e.log.LogAttrs(ctx, slog.LevelInfo, "policy module loaded",
		slog.String("module", name), slog.String("digest", digestString(key.digest)),
		slog.String("hooks", m.hooks.String()), slog.Int("pool", opts.PoolSize),
		slog.Duration("compile", compiled), slog.Duration("total", time.Since(start)))
	return m, nil
}

// Name returns the name the module was loaded under.
func (m *Module) Name() string { return m.name }

// Hooks returns the hooks the module implements.
func (m *Module) Hooks() HookSet { return m.hooks }

// Stats is a snapshot of a module's counters.
type Stats struct {
	Name                string
	Digest              string // "sha256:<hex>" of the module binary
	ABIVersion          string // e.g. "1.0"
	Hooks               HookSet
	Calls               uint64 // hook calls attempted
	Failures            uint64 // hook calls that failed
	ConsecutiveFailures int64
	Healthy             bool
	Instances           int64  // live instances
	Recycled            uint64 // instances replaced (failure, age or memory)
	PeakMemory          uint64 // largest guest memory seen after a call, in bytes
	// Memory is the linear memory all the module's instances hold now,
	// MemoryHighWater the most they ever held at once, in bytes; both stay
	// within ModuleOptions.MemoryMB.
	Memory, MemoryHighWater uint64
	LastError               string
	// Shadow is set by Chain.Stats for a shadow attachment.
	Shadow bool
	// ShadowRuns counts shadow runs compared with the enforced outcome,
	// ShadowDiffs those whose outcome differed, and ShadowSkipped those
	// dropped because MaxShadowPending runs were already in flight.
	ShadowRuns, ShadowDiffs, ShadowSkipped uint64
}

// Stats returns the module's counters.
func (m *Module) Stats() Stats {
	s := Stats{
		Name:                m.name,
		Digest:              digestString(m.key.digest),
		ABIVersion:          fmt.Sprintf("%d.%d", m.abi>>16, m.abi&0xffff),
		Hooks:               m.hooks,
		Calls:               m.calls.Load(),
		Failures:            m.failures.Load(),
		ConsecutiveFailures: m.consecutive.Load(),
		Instances:           m.live.Load(),
		Recycled:            m.recycled.Load(),
		PeakMemory:          m.peakMemory.Load(),
		Memory:              m.mem.used.Load(),
		MemoryHighWater:     m.mem.peak.Load(),
		ShadowRuns:          m.shadowRuns.Load(),
		ShadowDiffs:         m.shadowDiffs.Load(),
		ShadowSkipped:       m.shadowSkipped.Load(),
	}
	s.Healthy = s.ConsecutiveFailures < int64(m.opts.FailureThreshold)
	if p := m.lastErr.Load(); p != nil {
		s.LastError = *p
	}
	return s
}

// Close stops the calls in flight and the instances being started (a
// guest still running fails with ErrClosed at its next deadline check),
// waits for them and for the module's shadow runs, closes every instance
// and releases the compiled module. It is idempotent.
func (m *Module) Close() error {
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		close(m.done)
		m.bgCancel()
		m.shadows.close()
		for range m.opts.PoolSize {
			if inst := <-m.free; inst != nil {
				m.closeInstance(inst)
			}
		}
		m.refills.Wait()
		m.eng.release(m.key)
	})
	return nil
}

// newInstance starts one instance: instantiation (the module's start
// function included), _initialize, for the first instance the version and
// hook checks, and edge_configure, all within InitTimeout and the
// module's memory budget. An instance that does not start in time is
// refused with ErrInitTimeout.
func (m *Module) newInstance(ctx context.Context, first bool) (*instance, error) {
	sctx, cancel := m.startContext(ctx)
	defer cancel()
	inst, err := m.instantiate(sctx)
	if err == nil {
		if err = m.prepare(sctx, inst, first); err != nil {
			inst.log.end()
			m.closeInstance(inst)
		}
	}
	if err != nil {
		return nil, m.startError(ctx, sctx, err)
	}
	inst.log.end()
	return inst, nil
}

// startContext bounds starting an instance: ctx, InitTimeout, and the
// module's (and so the engine's) closing.
func (m *Module) startContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.InitTimeout)
	stop := context.AfterFunc(m.bgCtx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// startError classifies a failure to start an instance: the module ran
// out of time (ErrInitTimeout), the module or engine closed (ErrClosed),
// the caller gave up (its context's error), or err as staged.
func (m *Module) startError(parent, ctx context.Context, err error) error {
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("starting an instance: %w (%w)", parent.Err(), err)
	case m.bgCtx.Err() != nil:
		return fmt.Errorf("starting an instance: %w", ErrClosed)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || pastDeadline(ctx):
		return staged(ErrInitTimeout, fmt.Errorf("instance did not start within %v: %w", m.opts.InitTimeout, err))
	}
	return err
}

// pastDeadline reports whether ctx's deadline has passed (the meter's tick
// may notice before ctx's own timer fires).
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// instantiate creates an instance, its memory charged to the module's
// budget, and runs the module's start function.
func (m *Module) instantiate(ctx context.Context) (*instance, error) {
	if !m.mem.reserve(m.minMem) {
		return nil, staged(ErrInstantiate, fmt.Errorf("%w: %d MiB cannot hold another instance of %d KiB (%d KiB in use)",
			ErrMemoryLimit, m.opts.MemoryMB, m.minMem>>10, m.mem.used.Load()>>10))
	}
	gm := &guestMemory{budget: &m.mem, prepaid: m.minMem}
	glog := newGuestLog(m.eng.log, m.name)
	cfg := m.modCfg.WithStdout(guestStream{glog, 0}).WithStderr(guestStream{glog, 1})
	mod, err := m.rc.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, gm), m.ent.cm, cfg)
	if err != nil {
		glog.end()
		gm.Free() // wazero does not close a module that failed to start
		return nil, staged(ErrInstantiate, fmt.Errorf("instantiating: %w", err))
	}
	m.live.Add(1)
	m.eng.instances.Add(1)
	inst := &instance{
		mod:    mod,
		mem:    mod.ExportedMemory(exportMemory),
		memory: gm,
		closed: &m.closed,
		alloc:  mod.ExportedFunction(exportAlloc),
		log:    glog,
	}
	if m.ent.shape.extism {
		inst.ext = newExtismState(m)
		m.eng.byModule.Store(mod, inst) // how the kernel functions find it
	}
	if m.eng.meter {
		inst.fuel, _ = mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal)
		m.eng.byModule.Store(mod, inst)
		if dl, ok := ctx.Deadline(); ok {
			inst.deadline = dl.UnixNano()
		}
	}
	return inst, nil
}

// prepare runs an instantiated module's initialisation up to and including
// edge_configure.
func (m *Module) prepare(ctx context.Context, inst *instance, first bool) error {
	mod := inst.mod
	if inst.mem == nil || (inst.alloc == nil && inst.ext == nil) {
		return staged(ErrMissingExport, errors.New("instance lacks memory or edge_alloc"))
	}
	if m.eng.meter && inst.fuel == nil {
		return errors.New("metered instance lacks its fuel global")
	}
	if m.ent.shape.initialize {
		if _, err := mod.ExportedFunction(exportInitialize).Call(ctx); err != nil {
			return staged(ErrInstantiate, fmt.Errorf("running %s: %w", exportInitialize, err))
		}
	}
	if first {
		if err := m.readABI(ctx, mod); err != nil {
			return err
		}
	}
	for h := Hook(0); h < numHooks; h++ {
		if m.hooks.Has(h) && inst.ext != nil {
			inst.hooks[h] = mod.ExportedFunction(h.String())
		} else if m.hooks.Has(h) {
			inst.hooks[h] = mod.ExportedFunction(h.export())
		}
	}
	if m.ent.shape.configure {
		return m.configure(ctx, inst)
	}
	return nil
}

// readABI reads and checks the first instance's ABI version and hooks.
func (m *Module) readABI(ctx context.Context, mod api.Module) error {
	if m.ent.shape.extism {
		// An Extism plugin has no ABI version or hook bits of ours: its
		// hooks are its exports named by hook.
		m.abi, m.hooks = uint32(ABIMajor)<<16|uint32(ABIMinor), m.ent.shape.exported
		return nil
	}
	res, err := mod.ExportedFunction(exportVersion).Call(ctx)
	if err != nil {
		return staged(ErrInstantiate, fmt.Errorf("calling %s: %w", exportVersion, err))
	}
	m.abi = uint32(res[0])
	if err := checkVersion(m.abi); err != nil {
		return err
	}
	m.hooks = m.ent.shape.exported
	if m.ent.shape.hasHooks {
		res, err := mod.ExportedFunction(exportHooks).Call(ctx)
		if err != nil {
			return staged(ErrInstantiate, fmt.Errorf("calling %s: %w", exportHooks, err))
		}
		m.hooks &= HookSet(res[0])
	}
	if m.hooks == 0 {
		return staged(ErrMissingExport, errors.New("implements no hook (edge_hooks reported none of its exported hooks)"))
	}
	return nil
}

// configure hands the instance its config, within the start deadline.
func (m *Module) configure(ctx context.Context, inst *instance) error {
	deadline, _ := ctx.Deadline()
	out, err := m.invoke(ctx, inst, inst.mod.ExportedFunction(exportConfigure), m.opts.Config, deadline)
	if err != nil {
		var ce *CallError
		if errors.As(err, &ce) && ce.Err != nil {
			kind := ce.Kind
			if kind == ErrCanceled && pastDeadline(ctx) {
				kind = ErrTimeout // ctx is the start deadline, not a caller's
			}
			err = fmt.Errorf("%w: %w", kind, ce.Err)
		}
		return staged(ErrConfigure, fmt.Errorf("configure: %w", err))
	}
	if len(out) > 0 {
		if msg, ok := guestError(out); ok {
			return staged(ErrConfigure, fmt.Errorf("configure rejected the config: %s", msg))
		}
		return staged(ErrConfigure, fmt.Errorf("configure returned unexpected output %.200q", out))
	}
	return nil
}

func (m *Module) closeInstance(inst *instance) {
	m.eng.byModule.Delete(inst.mod)
	_ = inst.mod.Close(context.Background())
	m.live.Add(-1)
	m.eng.instances.Add(-1)
}

// call runs one hook on a free instance and returns the guest's output (nil
// for "no change"), already checked to be a JSON object in valid UTF-8 that
// is not a guest error report. Failures come back as *CallError.
func (m *Module) call(ctx context.Context, hook Hook, input []byte) ([]byte, error) {
	m.calls.Add(1)
	out, err := m.doCall(ctx, hook, input)
	if err != nil {
		m.noteFailure(ctx, hook, err)
		return nil, err
	}
	m.consecutive.Store(0)
	return out, nil
}

func (m *Module) doCall(ctx context.Context, hook Hook, input []byte) ([]byte, error) {
	cerr := func(kind, detail error) error {
		return &CallError{Module: m.name, Hook: hook.String(), Kind: kind, Err: detail}
	}
	if m.closed.Load() {
		return nil, cerr(ErrClosed, nil)
	}
	if !m.hooks.Has(hook) {
		return nil, nil
	}
	if rec := m.eng.recorder; rec != nil {
		rec(Recorded{Module: m.name, Hook: hook, Input: bytes.Clone(input), Time: time.Now()})
	}
	if len(input) > m.opts.MaxInput {
		return nil, cerr(ErrInputTooLarge, fmt.Errorf("%d bytes, limit %d", len(input), m.opts.MaxInput))
	}
	if !m.admit() {
		return nil, cerr(ErrUnhealthy, fmt.Errorf("%d consecutive failures", m.consecutive.Load()))
	}
	inst, err := m.acquire(ctx)
	if err != nil {
		var ce *CallError
		if errors.As(err, &ce) {
			ce.Hook = hook.String()
		}
		return nil, err
	}
	inst.calls++
	out, err := m.invoke(ctx, inst, inst.hooks[hook], input, time.Now().Add(m.opts.Timeout))
	if err != nil {
		var ce *CallError
		if errors.As(err, &ce) {
			ce.Hook = hook.String()
		}
		m.release(inst, true)
		return nil, err
	}
	if len(out) > 0 {
		if kind, detail := validateOutput(out); kind != nil {
			// A guest error report leaves the instance healthy; garbage
			// output does not.
			m.release(inst, kind != ErrGuest)
			return nil, cerr(kind, detail)
		}
	}
	m.release(inst, false)
	return out, nil
}

// invoke writes input into the instance, calls fn and copies the output
// out, all before deadline. Any error means the instance must be
// discarded.
func (m *Module) invoke(ctx context.Context, inst *instance, fn api.Function, input []byte, deadline time.Time) ([]byte, error) {
	cerr := func(kind, detail error) error {
		return &CallError{Module: m.name, Kind: kind, Err: detail}
	}
	if inst.ext != nil {
		return m.invokeExtism(ctx, inst, fn, input, deadline)
	}
	parent := ctx
	ctx, cancel := m.callContext(ctx, inst, deadline)
	defer cancel()
	inst.log.begin()
	defer inst.log.end()
	n := uint32(len(input))
	if inst.inCap == 0 || n > inst.inCap {
		want := max((n+4095)&^4095, 4096)
		inst.stack[0] = uint64(want)
		if err := inst.alloc.CallWithStack(ctx, inst.stack[:]); err != nil {
			return nil, cerr(m.classify(parent, ctx, inst, err), fmt.Errorf("%s: %w", exportAlloc, err))
		}
		ptr := uint32(inst.stack[0])
		if ptr == 0 || uint64(ptr)+uint64(want) > uint64(inst.mem.Size()) {
			return nil, cerr(ErrBadOutput, fmt.Errorf("%s(%d) returned out-of-bounds pointer %#x (memory is %d bytes)", exportAlloc, want, ptr, inst.mem.Size()))
		}
		inst.inPtr, inst.inCap = ptr, want
	}
	if n > 0 && !inst.mem.Write(inst.inPtr, input) {
		return nil, cerr(ErrBadOutput, errors.New("input buffer out of bounds"))
	}
	inst.stack[0], inst.stack[1] = uint64(inst.inPtr), uint64(n)
	if err := fn.CallWithStack(ctx, inst.stack[:]); err != nil {
		return nil, cerr(m.classify(parent, ctx, inst, err), err)
	}
	res := inst.stack[0]
	ptr, size := uint32(res>>32), uint32(res)
	if size == 0 {
		return nil, nil
	}
	if int64(size) > int64(m.opts.MaxOutput) {
		return nil, cerr(ErrOutputTooLarge, fmt.Errorf("%d bytes, limit %d", size, m.opts.MaxOutput))
	}
	buf, ok := inst.mem.Read(ptr, size)
	if !ok {
		return nil, cerr(ErrBadOutput, fmt.Errorf("output [%#x, +%d) is outside guest memory (%d bytes)", ptr, size, inst.mem.Size()))
	}
	return bytes.Clone(buf), nil
}

// callContext sets up a call's deadline: the meter's tick checks it (and
// ctx and the module's closing) on metered engines; otherwise wazero
// closes the instance when the returned context ends, at the deadline or
// when the module closes.
func (m *Module) callContext(ctx context.Context, inst *instance, deadline time.Time) (context.Context, context.CancelFunc) {
	if m.eng.meter {
		inst.deadline = deadline.UnixNano()
		return ctx, func() {}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	stop := context.AfterFunc(m.bgCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// classify maps a wazero call error to one of the sentinel kinds. parent
// is the caller's context, ctx the one carrying the module's deadline.
func (m *Module) classify(parent, ctx context.Context, inst *instance, err error) error {
	if parent.Err() != nil {
		return ErrCanceled // the caller gave up (or its own deadline passed)
	}
	if m.closed.Load() {
		return ErrClosed
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return ErrTimeout
		case sys.ExitCodeContextCanceled:
			return ErrCanceled
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || (inst.deadline != 0 && time.Now().UnixNano() > inst.deadline) {
		return ErrTimeout
	}
	if inst.log.sawOOM() || inst.memory.refused.Load() || uint64(inst.mem.Size()) >= m.limit*9/10 {
		return ErrMemoryLimit
	}
	return ErrTrap
}

// guestError recognises the {"error":"..."} report of a valid JSON object.
func guestError(out []byte) (string, bool) {
	var msg string
	found := false
	_ = jsonx.Members(out, func(k, v []byte) error {
		if jsonx.KeyIs(k, "error") {
			found = true
			if s, err := jsonx.Unquote(v); err == nil {
				msg = s
			} else {
				msg = string(v)
			}
			return errStop
		}
		return nil
	})
	if found && msg == "" {
		msg = "unspecified error"
	}
	return msg, found
}

var errStop = errors.New("stop")

func (m *Module) admit() bool {
	if m.consecutive.Load() < int64(m.opts.FailureThreshold) {
		return true
	}
	now := time.Now().UnixNano()
	last := m.lastProbe.Load()
	return now-last >= int64(probeInterval) && m.lastProbe.CompareAndSwap(last, now)
}

func (m *Module) noteFailure(ctx context.Context, hook Hook, err error) {
	if errors.Is(err, ErrCanceled) || errors.Is(err, ErrClosed) {
		return // the caller went away; says nothing about the module
	}
	m.failures.Add(1)
	msg := err.Error()
	m.lastErr.Store(&msg)
	if errors.Is(err, ErrUnhealthy) || errors.Is(err, ErrBusy) {
		return
	}
	if n := m.consecutive.Add(1); n == int64(m.opts.FailureThreshold) {
		m.lastProbe.Store(time.Now().UnixNano())
		m.eng.log.LogAttrs(ctx, slog.LevelError, "policy module marked unhealthy",
			slog.String("module", m.name), slog.Int64("consecutive_failures", n), slog.String("error", msg))
		return
	}
	m.eng.log.LogAttrs(ctx, slog.LevelWarn, "policy module call failed",
		slog.String("module", m.name), slog.String("hook", hook.String()), slog.String("error", msg))
}

// acquire takes an instance from the pool, waiting at most MaxWait, and
// starts a fresh one when it gets an empty slot.
func (m *Module) acquire(ctx context.Context) (*instance, error) {
	var inst *instance
	select {
	case inst = <-m.free:
	default:
		t := time.NewTimer(m.opts.MaxWait)
		select {
		case inst = <-m.free:
			t.Stop()
		case <-t.C:
			return nil, &CallError{Module: m.name, Kind: ErrBusy, Err: fmt.Errorf("no free instance within %v (pool size %d)", m.opts.MaxWait, m.opts.PoolSize)}
		case <-ctx.Done():
			t.Stop()
			return nil, &CallError{Module: m.name, Kind: ErrCanceled, Err: ctx.Err()}
		case <-m.done:
			t.Stop()
			return nil, &CallError{Module: m.name, Kind: ErrClosed}
		}
	}
	if m.closed.Load() {
		m.free <- inst
		return nil, &CallError{Module: m.name, Kind: ErrClosed}
	}
	if inst == nil {
		fresh, err := m.newInstance(ctx, false)
		if err != nil {
			m.free <- nil
			return nil, &CallError{Module: m.name, Kind: replaceErrorKind(err), Err: fmt.Errorf("replacing instance: %w", err)}
		}
		inst = fresh
	}
	return inst, nil
}

// replaceErrorKind classifies a failure to start an instance on the call
// path.
func replaceErrorKind(err error) error {
	for _, kind := range []error{ErrClosed, ErrMemoryLimit} {
		if errors.Is(err, kind) {
			return kind
		}
	}
	switch {
	case errors.Is(err, ErrInitTimeout):
		return ErrTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ErrCanceled
	}
	return ErrTrap
}

// release returns an instance to the pool, or replaces it (in the
// background) when it failed, is old, or holds too much memory.
func (m *Module) release(inst *instance, failed bool) {
	size := inst.mem.Size()
	for {
		peak := m.peakMemory.Load()
		if uint64(size) <= peak || m.peakMemory.CompareAndSwap(peak, uint64(size)) {
			break
		}
	}
	recycle := failed ||
		(m.opts.RecycleAfterCalls > 0 && inst.calls >= m.opts.RecycleAfterCalls) ||
		size > m.high
	if !recycle {
		m.free <- inst
		return
	}
	m.closeInstance(inst)
	m.recycled.Add(1)
	if m.closed.Load() {
		m.free <- nil
		return
	}
	m.refills.Add(1)
	go m.refill()
}

func (m *Module) refill() {
	defer m.refills.Done()
	if m.closed.Load() {
		m.free <- nil
		return
	}
	inst, err := m.newInstance(m.bgCtx, false)
	if err != nil {
		if !m.closed.Load() {
			m.eng.log.LogAttrs(context.Background(), slog.LevelWarn, "policy module instance restart failed",
				slog.String("module", m.name), slog.String("error", err.Error()))
		}
		m.free <- nil
		return
	}
	m.free <- inst
}
