// Package meter rewrites a WebAssembly module so that a host can bound its
// execution cheaply.
//
// wazero's RuntimeConfig.WithCloseOnContextDone stops runaway guests by
// calling out to Go at every loop header. Go's wasm backend compiles every
// jump between basic blocks as a branch to a function-wide loop, so in a Go
// guest that check runs on nearly every branch and costs 40-50 ns each
// time: a guest doing 1 µs of work spends 10 µs in checks.
//
// Instrument inserts, at the start of every loop body, an inline decrement
// of a fuel counter (a new mutable i32 global, exported as FuelExport) and,
// only when it reaches zero, a call to an imported host function
// (ImportModule.ImportName, () -> ()). The host refills the fuel there, or
// aborts the call when its deadline has passed. Every unbounded execution
// in WebAssembly passes through a loop header (or recursion, which the
// runtime's stack limit ends), so the guest is bounded by the host's tick
// at a cost of a few machine instructions per loop iteration. The tick is
// also called before every memory.grow, which the host carries out and
// which can cost far more than a loop iteration.
//
// The fuel global starts full, so a start function runs metered too; the
// host's tick must then serve a module it has not finished instantiating.
//
// Adding the import shifts the indices of the module's own functions by
// one; Instrument renumbers every reference (calls, ref.func, exports, the
// start function, element segments) and drops custom sections (names,
// debug info), which would refer to the old numbering.
package meter

import (
	"errors"
	"fmt"
)

// Names of the injected import and export.
const (
	ImportModule = "edge_meter"
	ImportName   = "tick"
	FuelExport   = "edge_fuel"
)

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

var errTruncated = errors.New("truncated module")

// reader decodes the binary format.
type reader struct {
	b   []byte
	off int
}

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errTruncated
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) u32() (uint32, error) {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			if v > 0xffffffff {
				return 0, errors.New("u32 out of range")
			}
			return uint32(v), nil
		}
	}
	return 0, errors.New("u32 too long")
}

// sleb skips a signed LEB128 of at most maxBytes bytes.
func (r *reader) sleb(maxBytes int) error {
	for i := 0; i < maxBytes; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return errors.New("signed LEB128 too long")
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || r.off+n > len(r.b) {
		return nil, errTruncated
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s, nil
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

// module holds what Instrument needs to know about the input.
type module struct {
	sections   []section
	types      int // number of function types
	funcImps   int // imported functions
	globalImps int // imported globals
	globals    int // defined globals
	hasExport  bool
	hasImport  bool
	hasGlobal  bool
}

type section struct {
	id      byte
	payload []byte
}

// Instrument returns a metered copy of the WebAssembly binary wasm, with
// refill as the initial fuel.
func Instrument(wasm []byte, refill uint32) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, errors.New("not a WebAssembly 1.0 binary")
	}
	m := &module{}
	r := &reader{b: wasm, off: 8}
	for r.off < len(wasm) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		n, err := r.u32()
		if err != nil {
			return nil, err
		}
		payload, err := r.bytes(int(n))
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		if id > secDataCount {
			return nil, fmt.Errorf("unknown section id %d", id)
		}
		if id == secCustom {
			continue // names and debug info would refer to the old numbering
		}
		m.sections = append(m.sections, section{id, payload})
		if err := m.scan(id, payload); err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
	}
	return m.rewrite(refill)
}

// scan collects the counts the rewrite needs.
func (m *module) scan(id byte, p []byte) error {
	r := &reader{b: p}
	switch id {
	case secType:
		n, err := r.u32()
		m.types = int(n)
		return err
	case secImport:
		m.hasImport = true
		n, err := r.u32()
		if err != nil {
			return err
		}
		for range n {
			for k := range 2 {
				l, err := r.u32()
				if err != nil {
					return err
				}
				name, err := r.bytes(int(l))
				if err != nil {
					return err
				}
				if k == 0 && string(name) == ImportModule {
					return fmt.Errorf("module imports from %q, which is reserved for the host", ImportModule)
				}
			}
			kind, err := r.byte()
			if err != nil {
				return err
			}
			switch kind {
			case 0x00: // func: typeidx
				m.funcImps++
				_, err = r.u32()
			case 0x01: // table: reftype limits
				if _, err = r.byte(); err == nil {
					err = skipLimits(r)
				}
			case 0x02: // memory: limits
				err = skipLimits(r)
			case 0x03: // global: valtype mut
				m.globalImps++
				_, err = r.bytes(2)
			default:
				err = fmt.Errorf("unknown import kind %d", kind)
			}
			if err != nil {
				return err
			}
		}
	case secGlobal:
		m.hasGlobal = true
		n, err := r.u32()
		m.globals = int(n)
		return err
	case secExport:
		m.hasExport = true
	}
	return nil
}

func skipLimits(r *reader) error {
	flag, err := r.byte()
	if err != nil {
		return err
	}
	if _, err := r.u32(); err != nil {
		return err
	}
	switch flag {
	case 0x00:
		return nil
	case 0x01:
		_, err := r.u32()
		return err
	}
	return fmt.Errorf("unsupported limits flag %#x (shared or 64-bit memories are not supported)", flag)
}

// rewriter emits the metered module. Sections must appear in order;
// missing type, import, global and export sections are inserted where they
// belong.
type rewriter struct {
	m          *module
	refill     uint32
	tickFunc   uint32 // index of the added tick import
	fuelGlobal uint32 // index of the added fuel global
	out        []byte
	// Sections emitted so far among those the rewrite must add to.
	sawType, sawImport, sawGlobal, sawExport bool
}

// shift renumbers a function index of the input: the tick import takes
// the index after the module's own imports.
func (w *rewriter) shift(f uint32) uint32 {
	if f >= w.tickFunc {
		return f + 1
	}
	return f
}

func (w *rewriter) emit(id byte, payload []byte) {
	w.out = append(w.out, id)
	w.out = appendU32(w.out, uint32(len(payload)))
	w.out = append(w.out, payload...)
}

// rank orders section ids as the binary format requires (data count sits
// between element and code).
func rank(id byte) int {
	switch id {
	case secDataCount:
		return int(secElement) + 1
	case secCode, secData:
		return int(id) + 1
	}
	return int(id)
}

// flushBefore emits the sections the module lacks but the rewrite needs,
// when the next section (of rank next) would come after them.
func (w *rewriter) flushBefore(next int) {
	if !w.sawType && next > rank(secType) {
		w.emit(secType, []byte{0x01, 0x60, 0x00, 0x00})
		w.sawType = true
	}
	if !w.sawImport && next > rank(secImport) {
		w.emit(secImport, w.m.importPayload(nil, 0))
		w.sawImport = true
	}
	if !w.sawGlobal && next > rank(secGlobal) {
		w.emit(secGlobal, globalPayload(nil, 0, w.refill))
		w.sawGlobal = true
	}
	if !w.sawExport && next > rank(secExport) {
		w.emit(secExport, exportPayload(nil, 0, w.fuelGlobal))
		w.sawExport = true
	}
}

// rewrite emits the metered module.
func (m *module) rewrite(refill uint32) ([]byte, error) {
	w := &rewriter{
		m:          m,
		refill:     refill,
		tickFunc:   uint32(m.funcImps),
		fuelGlobal: uint32(m.globalImps + m.globals),
		out:        []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00},
	}
	last := 0
	for _, s := range m.sections {
		if rank(s.id) <= last {
			return nil, fmt.Errorf("section %d out of order or repeated", s.id)
		}
		last = rank(s.id)
		w.flushBefore(rank(s.id))
		p, err := w.section(s)
		if err != nil {
			return nil, err
		}
		w.emit(s.id, p)
	}
	w.flushBefore(1 << 10)
	return w.out, nil
}

// section returns the rewritten payload of one input section.
func (w *rewriter) section(s section) ([]byte, error) {
	r := &reader{b: s.payload}
	switch s.id {
	case secType:
		w.sawType = true
		n, err := r.u32()
		if err != nil {
			return nil, err
		}
		p := appendU32(nil, n+1)
		p = append(p, s.payload[r.off:]...)
		return append(p, 0x60, 0x00, 0x00), nil
	case secImport:
		w.sawImport = true
		n, err := r.u32()
		if err != nil {
			return nil, err
		}
		return w.m.importPayload(s.payload[r.off:], n), nil
	case secGlobal:
		w.sawGlobal = true
		return w.globals(r)
	case secExport:
		w.sawExport = true
		return w.exports(r)
	case secStart:
		f, err := r.u32()
		if err != nil {
			return nil, err
		}
		return appendU32(nil, w.shift(f)), nil
	case secElement:
		p, err := rewriteElements(r, w.shift)
		if err != nil {
			return nil, fmt.Errorf("element section: %w", err)
		}
		return p, nil
	case secCode:
		p, err := rewriteCode(r, w.shift, w.tickFunc, w.fuelGlobal)
		if err != nil {
			return nil, fmt.Errorf("code section: %w", err)
		}
		return p, nil
	}
	return s.payload, nil
}

// globals copies the global section (renumbering ref.func in initial
// values) and adds the fuel global.
func (w *rewriter) globals(r *reader) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	var body []byte
	for range n {
		start := r.off
		if _, err := r.bytes(2); err != nil { // valtype mut
			return nil, err
		}
		body = append(body, r.b[start:r.off]...)
		if body, err = copyExpr(r, body, w.shift); err != nil {
			return nil, err
		}
	}
	return globalPayload(body, n, w.refill), nil
}

// exports copies the export section (renumbering functions) and adds the
// fuel global's export.
func (w *rewriter) exports(r *reader) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	var body []byte
	for range n {
		l, err := r.u32()
		if err != nil {
			return nil, err
		}
		name, err := r.bytes(int(l))
		if err != nil {
			return nil, err
		}
		if string(name) == FuelExport {
			return nil, fmt.Errorf("module already exports %q", FuelExport)
		}
		kind, err := r.byte()
		if err != nil {
			return nil, err
		}
		idx, err := r.u32()
		if err != nil {
			return nil, err
		}
		if kind == 0x00 {
			idx = w.shift(idx)
		}
		body = appendName(body, string(name))
		body = append(body, kind)
		body = appendU32(body, idx)
	}
	return exportPayload(body, n, w.fuelGlobal), nil
}

// importPayload appends the tick import to an import vector body.
func (m *module) importPayload(body []byte, n uint32) []byte {
	p := appendU32(nil, n+1)
	p = append(p, body...)
	p = appendName(p, ImportModule)
	p = appendName(p, ImportName)
	p = append(p, 0x00)
	return appendU32(p, uint32(m.types))
}

// globalPayload appends the fuel global, (mut i32) initialised to refill.
func globalPayload(body []byte, n uint32, refill uint32) []byte {
	p := appendU32(nil, n+1)
	p = append(p, body...)
	p = append(p, 0x7f, 0x01, 0x41)
	p = appendS32(p, int32(refill))
	return append(p, 0x0b)
}

func appendS32(b []byte, v int32) []byte {
	x := int64(v)
	for {
		c := byte(x & 0x7f)
		x >>= 7
		if (x == 0 && c&0x40 == 0) || (x == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// exportPayload appends the fuel global's export.
func exportPayload(body []byte, n uint32, fuelGlobal uint32) []byte {
	p := appendU32(nil, n+1)
	p = append(p, body...)
	p = appendName(p, FuelExport)
	p = append(p, 0x03)
	return appendU32(p, fuelGlobal)
}

// copyExpr copies a constant expression up to and including its end,
// renumbering ref.func.
func copyExpr(r *reader, out []byte, shift func(uint32) uint32) ([]byte, error) {
	for {
		op, err := r.byte()
		if err != nil {
			return nil, err
		}
		out = append(out, op)
		switch op {
		case 0x0b: // end
			return out, nil
		case 0x41: // i32.const
			start := r.off
			if err := r.sleb(5); err != nil {
				return nil, err
			}
			out = append(out, r.b[start:r.off]...)
		case 0x42: // i64.const
			start := r.off
			if err := r.sleb(10); err != nil {
				return nil, err
			}
			out = append(out, r.b[start:r.off]...)
		case 0x43, 0x44: // f32.const, f64.const
			n := 4
			if op == 0x44 {
				n = 8
			}
			b, err := r.bytes(n)
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		case 0x23: // global.get
			g, err := r.u32()
			if err != nil {
				return nil, err
			}
			out = appendU32(out, g)
		case 0xd0: // ref.null t
			t, err := r.byte()
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		case 0xd2: // ref.func
			f, err := r.u32()
			if err != nil {
				return nil, err
			}
			out = appendU32(out, shift(f))
		case 0xfd: // v128.const
			sub, err := r.u32()
			if err != nil {
				return nil, err
			}
			if sub != 12 {
				return nil, fmt.Errorf("unsupported constant instruction 0xfd %d", sub)
			}
			b, err := r.bytes(16)
			if err != nil {
				return nil, err
			}
			out = appendU32(out, sub)
			out = append(out, b...)
		default:
			return nil, fmt.Errorf("unsupported constant instruction %#x", op)
		}
	}
}

func rewriteElements(r *reader, shift func(uint32) uint32) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, n)
	funcs := func() error {
		k, err := r.u32()
		if err != nil {
			return err
		}
		out = appendU32(out, k)
		for range k {
			f, err := r.u32()
			if err != nil {
				return err
			}
			out = appendU32(out, shift(f))
		}
		return nil
	}
	exprs := func() error {
		k, err := r.u32()
		if err != nil {
			return err
		}
		out = appendU32(out, k)
		for range k {
			if out, err = copyExpr(r, out, shift); err != nil {
				return err
			}
		}
		return nil
	}
	for range n {
		flags, err := r.u32()
		if err != nil {
			return nil, err
		}
		out = appendU32(out, flags)
		if flags > 7 {
			return nil, fmt.Errorf("unknown element segment flags %d", flags)
		}
		if flags&0x02 != 0 && flags&0x01 == 0 { // explicit table index
			t, err := r.u32()
			if err != nil {
				return nil, err
			}
			out = appendU32(out, t)
		}
		if flags&0x01 == 0 { // active: offset expression
			if out, err = copyExpr(r, out, shift); err != nil {
				return nil, err
			}
		}
		if flags&0x03 != 0 { // elemkind or reftype byte
			b, err := r.byte()
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		if flags&0x04 == 0 {
			err = funcs()
		} else {
			err = exprs()
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rewriteCode renumbers calls and inserts the fuel check at the start of
// every loop body:
//
//	global.get $fuel  i32.const 1  i32.sub  global.set $fuel
//	global.get $fuel  i32.eqz  if  call $tick  end
//
// and a call to $tick before every memory.grow. Growing memory is done by
// the host and can take far longer than a loop iteration (the new pages
// are allocated and cleared, the old ones copied), so a guest that grows
// in a loop must meet its deadline check at each grow, not every few
// thousand of them.
func rewriteCode(r *reader, shift func(uint32) uint32, tick, fuel uint32) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	check := appendU32([]byte{0x23}, fuel)
	check = append(check, 0x41, 0x01, 0x6b, 0x24)
	check = appendU32(check, fuel)
	check = append(check, 0x23)
	check = appendU32(check, fuel)
	check = append(check, 0x45, 0x04, 0x40, 0x10)
	check = appendU32(check, tick)
	check = append(check, 0x0b)
	c := &codeRewriter{shift: shift, check: check, tickCall: appendU32([]byte{0x10}, tick)}

	out := appendU32(nil, n)
	var body []byte
	for i := range n {
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		fb, err := r.bytes(int(size))
		if err != nil {
			return nil, err
		}
		body, err = c.body(body[:0], fb)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out, nil
}

// codeRewriter holds what rewriting a function body inserts.
type codeRewriter struct {
	shift    func(uint32) uint32
	check    []byte // the fuel check at the start of a loop body
	tickCall []byte // call $tick, before memory.grow
}

func (c *codeRewriter) body(out, fb []byte) ([]byte, error) {
	r := &reader{b: fb}
	groups, err := r.u32()
	if err != nil {
		return nil, err
	}
	for range groups {
		if _, err := r.u32(); err != nil {
			return nil, err
		}
		if _, err := r.byte(); err != nil {
			return nil, err
		}
	}
	out = append(out, fb[:r.off]...)
	copyFrom := r.off
	flush := func(upto int) {
		out = append(out, fb[copyFrom:upto]...)
		copyFrom = upto
	}
	for r.off < len(fb) {
		at := r.off
		op, _ := r.byte()
		switch op {
		case 0x03: // loop bt: copy it, then the check
			if err := skipBlockType(r); err != nil {
				return nil, err
			}
			flush(r.off)
			out = append(out, c.check...)
		case 0x10, 0xd2: // call f, ref.func f
			f, err := r.u32()
			if err != nil {
				return nil, err
			}
			flush(at)
			out = append(out, op)
			out = appendU32(out, c.shift(f))
			copyFrom = r.off
		case 0x40: // memory.grow: the tick first, then the grow as it was
			if _, err := r.u32(); err != nil {
				return nil, err
			}
			flush(at)
			out = append(out, c.tickCall...)
		default:
			if err := skipImmediates(r, op); err != nil {
				return nil, fmt.Errorf("opcode %#x at %d: %w", op, at, err)
			}
		}
	}
	flush(len(fb))
	return out, nil
}

func skipBlockType(r *reader) error {
	if r.off >= len(r.b) {
		return errTruncated
	}
	switch c := r.b[r.off]; {
	case c == 0x40 || c == 0x7f || c == 0x7e || c == 0x7d || c == 0x7c || c == 0x7b || c == 0x70 || c == 0x6f:
		r.off++
		return nil
	default:
		return r.sleb(5) // type index as s33
	}
}

func skipMemarg(r *reader) error {
	if _, err := r.u32(); err != nil {
		return err
	}
	_, err := r.u32()
	return err
}

// immediates classifies the one-byte opcodes by the immediates that follow
// them.
type immediates uint8

const (
	immInvalid   immediates = iota // not an instruction wazero accepts
	immNone                        // no immediate
	immBlockType                   // block, if (loop is handled by the rewrite)
	immU32                         // one u32: br, br_if, local.*, global.*, table.get/set, memory.size/grow
	immU32x2                       // two u32: call_indirect
	immBrTable                     // vector of labels and a default
	immSelect                      // vector of value types
	immMemarg                      // align and offset: loads and stores
	immS32                         // i32.const
	immS64                         // i64.const
	immF32                         // f32.const: 4 bytes
	immF64                         // f64.const: 8 bytes
	immByte                        // ref.null t
	immFC                          // 0xfc prefix: sub-opcode and its immediates
	immFD                          // 0xfd prefix (SIMD)
)

// opImmediates covers the instruction set wazero's CoreFeaturesV2 accepts:
// MVP, sign extension, saturating conversions, bulk memory, reference
// types, multi-value and SIMD.
var opImmediates = func() (t [256]immediates) {
	set := func(kind immediates, ops ...int) {
		for _, op := range ops {
			t[op] = kind
		}
	}
	span := func(kind immediates, from, to int) {
		for op := from; op <= to; op++ {
			t[op] = kind
		}
	}
	// unreachable, nop, else, end, return, drop, select, numeric ops, ref.is_null
	set(immNone, 0x00, 0x01, 0x05, 0x0b, 0x0f, 0x1a, 0x1b, 0xd1)
	span(immNone, 0x45, 0xc4)
	set(immBlockType, 0x02, 0x04)
	set(immU32, 0x0c, 0x0d, 0x3f, 0x40)
	span(immU32, 0x20, 0x26)
	set(immBrTable, 0x0e)
	set(immU32x2, 0x11)
	set(immSelect, 0x1c)
	span(immMemarg, 0x28, 0x3e)
	set(immS32, 0x41)
	set(immS64, 0x42)
	set(immF32, 0x43)
	set(immF64, 0x44)
	set(immByte, 0xd0)
	set(immFC, 0xfc)
	set(immFD, 0xfd)
	return t
}()

// skipImmediates skips the immediates of op (already read).
func skipImmediates(r *reader, op byte) error {
	var err error
	switch opImmediates[op] {
	case immNone:
	case immBlockType:
		err = skipBlockType(r)
	case immU32:
		_, err = r.u32()
	case immU32x2, immMemarg:
		err = skipMemarg(r) // two u32s
	case immBrTable:
		err = skipBrTable(r)
	case immSelect:
		var n uint32
		if n, err = r.u32(); err == nil {
			_, err = r.bytes(int(n))
		}
	case immS32:
		err = r.sleb(5)
	case immS64:
		err = r.sleb(10)
	case immF32:
		_, err = r.bytes(4)
	case immF64:
		_, err = r.bytes(8)
	case immByte:
		_, err = r.byte()
	case immFC:
		err = skipFC(r)
	case immFD:
		err = skipFD(r)
	default:
		err = fmt.Errorf("unsupported opcode %#x", op)
	}
	return err
}

func skipBrTable(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for range n + 1 {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

func skipFC(r *reader) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 7: // saturating truncations
		return nil
	case sub == 8: // memory.init dataidx memidx
		if _, err := r.u32(); err != nil {
			return err
		}
		_, err := r.u32()
		return err
	case sub == 9 || sub == 13 || sub == 15 || sub == 16 || sub == 17: // data.drop, elem.drop, table.grow/size/fill
		_, err := r.u32()
		return err
	case sub == 10 || sub == 12 || sub == 14: // memory.copy, table.init, table.copy
		if _, err := r.u32(); err != nil {
			return err
		}
		_, err := r.u32()
		return err
	case sub == 11: // memory.fill
		_, err := r.u32()
		return err
	}
	return fmt.Errorf("unsupported opcode 0xfc %d", sub)
}

func skipFD(r *reader) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads, store, load_zero
		return skipMemarg(r)
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		_, err := r.bytes(16)
		return err
	case sub >= 21 && sub <= 34: // extract/replace lane
		_, err := r.byte()
		return err
	case sub >= 84 && sub <= 91: // load/store lane
		if err := skipMemarg(r); err != nil {
			return err
		}
		_, err := r.byte()
		return err
	case sub <= 255:
		return nil
	}
	return fmt.Errorf("unsupported opcode 0xfd %d", sub)
}
