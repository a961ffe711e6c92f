package wasmtest

import "sort"

// This file is a tiny WebAssembly binary encoder: enough to hand-assemble
// the small, non-Go modules the tests need (a deny-all policy proving the
// ABI is language-neutral, and hostile modules that trap, loop, lie about
// pointers or import what they must not). It writes the binary format of
// the WebAssembly 1.0 core specification, section by section.

// Value types.
const (
	I32 byte = 0x7f
	I64 byte = 0x7e
)

// Instruction opcodes used by the tests.
const (
	OpUnreachable   byte = 0x00
	OpBlock         byte = 0x02
	OpLoop          byte = 0x03
	OpBr            byte = 0x0c
	OpBrIf          byte = 0x0d
	OpEnd           byte = 0x0b
	OpDrop          byte = 0x1a
	OpCall          byte = 0x10
	OpCallIndirect  byte = 0x11
	OpGlobalGet     byte = 0x23
	OpGlobalSet     byte = 0x24
	OpI32Sub        byte = 0x6b
	OpLocalGet      byte = 0x20
	OpLocalSet      byte = 0x21
	OpI32Const      byte = 0x41
	OpI64Const      byte = 0x42
	OpI32Eqz        byte = 0x45
	OpI32LtS        byte = 0x48
	OpI32Add        byte = 0x6a
	OpI64Or         byte = 0x84
	OpI64Shl        byte = 0x86
	OpI64ExtendI32U byte = 0xad
	OpMemoryGrow    byte = 0x40
	OpBlockTypeVoid byte = 0x40
)

// Func is a function of an assembled module.
type Func struct {
	Params, Results []byte
	Locals          []byte // one value type per local
	Body            []byte // instructions, without the final end
	Export          string // export name; empty for none
}

// Import is an imported function.
type Import struct {
	Module, Name    string
	Params, Results []byte
}

// Data is an active data segment of memory 0.
type Data struct {
	Offset uint32
	Bytes  []byte
}

// Global is a defined i32 global.
type Global struct {
	Mutable bool
	Init    int32
	Export  string // export name; empty for none
}

// Assembler describes a module. Imported functions take the first function
// indices, in order, followed by Funcs.
type Assembler struct {
	Imports []Import
	Funcs   []Func
	// MemoryPages is the initial size of memory 0, exported as "memory";
	// zero means no memory.
	MemoryPages uint32
	Data        []Data
	Globals     []Global
	// Table lists the function indices of a funcref table, installed by an
	// active element segment at offset 0 (for call_indirect).
	Table []uint32
	// Start is the index of the start function, if HasStart.
	Start    uint32
	HasStart bool
}

// Bytes encodes the module.
func (a *Assembler) Bytes() []byte {
	out := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	types, importTypes, funcTypes := a.types()
	out = section(out, 1, vec(len(types), func(b []byte, i int) []byte { return append(b, types[i]...) }))
	if len(a.Imports) > 0 {
		out = section(out, 2, vec(len(a.Imports), func(b []byte, i int) []byte {
			b = appendName(b, a.Imports[i].Module)
			b = appendName(b, a.Imports[i].Name)
			b = append(b, 0x00)
			return AppendU32(b, importTypes[i])
		}))
	}
	out = section(out, 3, vec(len(a.Funcs), func(b []byte, i int) []byte { return AppendU32(b, funcTypes[i]) }))
	if len(a.Table) > 0 {
		out = section(out, 4, vec(1, func(b []byte, _ int) []byte {
			return AppendU32(append(b, 0x70, 0x00), uint32(len(a.Table)))
		}))
	}
	if a.MemoryPages > 0 {
		out = section(out, 5, vec(1, func(b []byte, _ int) []byte {
			return AppendU32(append(b, 0x00), a.MemoryPages)
		}))
	}
	if len(a.Globals) > 0 {
		out = section(out, 6, vec(len(a.Globals), a.appendGlobal))
	}
	out = section(out, 7, a.exports())
	if a.HasStart {
		out = section(out, 8, AppendU32(nil, a.Start))
	}
	if len(a.Table) > 0 {
		out = section(out, 9, vec(1, a.appendElements))
	}
	out = section(out, 10, vec(len(a.Funcs), a.appendCode))
	if len(a.Data) > 0 {
		out = section(out, 11, vec(len(a.Data), a.appendData))
	}
	return out
}

// types returns the type section's function types, one per distinct
// signature, and the type index of each import and function.
func (a *Assembler) types() (types [][]byte, importTypes, funcTypes []uint32) {
	typeOf := func(params, results []byte) uint32 {
		t := []byte{0x60}
		t = appendVec(t, params)
		t = appendVec(t, results)
		for i, old := range types {
			if string(old) == string(t) {
				return uint32(i)
			}
		}
		types = append(types, t)
		return uint32(len(types) - 1)
	}
	importTypes = make([]uint32, len(a.Imports))
	for i, im := range a.Imports {
		importTypes[i] = typeOf(im.Params, im.Results)
	}
	funcTypes = make([]uint32, len(a.Funcs))
	for i, f := range a.Funcs {
		funcTypes[i] = typeOf(f.Params, f.Results)
	}
	return types, importTypes, funcTypes
}

// appendGlobal appends global i: i32, its mutability, its initial value.
func (a *Assembler) appendGlobal(b []byte, i int) []byte {
	g := a.Globals[i]
	mut := byte(0)
	if g.Mutable {
		mut = 1
	}
	b = append(b, I32, mut, OpI32Const)
	b = AppendS64(b, int64(g.Init))
	return append(b, OpEnd)
}

// exports returns the export section: the memory, exported globals and
// exported functions.
func (a *Assembler) exports() []byte {
	type export struct {
		name string
		kind byte
		idx  uint32
	}
	var exports []export
	if a.MemoryPages > 0 {
		exports = append(exports, export{"memory", 0x02, 0})
	}
	for i, g := range a.Globals {
		if g.Export != "" {
			exports = append(exports, export{g.Export, 0x03, uint32(i)})
		}
	}
	for i, f := range a.Funcs {
		if f.Export != "" {
			exports = append(exports, export{f.Export, 0x00, uint32(len(a.Imports) + i)})
		}
	}
	return vec(len(exports), func(b []byte, i int) []byte {
		b = appendName(b, exports[i].name)
		b = append(b, exports[i].kind)
		return AppendU32(b, exports[i].idx)
	})
}

// appendElements appends the active element segment installing Table at
// offset 0.
func (a *Assembler) appendElements(b []byte, _ int) []byte {
	b = append(b, 0x00, OpI32Const, 0x00, OpEnd)
	b = AppendU32(b, uint32(len(a.Table)))
	for _, f := range a.Table {
		b = AppendU32(b, f)
	}
	return b
}

// appendCode appends the body of function i: its locals, its
// instructions and the final end.
func (a *Assembler) appendCode(b []byte, i int) []byte {
	f := a.Funcs[i]
	var body []byte
	body = AppendU32(body, uint32(len(f.Locals)))
	for _, t := range f.Locals {
		body = AppendU32(body, 1)
		body = append(body, t)
	}
	body = append(body, f.Body...)
	body = append(body, OpEnd)
	b = AppendU32(b, uint32(len(body)))
	return append(b, body...)
}

// appendData appends active data segment i of memory 0.
func (a *Assembler) appendData(b []byte, i int) []byte {
	d := a.Data[i]
	b = append(b, 0x00, OpI32Const)
	b = AppendS64(b, int64(int32(d.Offset)))
	b = append(b, OpEnd)
	b = AppendU32(b, uint32(len(d.Bytes)))
	return append(b, d.Bytes...)
}

func section(out []byte, id byte, content []byte) []byte {
	out = append(out, id)
	out = AppendU32(out, uint32(len(content)))
	return append(out, content...)
}

func vec(n int, item func([]byte, int) []byte) []byte {
	b := AppendU32(nil, uint32(n))
	for i := 0; i < n; i++ {
		b = item(b, i)
	}
	return b
}

func appendVec(b, items []byte) []byte {
	b = AppendU32(b, uint32(len(items)))
	return append(b, items...)
}

func appendName(b []byte, s string) []byte {
	b = AppendU32(b, uint32(len(s)))
	return append(b, s...)
}

// AppendU32 appends v as unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// AppendS64 appends v as signed LEB128.
func AppendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// I32Const returns the instruction pushing an i32 constant.
func I32Const(v int32) []byte { return AppendS64([]byte{OpI32Const}, int64(v)) }

// I64Const returns the instruction pushing an i64 constant.
func I64Const(v int64) []byte { return AppendS64([]byte{OpI64Const}, v) }

// Packed returns the instruction pushing the i64 (ptr<<32 | len) that hook
// exports return.
func Packed(ptr, n uint32) []byte { return I64Const(int64(uint64(ptr)<<32 | uint64(n))) }

// Seq concatenates instruction sequences.
func Seq(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// Signatures of the policy ABI, for building Funcs.
var (
	SigNone   = []byte{}
	SigI32    = []byte{I32}
	SigI32I32 = []byte{I32, I32}
	SigI64    = []byte{I64}
)

// PolicyModule returns an Assembler preloaded with a minimal, valid ABI 1.0
// skeleton: one page of memory, edge_abi_version returning version,
// edge_alloc returning a fixed buffer at 1024, and for each entry of hooks
// (export name such as "edge_hook_tool_call" → body) a hook function with
// the (i32, i32) -> i64 signature. Constant outputs can be placed with Data.
func PolicyModule(version uint32, hooks map[string][]byte) *Assembler {
	a := &Assembler{
		MemoryPages: 1,
		Funcs: []Func{
			{Results: SigI32, Body: I32Const(int32(version)), Export: "edge_abi_version"},
			{Params: SigI32, Results: SigI32, Body: I32Const(1024), Export: "edge_alloc"},
		},
	}
	names := make([]string, 0, len(hooks))
	for name := range hooks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a.Funcs = append(a.Funcs, Func{Params: SigI32I32, Results: SigI64, Body: hooks[name], Export: name})
	}
	return a
}
