package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"strata/engine/compute"
	"strata/engine/quant"
	"strata/platform"
)

// TestWriteSlotsAsync writes experts from registered memory on the copy stream and reads
// them back after the wait and Synchronize; then it overwrites the sources, as a swap of
// the arena would, and the slots keep what was copied.
func TestWriteSlotsAsync(t *testing.T) {
	const slots = 8
	per := 576 * 2048 / 32 * 34
	fx := newSlotsFixture(t, 576, 2048, slots, slots*per, slots*per, 0)
	for round := range 3 {
		writes, want := registeredWrites(fx, slots, uint64(10*round))
		wait, err := fx.b.WriteSlotsAsync(fx.w, writes)
		if err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		if err := fx.b.Synchronize(); err != nil {
			t.Fatal(err)
		}
		for i := range fx.mem {
			fx.mem[i] = ^fx.mem[i]
		}
		checkSlots(t, fx.b, fx.w, writes, want)
	}
}

// TestWriteSlotsAsyncWaitOrders reads the slots back right after the wait, with no
// Synchronize between: the read is queued on the compute stream, which the wait made wait
// for the copies. Several writes are in flight at once, so the events' pool grows to them
// and no further; a second call of a wait does nothing.
func TestWriteSlotsAsyncWaitOrders(t *testing.T) {
	const slots, inFlight = 12, 3
	per := 576 * 2048 / 32 * 34
	fx := newSlotsFixture(t, 576, 2048, slots, slots*per, slots*per, 0)
	for round := range 4 {
		writes, want := registeredWrites(fx, slots, uint64(100*round))
		var ws []compute.Weight
		var parts [][]compute.SlotWrite
		for k := range inFlight {
			ws = append(ws, fx.w)
			parts = append(parts, writes[k*slots/inFlight:(k+1)*slots/inFlight])
		}
		waitAll(t, writeAsync(t, fx.b, ws, parts), 2)
		checkSlots(t, fx.b, fx.w, writes, want)
		if err := fx.b.Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(fx.b.lap.all); n != inFlight || fx.b.lap.pending != 0 {
		t.Errorf("%d events made for %d writes in flight at most, %d waits pending", n, inFlight, fx.b.lap.pending)
	}
}

// writeAsync queues writes[i] into ws[i] with WriteSlotsAsync and returns the waits.
func writeAsync(t *testing.T, b *Backend, ws []compute.Weight, writes [][]compute.SlotWrite) []func() error {
	t.Helper()
	var waits []func() error
	for i, w := range ws {
		wait, err := b.WriteSlotsAsync(w, writes[i])
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, wait)
	}
	return waits
}

// waitAll calls each wait calls times (the calls after the first do nothing).
func waitAll(t *testing.T, waits []func() error, calls int) {
	t.Helper()
	for _, wait := range waits {
		for k := range calls {
			if err := wait(); err != nil {
				t.Fatalf("call %d of a wait: %v", k+1, err)
			}
		}
	}
}

// TestWriteSlotsAsyncRejects checks the refusals the cache falls back to WriteSlots on:
// a source in plain memory (one of several), host slots and a wrong size, each with no
// copy left queued.
func TestWriteSlotsAsyncRejects(t *testing.T) {
	const slots = 4
	per := 64 * 256 / 32 * 34
	fx := newSlotsFixture(t, 64, 256, slots, 2*slots*per, slots*per, 0)
	host, err := fx.b.HostStack(compute.WeightSpec{Name: "host slots", Type: quant.Q8_0, Rows: 64, Cols: 256, Experts: slots, Data: fx.mem[:slots*per]})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		w      compute.Weight
		writes []compute.SlotWrite
	}{
		{"plain memory", fx.w, []compute.SlotWrite{{Slot: 0, Data: fx.mem[:per]}, {Slot: 1, Data: make([]byte, per)}}},
		{"past registered memory", fx.w, []compute.SlotWrite{{Slot: 0, Data: fx.mem[slots*per-1 : (slots+1)*per-1]}}},
		{"host slots", host, []compute.SlotWrite{{Slot: 0, Data: fx.mem[per : 2*per]}}},
		{"wrong size", fx.w, []compute.SlotWrite{{Slot: 0, Data: fx.mem[:per-1]}}},
		{"slot out of range", fx.w, []compute.SlotWrite{{Slot: slots, Data: fx.mem[:per]}}},
	}
	for _, c := range cases {
		if wait, err := fx.b.WriteSlotsAsync(c.w, c.writes); err == nil || wait != nil {
			t.Errorf("%s: no error", c.name)
		}
		if fx.b.lap.pending != 0 {
			t.Errorf("%s: %d writes left pending", c.name, fx.b.lap.pending)
		}
	}
}

// moeFixture is three stacks of Q8_0 expert slots (gate, up: I x H; down: H x I) and a
// batch's input and routes over them.
type moeFixture struct {
	b     *Backend
	st    [3]compute.Weight
	x     compute.Buf
	r     *compute.Routes
	n, H  int
	mem   []byte // registered, holding the "new" experts
	old   [3][]compute.SlotWrite
	fresh [3][]compute.SlotWrite // the new experts, sources in mem
}

// newMoEFixture makes slots experts of each matrix, old ones in plain memory and new ones
// in registered memory, and n tokens each routed to two of the slots.
func newMoEFixture(t *testing.T, H, I, slots, n int) moeFixture {
	t.Helper()
	shapes := [3][2]int{{I, H}, {I, H}, {H, I}}
	per := func(m int) int { return shapes[m][0] * shapes[m][1] / 32 * 34 }
	total := slots * (per(0) + per(1) + per(2))
	mem, err := platform.AlignedAlloc((total+4095)/4096*4096, 4096)
	if err != nil {
		t.Skipf("no aligned host memory here: %v", err)
	}
	t.Cleanup(func() { _ = platform.FreeAligned(mem) })
	fx := moeFixture{b: newForTest(t), n: n, H: H, mem: mem}
	if err := fx.b.RegisterHost(mem); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	off := 0
	for m, sh := range shapes {
		spec := compute.WeightSpec{Name: "moe slots", Type: quant.Q8_0, Rows: sh[0], Cols: sh[1]}
		if fx.st[m], err = fx.b.NewSlots(spec, slots); err != nil {
			t.Fatal(err)
		}
		for s := range slots {
			fx.old[m] = append(fx.old[m], compute.SlotWrite{Slot: s, Data: quantized(t, rng, sh[0]*sh[1], make([]byte, per(m)))})
			fx.fresh[m] = append(fx.fresh[m], compute.SlotWrite{Slot: s, Data: quantized(t, rng, sh[0]*sh[1], mem[off:off+per(m)])})
			off += per(m)
		}
	}
	xs := make([]float32, n*H)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	fx.x = fx.b.NewBuf(n * H)
	fx.b.Write(fx.x, xs)
	fx.r = &compute.Routes{N: n, K: 2, IDs: make([]int32, 2*n), Weights: make([]float32, 2*n)}
	for tok := range n {
		fx.r.IDs[2*tok], fx.r.IDs[2*tok+1] = int32(tok%slots), int32((tok+1)%slots)
		fx.r.Weights[2*tok], fx.r.Weights[2*tok+1] = 0.75, 0.25
	}
	return fx
}

// quantized fills dst with n random weights as Q8_0.
func quantized(t *testing.T, rng *rand.Rand, n int, dst []byte) []byte {
	t.Helper()
	fs := make([]float32, n)
	for i := range fs {
		fs[i] = float32(rng.NormFloat64() * 0.05)
	}
	if err := quant.Quantize(quant.Q8_0, fs, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// write writes every stack's slots with WriteSlots.
func (fx moeFixture) write(t *testing.T, ws [3][]compute.SlotWrite) {
	t.Helper()
	for m := range 3 {
		if err := fx.b.WriteSlots(fx.st[m], ws[m]); err != nil {
			t.Fatal(err)
		}
	}
}

// moe queues the batch's MoE into a fresh zeroed buffer.
func (fx moeFixture) moe() compute.Buf {
	dst := fx.b.NewBuf(fx.n * fx.H)
	fx.b.Write(dst, make([]float32, fx.n*fx.H))
	fx.b.MoE(dst, fx.x, fx.st[0], fx.st[1], fx.st[2], nil, fx.r)
	return dst
}

// read brings a result back.
func (fx moeFixture) read(t *testing.T, dst compute.Buf) []float32 {
	t.Helper()
	out := make([]float32, fx.n*fx.H)
	fx.b.Read(dst, out)
	if err := fx.b.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWriteSlotsAsyncAfterEarlierWork queues MoEs that read a stack's slots, then an
// asynchronous write of other experts into the same slots, then, after its wait, a MoE
// again: the MoEs queued before must have read the old experts (the copies wait for the
// compute stream's work queued before them) and the one after the new ones, each equal to
// the same MoE run alone on those experts.
func TestWriteSlotsAsyncAfterEarlierWork(t *testing.T) {
	const H, I, slots, n, before = 1024, 768, 4, 1024, 6
	fx := newMoEFixture(t, H, I, slots, n)
	fx.write(t, fx.old)
	wantOld := fx.read(t, fx.moe())
	fx.write(t, fx.fresh)
	wantNew := fx.read(t, fx.moe())
	if d := maxDiff(wantOld, wantNew); d < 1e-2 {
		t.Fatalf("the old and new experts give outputs only %g apart: the test would not tell them apart", d)
	}

	fx.write(t, fx.old)
	if err := fx.b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	var olds []compute.Buf
	for range before {
		olds = append(olds, fx.moe())
	}
	waitAll(t, writeAsync(t, fx.b, fx.st[:], fx.fresh[:]), 1)
	after := fx.moe()
	for i, dst := range olds {
		if d, lim := maxDiff(fx.read(t, dst), wantOld), 1e-3*maxAbs(wantOld); d > lim {
			t.Errorf("MoE %d queued before the write: off the old experts' output by %g (limit %g)", i, d, lim)
		}
	}
	if d, lim := maxDiff(fx.read(t, after), wantNew), 1e-3*maxAbs(wantNew); d > lim {
		t.Errorf("MoE queued after the wait: off the new experts' output by %g (limit %g)", d, lim)
	}
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func maxAbs(a []float32) float64 {
	m := 0.0
	for _, v := range a {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}
