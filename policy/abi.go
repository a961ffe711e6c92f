package policy

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edge-mcp/edge-mcp/guest/abi"
	"github.com/edge-mcp/edge-mcp/policy/internal/meter"
)

// The policy ABI version this host implements (see ABI.md). A module is
// accepted when its major version equals ABIMajor and its minor version is
// not newer than ABIMinor. The names and numbers of the ABI are defined once,
// in package guest/abi, which the guest SDK uses too.
const (
	ABIMajor = abi.Major
	ABIMinor = abi.Minor
)

// Hook names one of the points at which a module can act.
type Hook uint8

// The hooks of ABI 1.0 and the interceptor hooks of ABI 1.1, in bit order
// of edge_hooks.
const (
	HookToolsList      Hook = abi.HookToolsList
	HookToolCall       Hook = abi.HookToolCall
	HookToolResult     Hook = abi.HookToolResult
	HookResourceResult Hook = abi.HookResourceResult
	HookPromptResult   Hook = abi.HookPromptResult
	HookEvent          Hook = abi.HookEvent
	HookInterceptors   Hook = abi.HookInterceptors
	HookIntercept      Hook = abi.HookIntercept
	numHooks           Hook = abi.NumHooks
)

var hookNames = func() (names [numHooks]string) {
	for h := range names {
		names[h] = abi.HookName(h)
	}
	return names
}()

// String returns the hook's ABI name, e.g. "tool_call".
func (h Hook) String() string {
	if h < numHooks {
		return hookNames[h]
	}
	return fmt.Sprintf("hook(%d)", uint8(h))
}

func (h Hook) export() string { return abi.HookExport(int(h)) }

// ParseHook parses a hook's ABI name, e.g. "tool_call".
func ParseHook(s string) (Hook, error) {
	for h := Hook(0); h < numHooks; h++ {
		if hookNames[h] == s {
			return h, nil
		}
	}
	return 0, fmt.Errorf("unknown hook %q (want one of %s)", s, strings.Join(hookNames[:], ", "))
}

// HookSet is a bit set of hooks, as returned by edge_hooks.
type HookSet uint32

// Has reports whether h is in the set.
func (s HookSet) Has(h Hook) bool { return s&(1<<h) != 0 }

// String lists the hooks in the set, e.g. "tool_call,tool_result".
func (s HookSet) String() string {
	var names []string
	for h := Hook(0); h < numHooks; h++ {
		if s.Has(h) {
			names = append(names, h.String())
		}
	}
	return strings.Join(names, ",")
}

// Export names of the ABI.
const (
	exportMemory     = abi.ExportMemory
	exportVersion    = abi.ExportVersion
	exportHooks      = abi.ExportHooks
	exportAlloc      = abi.ExportAlloc
	exportConfigure  = abi.ExportConfigure
	exportInitialize = abi.ExportInitialize
	exportStart      = abi.ExportStart
)

const i32, i64 = api.ValueTypeI32, api.ValueTypeI64

type signature struct{ params, results []api.ValueType }

var (
	sigVersion  = signature{nil, []api.ValueType{i32}}
	sigAlloc    = signature{[]api.ValueType{i32}, []api.ValueType{i32}}
	sigBuffer   = signature{[]api.ValueType{i32, i32}, []api.ValueType{i64}}
	sigNullary  = signature{nil, nil}
	allowedWASI = map[string]bool{
		// What a Go, Rust or C guest pulls in for its runtime. With no
		// preopened directories, no sockets, no arguments and no environment
		// (see ModuleConfig in module.go) none of these reaches the host's
		// files or network.
		"args_get": true, "args_sizes_get": true,
		"environ_get": true, "environ_sizes_get": true,
		"clock_res_get": true, "clock_time_get": true,
		"fd_write": true, "fd_close": true, "fd_fdstat_get": true, "fd_fdstat_set_flags": true,
		"fd_prestat_get": true, "fd_prestat_dir_name": true, "fd_read": true, "fd_seek": true,
		"poll_oneoff": true, "proc_exit": true, "random_get": true, "sched_yield": true,
	}
)

func (s signature) String() string {
	return fmt.Sprintf("(%s) -> (%s)", typeList(s.params), typeList(s.results))
}

func typeList(ts []api.ValueType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return strings.Join(names, ", ")
}

func (s signature) matches(def api.FunctionDefinition) bool {
	return equalTypes(def.ParamTypes(), s.params) && equalTypes(def.ResultTypes(), s.results)
}

func equalTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// moduleShape is what checkShape learns from a compiled module's imports
// and exports.
type moduleShape struct {
	exported   HookSet // hooks with an edge_hook_* export
	hasHooks   bool    // edge_hooks is exported
	configure  bool
	initialize bool
	extism     bool // an Extism plugin (imports extism:host/env)
}

// checkShape validates a compiled module against the ABI without running
// it: imports must be WASI preview1 functions from the allow list, and the
// mandatory exports must exist with the right signatures.
func checkShape(cm wazero.CompiledModule, metered bool) (moduleShape, error) {
	var shape moduleShape
	for _, f := range cm.ImportedFunctions() {
		if mod, _, _ := f.Import(); mod == extismModule {
			shape.extism = true
		}
	}
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if metered && mod == meter.ImportModule && name == meter.ImportName {
			continue // added by the engine (see internal/meter)
		}
		if mod == extismModule {
			if err := checkExtismImport(name, f); err != nil {
				return shape, err
			}
			continue
		}
		if err := checkImport(mod, name, importFunc); err != nil {
			return shape, err
		}
	}
	for _, m := range cm.ImportedMemories() {
		mod, name, _ := m.Import()
		return shape, checkImport(mod, name, importMemory)
	}
	if shape.extism {
		return checkExtismShape(cm)
	}
	if _, ok := cm.ExportedMemories()[exportMemory]; !ok {
		return shape, staged(ErrMissingExport, fmt.Errorf("does not export its memory as %q", exportMemory))
	}
	fns := cm.ExportedFunctions()
	need := func(name string, sig signature) error {
		def, ok := fns[name]
		if !ok {
			return staged(ErrMissingExport, fmt.Errorf("does not export %s %s: not a policy module for ABI %d", name, sig, ABIMajor))
		}
		if !sig.matches(def) {
			return staged(ErrMissingExport, fmt.Errorf("exports %s with signature %s, want %s", name, signature{def.ParamTypes(), def.ResultTypes()}, sig))
		}
		return nil
	}
	if err := need(exportVersion, sigVersion); err != nil {
		return shape, err
	}
	if err := need(exportAlloc, sigAlloc); err != nil {
		return shape, err
	}
	if _, ok := fns[exportStart]; ok {
		if _, ok := fns[exportInitialize]; !ok {
			return shape, staged(ErrMissingExport, fmt.Errorf("exports %s (a WASI command); build it as a reactor (Go: -buildmode=c-shared)", exportStart))
		}
	}
	if _, ok := fns[exportInitialize]; ok {
		if err := need(exportInitialize, sigNullary); err != nil {
			return shape, err
		}
		shape.initialize = true
	}
	if _, ok := fns[exportHooks]; ok {
		if err := need(exportHooks, sigVersion); err != nil {
			return shape, err
		}
		shape.hasHooks = true
	}
	if _, ok := fns[exportConfigure]; ok {
		if err := need(exportConfigure, sigBuffer); err != nil {
			return shape, err
		}
		shape.configure = true
	}
	for h := Hook(0); h < numHooks; h++ {
		if _, ok := fns[h.export()]; ok {
			if err := need(h.export(), sigBuffer); err != nil {
				return shape, err
			}
			shape.exported |= 1 << h
		}
	}
	if shape.exported == 0 {
		return shape, staged(ErrMissingExport, errors.New("exports no hook (edge_hook_tools_list, edge_hook_tool_call, ...)"))
	}
	return shape, nil
}

func allowedList() string {
	names := make([]string, 0, len(allowedWASI))
	for n := range allowedWASI {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// checkVersion validates the value returned by edge_abi_version.
func checkVersion(v uint32) error {
	major, minor := v>>16, v&0xffff
	if major != ABIMajor {
		return staged(ErrABIVersion, fmt.Errorf("speaks policy ABI %d.%d; this gateway supports ABI %d.%d (major versions must match)", major, minor, ABIMajor, ABIMinor))
	}
	if minor > ABIMinor {
		return staged(ErrABIVersion, fmt.Errorf("speaks policy ABI %d.%d, newer than this gateway's %d.%d; upgrade the gateway or rebuild the module with an older SDK", major, minor, ABIMajor, ABIMinor))
	}
	return nil
}

// Import kinds of the WebAssembly binary format.
const (
	importFunc   byte = 0x00
	importTable  byte = 0x01
	importMemory byte = 0x02
	importGlobal byte = 0x03
)

// checkImport reports whether a policy module may import mod.name: only the
// allowed WASI preview1 functions. The error names the import.
func checkImport(mod, name string, kind byte) error {
	switch {
	case kind == importMemory:
		return staged(ErrForbiddenImport, fmt.Errorf("imports memory %s.%s; a policy module must define and export its own memory", mod, name))
	case kind == importFunc && mod == extismModule:
		return checkExtismImport(name, nil)
	case kind != importFunc:
		return staged(ErrForbiddenImport, fmt.Errorf("imports %s.%s (a table or global), which policy modules may not import", mod, name))
	case mod != wasi_snapshot_preview1.ModuleName || !allowedWASI[name]:
		return staged(ErrForbiddenImport, fmt.Errorf("imports %s.%s, which policy modules may not import (allowed: %s functions %s)",
			mod, name, wasi_snapshot_preview1.ModuleName, allowedList()))
	}
	return nil
}

// checkImports scans the import section of a WebAssembly binary and checks
// every import with checkImport, before the engine rewrites or compiles the
// module (the rewrite refuses the host's own import module with a less
// helpful message). A binary it cannot parse passes: the compiler reports
// what is wrong with it.
func checkImports(wasm []byte) error {
	if !bytes.HasPrefix(wasm, wasmMagic) {
		return nil
	}
	r := wasmReader{b: wasm, off: len(wasmMagic)}
	for r.ok() && r.off < len(r.b) {
		id := r.byte()
		size := r.u32()
		payload := r.bytes(size)
		if !r.ok() {
			return nil
		}
		if id != 2 { // import section
			continue
		}
		p := wasmReader{b: payload}
		for n := p.u32(); p.ok() && n > 0; n-- {
			mod := string(p.bytes(p.u32()))
			name := string(p.bytes(p.u32()))
			kind := p.byte()
			switch kind {
			case importFunc:
				p.u32()
			case importTable:
				p.byte()
				p.limits()
			case importMemory:
				p.limits()
			case importGlobal:
				p.bytes(2)
			default:
				return nil
			}
			if !p.ok() {
				return nil
			}
			if err := checkImport(mod, name, kind); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// wasmReader reads the WebAssembly binary format; after the first error
// every read returns zero values and ok reports false.
type wasmReader struct {
	b   []byte
	off int
	bad bool
}

func (r *wasmReader) ok() bool { return !r.bad }

func (r *wasmReader) byte() byte {
	if r.bad || r.off >= len(r.b) {
		r.bad = true
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *wasmReader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.bad {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.bad = true
	return 0
}

func (r *wasmReader) bytes(n uint32) []byte {
	if r.bad || uint64(n) > uint64(len(r.b)-r.off) {
		r.bad = true
		return nil
	}
	r.off += int(n)
	return r.b[r.off-int(n) : r.off]
}

func (r *wasmReader) limits() {
	if flag := r.byte(); flag&1 != 0 {
		r.u32()
	}
	r.u32()
}
