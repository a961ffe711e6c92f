package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/edge-mcp/edge-mcp/policy/internal/jsonx"
)

// The Extism adapter: a module importing extism:host/env is an Extism
// plugin. Its exports named by hook (tool_call, tool_result, ...; () -> i32)
// run the hooks; the host implements the Extism kernel natively on the
// same engine, so a plugin runs under the same deadline, fuel, memory and
// pool as every module. See policy/ABI.md, "Extism plugins".

// extismModule is the import module of the Extism kernel functions.
const extismModule = "extism:host/env"

// defaultMaxVarBytes bounds a plugin instance's vars (keys and values
// together) when ModuleOptions.MaxVarBytes is zero.
const defaultMaxVarBytes = 64 << 10

// extismFuncs are the kernel functions the adapter provides, with their
// Extism signatures.
var extismFuncs = map[string]signature{
	"input_length":     {nil, []api.ValueType{i64}},
	"input_load_u8":    {[]api.ValueType{i64}, []api.ValueType{i32}},
	"input_load_u64":   {[]api.ValueType{i64}, []api.ValueType{i64}},
	"length":           {[]api.ValueType{i64}, []api.ValueType{i64}},
	"length_unsafe":    {[]api.ValueType{i64}, []api.ValueType{i64}},
	"alloc":            {[]api.ValueType{i64}, []api.ValueType{i64}},
	"free":             {[]api.ValueType{i64}, nil},
	"load_u8":          {[]api.ValueType{i64}, []api.ValueType{i32}},
	"load_u64":         {[]api.ValueType{i64}, []api.ValueType{i64}},
	"store_u8":         {[]api.ValueType{i64, i32}, nil},
	"store_u64":        {[]api.ValueType{i64, i64}, nil},
	"output_set":       {[]api.ValueType{i64, i64}, nil},
	"error_set":        {[]api.ValueType{i64}, nil},
	"config_get":       {[]api.ValueType{i64}, []api.ValueType{i64}},
	"var_get":          {[]api.ValueType{i64}, []api.ValueType{i64}},
	"var_set":          {[]api.ValueType{i64, i64}, nil},
	"http_request":     {[]api.ValueType{i64, i64}, []api.ValueType{i64}},
	"http_status_code": {nil, []api.ValueType{i32}},
	"log_trace":        {[]api.ValueType{i64}, nil},
	"log_debug":        {[]api.ValueType{i64}, nil},
	"log_info":         {[]api.ValueType{i64}, nil},
	"log_warn":         {[]api.ValueType{i64}, nil},
	"log_error":        {[]api.ValueType{i64}, nil},
	"get_log_level":    {nil, []api.ValueType{i32}},
}

func extismList() string {
	names := make([]string, 0, len(extismFuncs))
	for n := range extismFuncs {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// checkExtismImport checks one import of extism:host/env: a function the
// adapter provides, with its signature when sig is not nil.
func checkExtismImport(name string, def api.FunctionDefinition) error {
	want, ok := extismFuncs[name]
	if !ok {
		return staged(ErrForbiddenImport, fmt.Errorf("imports %s.%s, which the Extism adapter does not provide (provided: %s)", extismModule, name, extismList()))
	}
	if def != nil && !want.matches(def) {
		return staged(ErrForbiddenImport, fmt.Errorf("imports %s.%s with signature %s, want %s", extismModule, name, signature{def.ParamTypes(), def.ResultTypes()}, want))
	}
	return nil
}

// checkExtismShape validates an Extism plugin's exports: its memory and at
// least one hook export named by the hook, () -> i32.
func checkExtismShape(cm wazero.CompiledModule) (moduleShape, error) {
	shape := moduleShape{extism: true}
	if _, ok := cm.ExportedMemories()[exportMemory]; !ok {
		return shape, staged(ErrMissingExport, fmt.Errorf("Extism plugin does not export its memory as %q", exportMemory))
	}
	fns := cm.ExportedFunctions()
	sigHook := signature{nil, []api.ValueType{i32}}
	for h := Hook(0); h < numHooks; h++ {
		def, ok := fns[h.String()]
		if !ok {
			continue
		}
		if !sigHook.matches(def) {
			return shape, staged(ErrMissingExport, fmt.Errorf("Extism plugin exports %s with signature %s, want %s", h, signature{def.ParamTypes(), def.ResultTypes()}, sigHook))
		}
		shape.exported |= 1 << h
	}
	if def, ok := fns[exportInitialize]; ok {
		if !sigNullary.matches(def) {
			return shape, staged(ErrMissingExport, fmt.Errorf("exports %s with signature %s, want %s", exportInitialize, signature{def.ParamTypes(), def.ResultTypes()}, sigNullary))
		}
		shape.initialize = true
	}
	if shape.exported == 0 {
		return shape, staged(ErrMissingExport, errors.New("Extism plugin exports no hook (functions named tools_list, tool_call, tool_result, ...)"))
	}
	return shape, nil
}

// extismState is one plugin instance's kernel: a memory of blocks
// addressed by offset (0 is no block), the current call's input, output
// and error, and the vars that live as long as the instance.
type extismState struct {
	mem      []byte            // offsets index mem; mem[0] is never allocated
	blocks   map[uint64]uint64 // block offset -> length
	maxMem   int
	input    []byte
	output   []byte
	errMsg   string
	hasErr   bool
	vars     map[string][]byte
	varBytes int
	maxVars  int
	config   map[string][]byte
	log      *slog.Logger
	module   string
	fault    error // the first refused or failed kernel call of this call
	kind     error // its sentinel: ErrForbiddenCall unless fail said
	hosts    []string
	client   *http.Client // nil without allowed hosts
	deadline time.Time    // the current call's
	status   int          // of the last http_request
}

func newExtismState(m *Module) *extismState {
	s := &extismState{
		mem:     make([]byte, 1, 4096),
		blocks:  map[uint64]uint64{},
		maxMem:  m.opts.MaxInput + m.opts.MaxOutput,
		vars:    map[string][]byte{},
		maxVars: m.opts.MaxVarBytes,
		config:  extismConfig(m.opts.Config),
		log:     m.eng.log,
		module:  m.name,
		hosts:   m.opts.Grants.AllowedHosts,
	}
	if len(s.hosts) > 0 {
		s.client = httpClient(s.hosts)
	}
	return s
}

// extismConfig maps the module's JSON config object to Extism's string
// config: a string member's value unquoted, any other its JSON text.
func extismConfig(cfg []byte) map[string][]byte {
	out := map[string][]byte{}
	_ = jsonx.Members(cfg, func(k, v []byte) error {
		key, err := jsonx.Unquote(k)
		if err != nil {
			return nil
		}
		if s, err := jsonx.Unquote(v); err == nil {
			out[key] = []byte(s)
		} else {
			out[key] = append([]byte(nil), v...)
		}
		return nil
	})
	return out
}

// begin resets the kernel memory and the output for a call on input.
func (s *extismState) begin(input []byte) {
	s.mem = s.mem[:1]
	if cap(s.mem) > 64<<10 {
		s.mem = make([]byte, 1, 4096) // an idle instance keeps little
	}
	clear(s.blocks)
	s.input, s.output, s.errMsg, s.hasErr, s.fault, s.kind, s.status = input, nil, "", false, nil, nil, 0
}

// refuse records a refused kernel call and stops the guest.
func (s *extismState) refuse(name, format string, args ...any) {
	s.fail(ErrForbiddenCall, fmt.Errorf("%s.%s: %s", extismModule, name, fmt.Sprintf(format, args...)))
}

// fail records a kernel call that failed (kind: the call's sentinel) and
// stops the guest.
func (s *extismState) fail(kind, err error) {
	if s.fault == nil {
		s.fault, s.kind = err, kind
	}
	panic(err)
}

func (s *extismState) alloc(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	if n > uint64(s.maxMem) || len(s.mem)+int(n) > s.maxMem {
		s.refuse("alloc", "%d bytes would pass the plugin's kernel memory limit of %d bytes", n, s.maxMem)
	}
	off := uint64(len(s.mem))
	s.mem = append(s.mem, make([]byte, n)...)
	s.blocks[off] = n
	return off
}

func (s *extismState) block(name string, off uint64) []byte {
	n, ok := s.blocks[off]
	if !ok {
		s.refuse(name, "%#x is not the start of an allocated block", off)
	}
	return s.mem[off : off+n]
}

func (s *extismState) at(name string, off, n uint64) []byte {
	if off == 0 || off+n > uint64(len(s.mem)) || off+n < off {
		s.refuse(name, "offset %#x (+%d) is outside the kernel memory (%d bytes)", off, n, len(s.mem))
	}
	return s.mem[off : off+n]
}

func (s *extismState) bytesAlloc(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	off := s.alloc(uint64(len(b)))
	copy(s.mem[off:], b)
	return off
}

func (s *extismState) varSet(k, v uint64) {
	key := string(s.block("var_set", k))
	old := s.vars[key]
	size := s.varBytes - len(old)
	if old != nil {
		size -= len(key)
	}
	if v == 0 {
		delete(s.vars, key)
		s.varBytes = size
		return
	}
	val := s.block("var_set", v)
	if size+len(key)+len(val) > s.maxVars {
		s.refuse("var_set", "var %q of %d bytes would pass the plugin's var limit of %d bytes (max_var_bytes)", key, len(val), s.maxVars)
	}
	s.vars[key] = append([]byte(nil), val...)
	s.varBytes = size + len(key) + len(val)
}

func (s *extismState) logAt(name string, level slog.Level, off uint64) {
	msg := s.block(name, off)
	s.log.LogAttrs(context.Background(), level, "policy module log",
		slog.String("module", s.module), slog.String("msg", string(msg)))
}

// extismHost builds the kernel's host module into rt; each function finds
// its instance's state through the engine.
func (e *Engine) extismHost(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(extismModule)
	for name, sig := range extismFuncs {
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
				e.extismCall(ctx, name, mod, stack)
			}), sig.params, sig.results).
			Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

func (e *Engine) extismCall(ctx context.Context, name string, mod api.Module, stack []uint64) {
	v, ok := e.byModule.Load(mod)
	if !ok || v.(*instance).ext == nil {
		panic(fmt.Errorf("%s.%s: called outside an Extism plugin's hook", extismModule, name))
	}
	s := v.(*instance).ext
	switch name {
	case "input_length":
		stack[0] = uint64(len(s.input))
	case "input_load_u8":
		off := stack[0]
		if off >= uint64(len(s.input)) {
			s.refuse(name, "offset %d is outside the input (%d bytes)", off, len(s.input))
		}
		stack[0] = uint64(s.input[off])
	case "input_load_u64":
		off := stack[0]
		if off+8 > uint64(len(s.input)) || off+8 < off {
			s.refuse(name, "offset %d (+8) is outside the input (%d bytes)", off, len(s.input))
		}
		stack[0] = leU64(s.input[off:])
	case "length", "length_unsafe":
		stack[0] = s.blocks[stack[0]]
	case "alloc":
		stack[0] = s.alloc(stack[0])
	case "free":
		delete(s.blocks, stack[0]) // the memory returns at the next call
	case "load_u8":
		stack[0] = uint64(s.at(name, stack[0], 1)[0])
	case "load_u64":
		stack[0] = leU64(s.at(name, stack[0], 8))
	case "store_u8":
		s.at(name, stack[0], 1)[0] = byte(stack[1])
	case "store_u64":
		putLeU64(s.at(name, stack[0], 8), stack[1])
	case "output_set":
		s.output = s.at(name, stack[0], stack[1])
	case "error_set":
		s.errMsg, s.hasErr = string(s.block(name, stack[0])), true
	case "config_get":
		v, ok := s.config[string(s.block(name, stack[0]))]
		stack[0] = 0
		if ok {
			stack[0] = s.bytesAlloc(v)
		}
	case "var_get":
		stack[0] = s.bytesAlloc(s.vars[string(s.block(name, stack[0]))])
	case "var_set":
		s.varSet(stack[0], stack[1])
	case "http_request":
		stack[0] = s.httpRequest(ctx, stack[0], stack[1])
	case "http_status_code":
		if len(s.hosts) == 0 {
			s.refuse(name, "the plugin may not reach outside: no allowed_hosts are configured for it")
		}
		stack[0] = uint64(s.status)
	case "log_trace", "log_debug":
		s.logAt(name, slog.LevelDebug, stack[0])
	case "log_info":
		s.logAt(name, slog.LevelInfo, stack[0])
	case "log_warn":
		s.logAt(name, slog.LevelWarn, stack[0])
	case "log_error":
		s.logAt(name, slog.LevelError, stack[0])
	case "get_log_level":
		stack[0] = 0 // trace: the gateway's logger filters
	}
}

func leU64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func putLeU64(b []byte, v uint64) {
	_ = b[7]
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

// invokeExtism runs a plugin's hook export on input, before deadline, and
// returns its output (nil for none).
func (m *Module) invokeExtism(ctx context.Context, inst *instance, fn api.Function, input []byte, deadline time.Time) ([]byte, error) {
	cerr := func(kind, detail error) error {
		return &CallError{Module: m.name, Kind: kind, Err: detail}
	}
	parent := ctx
	ctx, cancel := m.callContext(ctx, inst, deadline)
	defer cancel()
	inst.log.begin()
	defer inst.log.end()
	s := inst.ext
	s.begin(input)
	s.deadline = deadline
	defer s.begin(nil)
	err := fn.CallWithStack(ctx, inst.stack[:])
	if s.fault != nil {
		return nil, cerr(s.kind, s.fault)
	}
	if err != nil {
		return nil, cerr(m.classify(parent, ctx, inst, err), err)
	}
	if rc := int32(inst.stack[0]); rc != 0 {
		msg := s.errMsg
		if !s.hasErr {
			msg = fmt.Sprintf("returned %d without an error message", rc)
		}
		return nil, cerr(ErrGuest, errors.New(msg))
	}
	if len(s.output) == 0 {
		return nil, nil
	}
	if len(s.output) > m.opts.MaxOutput {
		return nil, cerr(ErrOutputTooLarge, fmt.Errorf("%d bytes, limit %d", len(s.output), m.opts.MaxOutput))
	}
	return append([]byte(nil), s.output...), nil
}
