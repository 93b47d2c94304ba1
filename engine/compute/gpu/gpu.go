// Package gpu is the NVIDIA implementation of compute.Backend, built on the cuda package's
// driver API and kernels. Weights are copied to VRAM at Place; activations, the KV cache and
// scratch live in VRAM; the host sees only the routing result (at the next Read in decode)
// and the output logits.
package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"unsafe"

	"strata/cuda"
	"strata/engine/compute"
	"strata/engine/quant"
	"strata/platform"
)

// ErrNoGPU wraps every "there is no usable NVIDIA GPU" failure, so callers can fall back.
var ErrNoGPU = errors.New("no usable NVIDIA GPU")

// Options of the GPU backend.
type Options struct {
	Device int // CUDA ordinal, or AutoDevice: the device with the most free memory
	// BudgetBytes caps the VRAM the backend allocates; 0 = no cap.
	BudgetBytes int64
	// Eager launches every op by itself instead of replaying decode steps as CUDA graphs
	// (see stepGraph; graphs took decode of a 30b-a3b Q4_K model on the H200 from 141 to
	// 163 tokens/s). The environment variable STRATA_CUDA_GRAPHS=0 does the same.
	Eager bool
	// Kernels (nil: the file STRATA_CUDA_FATBIN names, else the embedded module) is a
	// fatbin built from cuda/kernels to run instead, for testing kernels before they are
	// embedded: binaries built where there is no nvcc run a fatbin made on the GPU machine.
	Kernels []byte
	// OwnContext creates a context of the device's own (cuCtxCreate) instead of retaining
	// its primary one. It exists for tests: a helper GPU on the main card's ordinal then has
	// its own memory, kernels and stream, as a second card would.
	OwnContext bool
}

// Backend runs the forward pass on one GPU.
type Backend struct {
	drv  *cuda.Driver
	ctx  *cuda.Context
	k    *cuda.Kernels
	s    *cuda.Stream
	info cuda.DeviceInfo

	budget, used int64
	allocs       []cuda.DevicePtr
	// region holds the weights and slot stacks in one allocation (ReserveRegion).
	region region

	err compute.StickyErr

	// Reusable device scratch, grown on demand.
	scratch map[string]devScratch
	// positions currently in posBuf, to skip re-uploads.
	posHost []int32
	posBuf  cuda.DevicePtr
	posCap  int

	// q8 remembers which activation rows the "q8 x" scratch holds quantised, so q, k and v
	// (and the router and the experts) quantise their shared input once.
	q8 q8Cache
	// routes holds decode routing results on the device until the next Read.
	routes routeArena
	// step replays decode steps as CUDA graphs when enabled.
	step stepGraph
	// pin holds a step's small inputs (token id, positions) in pinned host memory, copied
	// to the device by the step's own work, so a captured graph reads each step's values.
	pin     *cuda.HostBuffer
	pinUsed int
	// down and up are page-locked areas for a Read's downloads and a Write's uploads
	// (hostio.go), reset whenever the stream has been waited for.
	down, up hostIO

	// Expert slots: pinned host stacks (freed at Close) and the upload stager.
	hostBufs []*cuda.HostBuffer
	stage    *stager
	// directDone marks the end of WriteSlots' copies straight from registered memory,
	// waited for before it returns (created at the first; destroyed at Close).
	directDone *cuda.Event
	// lap is the copy stream of WriteSlotsAsync and its events (created at the first).
	lap copyLane
	// late is LateRows' page-locked area (created at the first, freed at Close).
	late *lateArea
	// mail is where decode routers post their routes when mailOn (routemail.go; created at
	// the first, freed at Close).
	mail      *routeMail
	mailOn    bool
	mailReads int // routes read from the mail (for tests)
	// the staging ring's shape (SetStaging)
	stagingBufs, stagingBufBytes int

	// ropes holds each frequency table RoPE was given, in VRAM (a model keeps one Rope).
	ropes map[*compute.Rope]cuda.DevicePtr
	// rows are pinned host rows from PinnedFloats and the tensors placed there, freed at
	// Close.
	rows []*cuda.HostBuffer
	// inHost names the tensors Place puts in pinned host memory (PlaceInHost).
	inHost map[string]bool
	// decodedTaps holds conv weights of types the conv kernel does not read, decoded to f16.
	decodedTaps map[*Weight]cuda.DevicePtr
	// prefillMMA runs a batch's attention on the tensor cores (cuda.AttentionPrefillMMA,
	// AttentionPrefillMMAInt8) where a kernel exists for the head size; off with
	// STRATA_PREFILL_MMA=0, which keeps the tiled kernel for every batch (to compare them).
	prefillMMA bool
	// gemmQ8 runs a batch's expert GEMMs on the integer tensor cores (cuda.GemmExpertsQ8)
	// for the types that have the kernel; off with STRATA_GEMM_Q8=0, which keeps the f16
	// GEMM (GemmExperts) for every type (to compare them).
	gemmQ8 bool
	// decodeMMA runs a decode step's attention on the tensor cores (cuda.AttentionDecodeMMA,
	// AttentionDecodeMMAInt8) where a kernel exists for the head size; off with
	// STRATA_DECODE_MMA=0, which keeps attention_decode (to compare them).
	decodeMMA bool
}

type devScratch struct {
	p cuda.DevicePtr
	n int
}

// New opens the driver, the device's context, the kernels and a stream.
func New(o Options) (*Backend, error) {
	drv, err := cuda.Open()
	if err != nil {
		return nil, fmt.Errorf("gpu: %w: %w", ErrNoGPU, err)
	}
	n, err := drv.DeviceCount()
	if err == nil && o.Device == AutoDevice {
		o.Device = 0
		if n > 1 {
			o.Device = max(MostFree(freeVRAM(drv, n)), 0)
		}
	}
	if err != nil || n <= o.Device || o.Device < 0 {
		drv.Close()
		if err == nil {
			err = fmt.Errorf("device %d requested, %d present", o.Device, n)
		}
		return nil, fmt.Errorf("gpu: %w: %w", ErrNoGPU, err)
	}
	info, err := drv.Device(o.Device)
	if err != nil {
		drv.Close()
		return nil, fmt.Errorf("gpu: %w", err)
	}
	newCtx := drv.NewContext
	if o.OwnContext {
		newCtx = drv.NewOwnContext
	}
	ctx, err := newCtx(o.Device)
	if err != nil {
		drv.Close()
		return nil, fmt.Errorf("gpu: %w", err)
	}
	if p := os.Getenv("STRATA_CUDA_FATBIN"); o.Kernels == nil && p != "" {
		if o.Kernels, err = os.ReadFile(p); err != nil {
			ctx.Close()
			drv.Close()
			return nil, fmt.Errorf("gpu: STRATA_CUDA_FATBIN: %w", err)
		}
	}
	var k *cuda.Kernels
	if o.Kernels != nil {
		k, err = ctx.LoadKernelsFrom(o.Kernels)
	} else {
		k, err = ctx.LoadKernels()
	}
	if err != nil {
		ctx.Close()
		drv.Close()
		return nil, fmt.Errorf("gpu: %s: %w", info.Name, err)
	}
	s, err := ctx.NewStream()
	if err != nil {
		k.Unload()
		ctx.Close()
		drv.Close()
		return nil, fmt.Errorf("gpu: %w", err)
	}
	b := &Backend{drv: drv, ctx: ctx, k: k, s: s, info: info, budget: o.BudgetBytes, scratch: map[string]devScratch{},
		stagingBufs: stagingBufs, stagingBufBytes: stagingBufBytes, prefillMMA: os.Getenv("STRATA_PREFILL_MMA") != "0",
		gemmQ8: os.Getenv("STRATA_GEMM_Q8") != "0", decodeMMA: os.Getenv("STRATA_DECODE_MMA") != "0"}
	b.step = stepGraph{
		enabled: !o.Eager && os.Getenv("STRATA_CUDA_GRAPHS") != "0",
		capture: b.captureStep,
		report:  b.err.Set,
	}
	b.step.maxOps = stepChunkOps
	if n, err := strconv.Atoi(os.Getenv("STRATA_STEP_CHUNK")); err == nil && n >= 0 { // 0: no cuts
		b.step.maxOps = n
	}
	if os.Getenv("STRATA_STEP_TIMING") == "1" {
		b.step.timer = &stepTimer{ctx: ctx, s: s}
	}
	return b, nil
}

// do queues one op's work through the step recorder; sig lists every pointer, size and
// scalar the work is launched with (see stepGraph).
func (b *Backend) do(fn func() error, sig ...uint64) { b.step.op(fn, sig...) }

// u is a pointer in a signature.
func u(p cuda.DevicePtr) uint64 { return uint64(p) }

// Op codes, the first word of each op's signature.
const (
	opPin uint64 = iota + 1
	opGetRows
	opRMSNorm
	opAdd
	opRope
	opKVWrite
	opAttention
	opQuantize
	opMatVecQ8
	opMatVec
	opGemm
	opRoute
	opGateUp
	opMatVecExperts
	opSwiGLU
	opMoEDown
	opMoECombine
	opCopy
	opAddBias
	opRopeTable
	opExpertBias
	opConv1D
	opSiLU
	opMulSigmoid
	opGatedNorm
	opRopePartial
	opSigmoidRoutes
	opL2NormQK
	opDeltaRule
	opKVWriteInt8
	opAttentionInt8
)

// streamGraph is a captured graph launched on the backend's stream.
type streamGraph struct {
	g *cuda.Graph
	s *cuda.Stream
}

func (g streamGraph) Launch() error  { return g.g.Launch(g.s) }
func (g streamGraph) Destroy() error { return g.g.Destroy() }

// captureStep records fns into a graph. On failure nothing of fns has run.
func (b *Backend) captureStep(fns []func() error) (graphRunner, error) {
	if err := b.s.BeginCapture(); err != nil {
		return nil, err
	}
	var first error
	for _, fn := range fns {
		if err := fn(); err != nil && first == nil {
			first = err
		}
	}
	g, err := b.s.EndCapture()
	if err != nil {
		return nil, err
	}
	if first != nil {
		_ = g.Destroy()
		return nil, first
	}
	return streamGraph{g: g, s: b.s}, nil
}

// pinned copies vals into this step's pinned input area and returns their host address;
// false when there is no room (the caller then uploads from pageable memory).
func (b *Backend) pinned(vals []int32) (unsafe.Pointer, bool) {
	const size = 64 << 10
	n := 4 * len(vals)
	if b.pin == nil {
		hb, err := b.ctx.HostAlloc(size)
		if err != nil {
			return nil, false
		}
		b.pin = hb
	}
	if b.pinUsed+n > len(b.pin.Bytes) {
		return nil, false
	}
	p := unsafe.Pointer(&b.pin.Bytes[b.pinUsed])
	copy(unsafe.Slice((*int32)(p), len(vals)), vals)
	b.pinUsed += (n + 15) &^ 15
	return p, true
}

// upload copies small int32 inputs to dst: through pinned memory as part of the step
// when there is room, else from pageable memory (which ends any graph for this step).
func (b *Backend) upload(dst cuda.DevicePtr, vals []int32) {
	if src, ok := b.pinned(vals); ok {
		n := 4 * len(vals)
		b.do(func() error { return b.s.CopyToDevice(dst, src, n) }, opPin, u(dst), uint64(uintptr(src)), uint64(n))
		return
	}
	b.step.brk()
	b.err.Set(cuda.Upload(b.s, dst, vals))
}

// GraphStats reports how many segment graphs were captured, how many segments were
// launched as a graph, and how many graphs were dropped to stay within the cache.
func (b *Backend) GraphStats() (captures, replays, evictions int) {
	return b.step.Captures, b.step.Replays, b.step.Evictions
}

// Name is the device's name.
func (b *Backend) Name() string { return "cuda (" + b.info.Name + ")" }

// UsedBytes is the VRAM the backend has allocated.
func (b *Backend) UsedBytes() int64 { return b.used }

// Close frees everything.
func (b *Backend) Close() error {
	var errs []error
	for _, p := range b.allocs {
		errs = append(errs, b.ctx.Free(p))
	}
	b.allocs = nil
	b.step.disable()
	if b.step.timer != nil {
		b.step.timer.close()
	}
	if b.stage != nil {
		errs = append(errs, b.s.Synchronize(), b.stage.close())
	}
	// The copy stream may read registered memory: done before it is unregistered below.
	errs = append(errs, b.s.Synchronize(), b.directDone.Destroy(), b.lap.close())
	for _, hb := range b.hostBufs {
		errs = append(errs, hb.Free())
	}
	for _, hb := range b.rows {
		errs = append(errs, hb.Free())
	}
	errs = append(errs, b.s.Synchronize(), b.down.free(), b.up.free(), b.late.free(), b.mail.free())
	errs = append(errs, b.pin.Free(), b.s.Destroy(), b.k.Unload(), b.ctx.Close())
	b.drv.Close()
	return errors.Join(errs...)
}

// Err returns and clears the first error since the last call.
func (b *Backend) Err() error { return b.err.Take() }

// alloc takes n bytes of VRAM within the budget; freed at Close.
func (b *Backend) alloc(n int, what string) (cuda.DevicePtr, error) {
	n = max(n, 4)
	if b.budget > 0 && b.used+int64(n) > b.budget {
		return 0, fmt.Errorf("gpu: %s: %d MiB more would exceed the VRAM budget of %d MiB (%d MiB used); raise --vram-budget-mib or use a smaller model or context",
			what, n>>20, b.budget>>20, b.used>>20)
	}
	p, err := b.ctx.Alloc(n)
	if err != nil {
		return 0, fmt.Errorf("gpu: %s: %w", what, err)
	}
	b.used += int64(n)
	b.allocs = append(b.allocs, p)
	return p, nil
}

// scratchBuf returns a reusable device buffer of at least n bytes for one purpose.
func (b *Backend) scratchBuf(name string, n int) cuda.DevicePtr {
	if s, ok := b.scratch[name]; ok && s.n >= n {
		return s.p
	}
	p, err := b.alloc(n, "scratch "+name)
	if err != nil {
		b.err.Set(err)
		return 0
	}
	b.scratch[name] = devScratch{p, n} // the old one stays allocated until Close (rare growth)
	return p
}

type buf struct {
	p cuda.DevicePtr
	n int
}

func (x *buf) Len() int { return x.n }

func dev(x compute.Buf) cuda.DevicePtr { return x.(*buf).p }

// NewBuf allocates n floats of VRAM. A failure is recorded (see Err) and yields an empty
// buffer, so the forward pass reports it at its next check.
func (b *Backend) NewBuf(n int) compute.Buf {
	p, err := b.alloc(4*n, "activations")
	b.err.Set(err)
	return &buf{p: p, n: n}
}

// Write uploads floats: through the page-locked upload area when there is room (an
// asynchronous copy: the caller may reuse src at once), else from src itself.
func (b *Backend) Write(dst compute.Buf, src []float32) {
	b.q8.drop()
	b.step.brk()
	if len(src) > 0 {
		if area := b.up.take(b.ctx, 4*len(src)); area != nil {
			copy(floatsOf(area), src)
			b.err.Set(b.s.CopyToDevice(dev(dst), unsafe.Pointer(&area[0]), len(area)))
			return
		}
	}
	b.err.Set(cuda.Upload(b.s, dev(dst), src))
}

// Read downloads floats, waiting for the work queued before; the routes chosen since the
// last Read reach the host with them. Both land in the page-locked download area when it
// has room, so the two copies are queued and waited for once.
func (b *Backend) Read(src compute.Buf, dst []float32) {
	if b.mailed(nil, dev(src), len(dst)) && b.readMail(dst) {
		return
	}
	b.finishStep(func() {
		var area []byte
		if len(dst) > 0 {
			area = b.down.take(b.ctx, 4*len(dst))
		}
		if area == nil {
			b.err.Set(cuda.Download(b.s, dst, dev(src)))
			b.flushRoutes()
			b.synced()
			return
		}
		b.err.Set(b.s.CopyFromDevice(unsafe.Pointer(&area[0]), dev(src), len(area)))
		fill := b.routeDownload()
		b.err.Set(b.s.Synchronize())
		copy(dst, floatsOf(area))
		if fill != nil {
			fill()
		}
		b.synced()
	})
}

// synced notes that the stream has been waited for: every copy through the page-locked
// areas is done, so they can be handed out again.
func (b *Backend) synced() {
	b.down.reset()
	b.up.reset()
	b.late.synced()
	b.mail.idle()
}

// finishStep ends the step's segment and runs read, the download that waits for it.
func (b *Backend) finishStep(read func()) {
	b.step.end()
	b.pinUsed = 0 // the download waits for every copy out of the pinned area
	if t := b.step.timer; t != nil {
		t.read(read)
		return
	}
	read()
}

// Copy moves n floats on the device.
func (b *Backend) Copy(dst compute.Buf, dstOff int, src compute.Buf, srcOff int, n int) {
	b.q8.drop()
	d, s := dev(dst).Add(4*dstOff), dev(src).Add(4*srcOff)
	b.do(func() error { return b.s.CopyDevice(d, s, 4*n) }, opCopy, u(d), u(s), uint64(n))
}

// Weight is a tensor in VRAM.
type Weight struct {
	name             string
	typ              quant.Type // as stored on the device (may differ from the file's)
	rows, cols, exps int
	rowBytes         int
	stride           int // bytes from one expert to the next
	p                cuda.DevicePtr
	host             []byte // host stacks: the host view of p
}

// expertBytes is the size of one expert's matrix.
func (w *Weight) expertBytes() int { return w.rows * w.rowBytes }

func (w *Weight) Name() string     { return w.name }
func (w *Weight) Type() quant.Type { return w.typ }
func (w *Weight) Rows() int        { return w.rows }
func (w *Weight) Cols() int        { return w.cols }
func (w *Weight) Experts() int     { return w.exps }

// Place copies a tensor to VRAM. Vectors (norm weights) become float32; types the kernels
// cannot read are dequantised to float16 on the host first.
func (b *Backend) Place(spec compute.WeightSpec) (compute.Weight, error) {
	exps := max(spec.Experts, 1)
	data, typ := spec.Data, spec.Type
	n := spec.Rows * spec.Cols * exps
	if want, err := quant.RowBytes(typ, spec.Cols); err != nil || want*spec.Rows*exps != len(data) || (spec.ExpertStride != 0 && spec.ExpertStride != want*spec.Rows) {
		return nil, fmt.Errorf("gpu: tensor %q: %d bytes do not hold %d x %d x %d %s", spec.Name, len(data), exps, spec.Rows, spec.Cols, typ)
	}
	// The exact range, before the copy faults it in: the file's read-ahead would also read
	// the neighbouring expert stacks, which tiered mode places elsewhere.
	_ = platform.AdviseWillNeed(data)
	// Vectors, stacked per expert too (gpt-oss's expert biases), are read as float32.
	vector := spec.Rows == 1
	if (vector && typ != quant.F32) || (!vector && !cuda.QuantType(typ).Supported()) {
		f := make([]float32, n)
		if err := quant.Dequantize(typ, data, f); err != nil {
			return nil, fmt.Errorf("gpu: tensor %q: %w", spec.Name, err)
		}
		if vector {
			data, typ = f32Bytes(f), quant.F32
		} else {
			h := make([]uint16, n)
			for i, v := range f {
				h[i] = quant.FP32ToFP16(v)
			}
			data, typ = u16Bytes(h), quant.F16
		}
	}
	rb, _ := quant.RowBytes(typ, spec.Cols)
	if b.inHost[spec.Name] {
		hb, err := b.ctx.HostAlloc(len(data))
		if err != nil {
			return nil, fmt.Errorf("gpu: tensor %q in pinned host memory: %w", spec.Name, err)
		}
		copy(hb.Bytes, data)
		b.rows = append(b.rows, hb)
		return &Weight{name: spec.Name, typ: typ, rows: spec.Rows, cols: spec.Cols, exps: exps, rowBytes: rb, stride: rb * spec.Rows, p: hb.Dev}, nil
	}
	b.step.brk()
	p, err := b.carveOrAlloc(len(data), "tensor "+spec.Name)
	if err != nil {
		return nil, err
	}
	if err := cuda.Upload(b.s, p, data); err != nil {
		return nil, fmt.Errorf("gpu: tensor %q: %w", spec.Name, err)
	}
	return &Weight{name: spec.Name, typ: typ, rows: spec.Rows, cols: spec.Cols, exps: exps, rowBytes: rb, stride: rb * spec.Rows, p: p}, nil
}

// KV is a cache in VRAM: per layer, keys and values [position][kv head][head dim], float16,
// or int8 with a float32 scale per block of each head's row beside them ([position][kv
// head][blocks], the blocks and the rounding of engine/kv's int8 cache).
type KV struct {
	k, v      []cuda.DevicePtr
	ks, vs    []cuda.DevicePtr // per layer, the scales of an int8 cache (nil for f16)
	int8      bool
	ring      []int // per layer: positions kept (a ring, slot = position % ring), 0 for all
	positions int
	kvHeads   int
	headDim   int
	row       int // kvHeads*headDim
}

// Capacity is the number of positions.
func (c *KV) Capacity() int { return c.positions }

// int8Layer is layer l of an int8 cache as the kernels take it.
func (c *KV) int8Layer(l int) cuda.Int8KV {
	return cuda.Int8KV{K: c.k[l], KScales: c.ks[l], V: c.v[l], VScales: c.vs[l]}
}

// NewKV allocates the cache: float16, or int8 with its scales when spec.Type is "int8". All
// layers' keys, values (and scales) are one allocation, carved at compute.SlotAlign steps: a
// layer's keys of a short context are well under the driver's 2 MiB granularity, and 96 of
// them (q30b's 48 layers at 656 positions) should not each take a granule of their own.
func (b *Backend) NewKV(spec compute.KVSpec) (compute.KV, error) {
	if spec.Type != "" && spec.Type != "f16" && spec.Type != "int8" {
		return nil, fmt.Errorf("gpu: kv cache type %q is not supported on the GPU (f16 and int8 are)", spec.Type)
	}
	if spec.Keep != nil && len(spec.Keep) != spec.Layers {
		return nil, fmt.Errorf("gpu: kv cache: %d kept-position counts for %d layers", len(spec.Keep), spec.Layers)
	}
	c := &KV{positions: spec.Positions, kvHeads: spec.KVHeads, headDim: spec.HeadDim, row: spec.KVHeads * spec.HeadDim,
		ring: make([]int, spec.Layers), int8: spec.Type == "int8"}
	// parts[l] are layer l's keys, values (f16), or keys, key scales, values, value scales.
	parts := make([][]int64, spec.Layers)
	var total int64
	for l := range spec.Layers {
		rows := spec.Positions
		if spec.Keep != nil && spec.Keep[l] > 0 && spec.Keep[l] < spec.Positions {
			rows, c.ring[l] = spec.Keep[l], spec.Keep[l]
		}
		if c.int8 {
			data, scales := int64(rows*c.row), int64(rows*4*(c.row/cuda.Int8KVBlock(spec.HeadDim)))
			parts[l] = []int64{data, scales, data, scales}
		} else {
			parts[l] = []int64{int64(rows * c.row * 2), int64(rows * c.row * 2)}
		}
		for _, n := range parts[l] {
			total += compute.SlotAligned(max(n, 1))
		}
	}
	if total == 0 {
		return c, nil
	}
	base, err := b.alloc(int(total), fmt.Sprintf("kv cache (%d layers, %d positions, %s)", spec.Layers, spec.Positions, cmp.Or(spec.Type, "f16")))
	if err != nil {
		return nil, err
	}
	at := base
	for l := range spec.Layers {
		var p [4]cuda.DevicePtr
		for i, n := range parts[l] {
			p[i] = at
			at += cuda.DevicePtr(compute.SlotAligned(max(n, 1)))
		}
		if c.int8 {
			c.k, c.ks, c.v, c.vs = append(c.k, p[0]), append(c.ks, p[1]), append(c.v, p[2]), append(c.vs, p[3])
		} else {
			c.k, c.v = append(c.k, p[0]), append(c.v, p[1])
		}
	}
	return c, nil
}

// positions uploads pos0..pos0+n-1 (or the given list) as int32, skipping unchanged ones.
func (b *Backend) positions(list []int, pos0, n int) cuda.DevicePtr {
	want := make([]int32, n)
	for i := range want {
		if list != nil {
			want[i] = int32(list[i])
		} else {
			want[i] = int32(pos0 + i)
		}
	}
	if len(want) == len(b.posHost) {
		same := true
		for i := range want {
			if want[i] != b.posHost[i] {
				same = false
				break
			}
		}
		if same {
			return b.posBuf
		}
	}
	if n > b.posCap {
		p, err := b.alloc(4*n, "positions")
		if err != nil {
			b.err.Set(err)
			return 0
		}
		b.posBuf, b.posCap = p, n
	}
	b.upload(b.posBuf, want)
	b.posHost = want
	return b.posBuf
}

// Embed gathers table rows.
func (b *Backend) Embed(dst compute.Buf, table compute.Weight, ids []int) error {
	w := table.(*Weight)
	ids32 := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= w.rows {
			return fmt.Errorf("gpu: embed %q: token id %d outside [0, %d)", w.name, id, w.rows)
		}
		ids32[i] = int32(id)
	}
	b.q8.drop()
	p := b.scratchBuf("ids", 4*len(ids))
	if p == 0 {
		return b.err.Take()
	}
	b.upload(p, ids32)
	t, out, n := cuda.QuantType(w.typ), dev(dst), len(ids)
	b.do(func() error { return b.k.GetRows(b.s, t, w.p, p, n, out, w.cols) }, opGetRows, uint64(t), u(w.p), u(p), uint64(n), u(out), uint64(w.cols))
	return nil
}

// RMSNorm normalises rows of w.Cols() values.
func (b *Backend) RMSNorm(dst, x compute.Buf, wt compute.Weight, rows int, eps float32) {
	w := wt.(*Weight)
	b.q8.drop()
	if rows == 1 && b.normQ8(dst, x, nil, w, eps) {
		return
	}
	xp, yp := dev(x), dev(dst)
	b.do(func() error { return b.k.RMSNorm(b.s, xp, w.p, yp, rows, w.cols, eps) },
		opRMSNorm, u(xp), u(w.p), u(yp), uint64(rows), uint64(w.cols), uint64(math.Float32bits(eps)))
}

// Add accumulates x into dst.
func (b *Backend) Add(dst, x compute.Buf, n int) {
	b.q8.drop()
	d, xp := dev(dst), dev(x)
	b.do(func() error { return b.k.Add(b.s, d, xp, d, n) }, opAdd, u(d), u(xp), uint64(n))
}

// RoPENeoX rotates every head.
func (b *Backend) RoPENeoX(x compute.Buf, n, heads, headDim int, positions []int, base float32) {
	pos := b.positions(positions, 0, n)
	b.q8.drop()
	xp := dev(x)
	b.do(func() error { return b.k.RopeNeoX(b.s, xp, pos, n, heads, headDim, headDim, base) },
		opRope, u(xp), u(pos), uint64(n), uint64(heads), uint64(headDim), uint64(math.Float32bits(base)))
}

// RoPE rotates every head by r's frequency table, uploaded once per table.
func (b *Backend) RoPE(x compute.Buf, n, heads, headDim int, positions []int, r *compute.Rope) {
	half := len(r.InvFreq)
	tab, scale := b.ropeTable(r, headDim)
	if tab == 0 {
		return
	}
	pos := b.positions(positions, 0, n)
	b.q8.drop()
	xp := dev(x)
	b.do(func() error { return b.k.RopeTable(b.s, xp, pos, tab, n, heads, headDim, half, scale) },
		opRopeTable, u(xp), u(pos), u(tab), uint64(n), uint64(heads), uint64(headDim), uint64(half), uint64(math.Float32bits(scale)))
}

// AddBias adds the bias vector to each row.
func (b *Backend) AddBias(x compute.Buf, bias compute.Weight, rows int) {
	w := bias.(*Weight)
	if w.rows != 1 || w.exps != 1 || w.typ != quant.F32 {
		b.err.Set(fmt.Errorf("gpu: bias %q is not a float32 vector", w.name))
		return
	}
	b.q8.drop()
	xp, cols := dev(x), w.cols
	b.do(func() error { return b.k.AddBias(b.s, xp, w.p, rows, cols) }, opAddBias, u(xp), u(w.p), uint64(rows), uint64(cols))
}

// StoreKV converts (or quantises) and writes keys and values.
func (b *Backend) StoreKV(c compute.KV, layer, pos0, n int, k, v compute.Buf) {
	kv := c.(*KV)
	pos := b.positions(nil, pos0, n)
	ring := kv.ring[layer]
	if kv.int8 {
		for _, w := range [2][3]cuda.DevicePtr{{dev(k), kv.k[layer], kv.ks[layer]}, {dev(v), kv.v[layer], kv.vs[layer]}} {
			src, cache, scales := w[0], w[1], w[2]
			b.do(func() error { return b.k.KVWriteInt8(b.s, src, cache, scales, pos, n, kv.kvHeads, kv.headDim, ring) },
				opKVWriteInt8, u(src), u(cache), u(scales), u(pos), uint64(n), uint64(kv.kvHeads), uint64(kv.headDim), uint64(ring))
		}
		return
	}
	for _, w := range [2][2]cuda.DevicePtr{{dev(k), kv.k[layer]}, {dev(v), kv.v[layer]}} {
		src, cache := w[0], w[1]
		b.do(func() error { return b.k.KVWrite(b.s, src, cache, pos, n, kv.row, ring) }, opKVWrite, u(src), u(cache), u(pos), uint64(n), uint64(kv.row), uint64(ring))
	}
}

// Attention: the split-K decode kernel for one token, the tiled kernel for a batch, each
// reading the cache in its own format; a batch takes the tensor-core kernel for its cache's
// format instead where it has one for the head size (multiples of 16 up to 128), unless
// STRATA_PREFILL_MMA=0.
func (b *Backend) Attention(dst, q compute.Buf, c compute.KV, s compute.AttentionSpec) {
	kv := c.(*KV)
	o := cuda.AttentionOptions{Window: s.Window, Ring: kv.ring[s.Layer]}
	if s.Sinks != nil {
		w := s.Sinks.(*Weight)
		if w.typ != quant.F32 || w.rows*w.cols*w.exps != s.Heads {
			b.err.Set(fmt.Errorf("gpu: attention sinks %q: %d x %d %s, want %d float32 logits", w.name, w.rows, w.cols, w.typ, s.Heads))
			return
		}
		o.Sinks = w.p
	}
	pos := b.positions(nil, s.Pos0, s.N)
	b.q8.drop()
	if s.N == 1 {
		// the spans for the cache's capacity, not the position: a captured step replays at
		// every position, the kernels reading it from pos
		splits := cuda.DecodeSplits(kv.positions, s.Heads, s.KVHeads)
		decode, decodeInt8 := b.k.AttentionDecode, b.k.AttentionDecodeInt8
		if b.decodeMMA && cuda.AttentionDecodeMMAFits(s.HeadDim) {
			decode, decodeInt8 = b.k.AttentionDecodeMMA, b.k.AttentionDecodeMMAInt8
			splits = cuda.DecodeSplitsMMA(kv.positions, s.Heads, s.KVHeads)
		}
		scratch := cuda.DevicePtr(0)
		cols := s.Heads * s.HeadDim
		if splits > 1 {
			scratch = b.scratchBuf("attention", cuda.AttentionDecodeScratchBytes(s.Heads, s.HeadDim, splits))
			// the merge quantises the output for the output projection's 8-bit matvec
			// (quantized finds it), one launch less a layer
			if s.HeadDim%32 == 0 {
				o.Q8 = b.scratchBuf("q8 x", cuda.Q8RowBytes(cols))
			}
		}
		qp, kc, vc, out := dev(q), kv.k[s.Layer], kv.v[s.Layer], dev(dst)
		if kv.int8 {
			c8 := kv.int8Layer(s.Layer)
			b.do(func() error {
				return decodeInt8(b.s, qp, c8, out, pos, s.Heads, s.KVHeads, s.HeadDim, s.Scale, splits, scratch, o)
			}, opAttentionInt8, u(qp), u(c8.K), u(c8.KScales), u(c8.V), u(c8.VScales), u(out), u(pos), uint64(s.Heads), uint64(s.KVHeads), uint64(s.HeadDim),
				uint64(math.Float32bits(s.Scale)), uint64(splits), u(scratch), u(o.Sinks), uint64(o.Window), uint64(o.Ring), u(o.Q8))
		} else {
			b.do(func() error {
				return decode(b.s, qp, kc, vc, out, pos, s.Heads, s.KVHeads, s.HeadDim, s.Scale, splits, scratch, o)
			}, opAttention, u(qp), u(kc), u(vc), u(out), u(pos), uint64(s.Heads), uint64(s.KVHeads), uint64(s.HeadDim),
				uint64(math.Float32bits(s.Scale)), uint64(splits), u(scratch), u(o.Sinks), uint64(o.Window), uint64(o.Ring), u(o.Q8))
		}
		if o.Q8 != 0 {
			b.q8 = q8Cache{x: out, rows: 1, cols: cols, xq: o.Q8}
		}
		return
	}
	b.step.brk()
	// S = Q K^T and P V on the tensor cores: q and the softmax weights P (and an int8 cache's
	// dequantised K and V) are rounded to f16 on the way into the products (f32 accumulators
	// and softmax), where the tiled kernels keep them in f32, so a prompt's outputs differ
	// from theirs by about 1e-3 of their scale (and decode, one token, still runs in f32).
	mma := b.prefillMMA && cuda.AttentionPrefillMMAFits(s.HeadDim)
	switch {
	case kv.int8 && mma:
		b.err.Set(b.k.AttentionPrefillMMAInt8(b.s, dev(q), kv.int8Layer(s.Layer), dev(dst), pos, s.N, s.Heads, s.KVHeads, s.HeadDim, s.Scale, o))
	case kv.int8:
		b.err.Set(b.k.AttentionPrefillInt8(b.s, dev(q), kv.int8Layer(s.Layer), dev(dst), pos, s.N, s.Heads, s.KVHeads, s.HeadDim, s.Scale, o))
	case mma:
		b.err.Set(b.k.AttentionPrefillMMA(b.s, dev(q), kv.k[s.Layer], kv.v[s.Layer], dev(dst), pos, s.N, s.Heads, s.KVHeads, s.HeadDim, s.Scale, o))
	default:
		b.err.Set(b.k.AttentionPrefill(b.s, dev(q), kv.k[s.Layer], kv.v[s.Layer], dev(dst), pos, s.N, s.Heads, s.KVHeads, s.HeadDim, s.Scale, o))
	}
}

// PlaceInHost makes Place put the named tensor in pinned, mapped host memory instead of
// VRAM: the kernels read it over PCIe. For tables of which a step reads a few rows (the
// token embeddings), it leaves their VRAM to the expert cache.
func (b *Backend) PlaceInHost(name string) {
	if b.inHost == nil {
		b.inHost = map[string]bool{}
	}
	b.inHost[name] = true
}

// PlacedBytes is what Place takes for a rows x cols tensor of typ stored in fileBytes, in
// VRAM or pinned host memory: the file's bytes, or float32 for a vector and float16 for a
// type the kernels cannot read.
func PlacedBytes(typ quant.Type, rows, cols int, fileBytes int64) int64 {
	n := int64(rows) * int64(cols)
	switch {
	case rows == 1 && typ != quant.F32:
		return 4 * n
	case rows != 1 && !cuda.QuantType(typ).Supported():
		return 2 * n
	}
	return fileBytes
}

// PlaceBytes is what Place takes of VRAM for spec (PlacedBytes over all its experts).
func PlaceBytes(spec compute.WeightSpec) int64 {
	return PlacedBytes(spec.Type, spec.Rows, spec.Cols*max(spec.Experts, 1), int64(len(spec.Data)))
}

// Ordinal is the CUDA device the backend runs on.
func (b *Backend) Ordinal() int { return b.ctx.Ordinal }

// PinnedFloats allocates n floats of page-locked host memory (portable: every context's
// copies read and write it at full speed), freed at Close. The expert cache's helper GPUs
// return their results through such rows.
func (b *Backend) PinnedFloats(n int) ([]float32, error) {
	hb, err := b.ctx.HostAlloc(4 * n)
	if err != nil {
		return nil, fmt.Errorf("gpu: %d pinned floats: %w", n, err)
	}
	b.rows = append(b.rows, hb)
	return unsafe.Slice((*float32)(unsafe.Pointer(&hb.Bytes[0])), n), nil
}

// FreeBytes is the device's free memory now.
func (b *Backend) FreeBytes() int64 {
	free, _, err := b.ctx.MemInfo()
	if err != nil {
		return 0
	}
	return int64(free)
}

// HeadDimSupported reports whether the attention kernels exist for this head size.
func HeadDimSupported(d int) bool { return d > 0 && d <= cuda.MaxAttentionHeadDim && d%16 == 0 }

// DeltaNetLacks says what the Gated DeltaNet kernels cannot run of layers with this key head
// size and conv width ("" when they run them).
func DeltaNetLacks(keyDim, convKernel int) string {
	switch {
	case keyDim > cuda.MaxDeltaKDim:
		return fmt.Sprintf("the GPU delta rule takes key heads of at most %d values, not %d", cuda.MaxDeltaKDim, keyDim)
	case convKernel > cuda.ConvMaxTaps:
		return fmt.Sprintf("the GPU conv takes at most %d taps, not %d", cuda.ConvMaxTaps, convKernel)
	}
	return ""
}
