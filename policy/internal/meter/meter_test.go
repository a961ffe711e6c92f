package meter

import (
	"context"
	"errors"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// testModule exercises everything the rewrite renumbers: an imported
// function (env.add1), calls between defined functions, a loop, a table
// with an element segment and call_indirect, a start function, and
// exported functions and globals.
//
//	func 0: import env.add1(i32) i32
//	func 1: "count"(n) loops n times, calling add1 on an accumulator
//	func 2: "indirect"(x) = table[0](x)           (table[0] = func 3)
//	func 3: plus2(x) = add1(add1(x))
//	func 4: start: g = 42
func testModule() []byte {
	count := w.Seq(
		// loop: acc = add1(acc); n--; br_if n != 0
		[]byte{w.OpLoop, w.OpBlockTypeVoid},
		[]byte{w.OpLocalGet, 1, w.OpCall, 0, w.OpLocalSet, 1},
		[]byte{w.OpLocalGet, 0}, w.I32Const(1), []byte{w.OpI32Sub, w.OpLocalSet, 0},
		[]byte{w.OpLocalGet, 0, w.OpBrIf, 0, w.OpEnd},
		[]byte{w.OpLocalGet, 1},
	)
	return (&w.Assembler{
		Imports: []w.Import{{Module: "env", Name: "add1", Params: w.SigI32, Results: w.SigI32}},
		Funcs: []w.Func{
			{Params: w.SigI32, Results: w.SigI32, Locals: []byte{w.I32}, Body: count, Export: "count"},
			{Params: w.SigI32, Results: w.SigI32, Body: w.Seq([]byte{w.OpLocalGet, 0}, w.I32Const(0), []byte{w.OpCallIndirect, 0, 0}), Export: "indirect"},
			{Params: w.SigI32, Results: w.SigI32, Body: []byte{w.OpLocalGet, 0, w.OpCall, 0, w.OpCall, 0}},
			{Body: w.Seq(w.I32Const(42), []byte{w.OpGlobalSet, 0})},
		},
		Globals:     []w.Global{{Mutable: true, Export: "g"}},
		Table:       []uint32{3},
		Start:       4,
		HasStart:    true,
		MemoryPages: 1,
	}).Bytes()
}

type harness struct {
	mod   api.Module
	ticks int
	stop  int // abort on this tick (0: never)
}

func instantiate(t *testing.T, wasm []byte, metered bool) *harness {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	h := &harness{}
	if _, err := rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(x uint32) uint32 { return x + 1 }).Export("add1").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	if metered {
		_, err := rt.NewHostModuleBuilder(ImportModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, _ []uint64) {
				h.ticks++
				if h.stop != 0 && h.ticks >= h.stop {
					panic(errors.New("stopped by the meter"))
				}
				mod.ExportedGlobal(FuelExport).(api.MutableGlobal).Set(api.EncodeI32(1000))
			}), nil, nil).Export(ImportName).Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	h.mod = mod
	return h
}

func call(t *testing.T, h *harness, name string, args ...uint64) (uint64, error) {
	t.Helper()
	res, err := h.mod.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		return 0, err
	}
	return res[0], nil
}

func TestInstrumentPreservesBehaviour(t *testing.T) {
	orig := testModule()
	metered, err := Instrument(orig, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		wasm    []byte
		metered bool
	}{{"original", orig, false}, {"metered", metered, true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := instantiate(t, tc.wasm, tc.metered)
			if g := h.mod.ExportedGlobal("g").Get(); g != 42 {
				t.Fatalf("start function did not run: g = %d", g)
			}
			if got, err := call(t, h, "count", 5000); err != nil || got != 5000 {
				t.Fatalf("count(5000) = %d, %v", got, err)
			}
			if got, err := call(t, h, "indirect", 7); err != nil || got != 9 {
				t.Fatalf("indirect(7) = %d, %v", got, err)
			}
			if tc.metered && (h.ticks < 4 || h.ticks > 6) {
				t.Fatalf("%d ticks for 5000 iterations at 1000 fuel", h.ticks)
			}
		})
	}
}

func TestMeterStopsRunawayLoop(t *testing.T) {
	loop := (&w.Assembler{Funcs: []w.Func{{Results: w.SigI32, Body: []byte{w.OpLoop, w.OpBlockTypeVoid, w.OpBr, 0, w.OpEnd, w.OpUnreachable}, Export: "spin"}}}).Bytes()
	metered, err := Instrument(loop, 1000)
	if err != nil {
		t.Fatal(err)
	}
	h := instantiate(t, metered, true)
	h.stop = 50
	if _, err := call(t, h, "spin"); err == nil || h.ticks != 50 {
		t.Fatalf("err %v after %d ticks", err, h.ticks)
	}
}

func TestInstrumentRejects(t *testing.T) {
	tests := []struct {
		name string
		wasm []byte
	}{
		{"not wasm", []byte("hello")},
		{"truncated", testModule()[:30]},
		{"reserved import", (&w.Assembler{Imports: []w.Import{{Module: ImportModule, Name: "x"}}}).Bytes()},
		{"reserved export", (&w.Assembler{Globals: []w.Global{{Export: FuelExport}}}).Bytes()},
		{"unknown opcode", (&w.Assembler{Funcs: []w.Func{{Body: []byte{0x06}}}}).Bytes()},
	}
	for _, tt := range tests {
		if _, err := Instrument(tt.wasm, 100); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}

// FuzzInstrument mutates small modules: Instrument must never panic, and
// whenever wazero accepts the original, it must accept the rewrite.
func FuzzInstrument(f *testing.F) {
	f.Add(testModule())
	f.Add((&w.Assembler{}).Bytes())
	f.Add(w.PolicyModule(1<<16, map[string][]byte{"edge_hook_tool_call": w.Packed(0, 0)}).Bytes())
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2))
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := Instrument(wasm, 100)
		if err != nil {
			return
		}
		orig, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			return
		}
		orig.Close(ctx)
		m, err := rt.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("original compiles, metered does not: %v", err)
		}
		m.Close(ctx)
	})
}

// TestGrowTicks checks that every memory.grow meets the host's tick, even
// outside a loop: growing is done by the host and may take far longer than
// the few thousand loop iterations between two ticks.
func TestGrowTicks(t *testing.T) {
	grow3 := w.Seq(
		w.I32Const(1), []byte{w.OpMemoryGrow, 0, w.OpDrop},
		w.I32Const(1), []byte{w.OpMemoryGrow, 0, w.OpDrop},
		w.I32Const(1), []byte{w.OpMemoryGrow, 0},
	)
	wasm := (&w.Assembler{MemoryPages: 1, Funcs: []w.Func{{Results: w.SigI32, Body: grow3, Export: "grow3"}}}).Bytes()
	metered, err := Instrument(wasm, 1000)
	if err != nil {
		t.Fatal(err)
	}
	h := instantiate(t, metered, true)
	got, err := call(t, h, "grow3")
	if err != nil || got != 3 {
		t.Fatalf("grow3() = %d, %v; want 3 (the previous size in pages)", got, err)
	}
	if h.ticks != 3 {
		t.Fatalf("%d ticks for 3 memory.grow, want 3", h.ticks)
	}
}
