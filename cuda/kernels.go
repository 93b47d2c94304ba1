package cuda

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// kernelsFatbinGz is cuda/kernels/*.cu compiled by `make kernels` (see README.md) and
// gzipped: SASS for seven architectures is ~34 MB raw and ~9 MB gzipped, which keeps the
// repository, the binaries and what travels to and from the GPU machine small; a string so
// that nothing can write to it.
//
//go:embed kernels.fatbin.gz
var kernelsFatbinGz string

// kernelsChecksum is the sha256sum of the sources kernelsFatbinGz was built from.
//
//go:embed kernels.sha256
var kernelsChecksum string

// EmbeddedChecksum returns the `sha256sum` listing of the kernel sources the embedded
// fatbin was built from.
func EmbeddedChecksum() string { return kernelsChecksum }

// Kernels is the kernel module loaded into one context, with a typed launcher per kernel.
// Launchers only queue work: errors from inside a kernel surface at the next synchronisation.
type Kernels struct {
	ctx *Context
	mod *Module
	fns map[string]*Function
	// rowsPerBlock fixes the 8-bit matvec kernels' rows per block (1, 2 or 4; 0: chosen
	// per shape by mmvqRowsPerBlock), for the benchmarks that compare them.
	rowsPerBlock int
}

// kernelNames lists every kernel that must be in the module.
func kernelNames() []string {
	var names []string
	for _, t := range SupportedTypes() {
		names = append(names, "mul_mat_vec_"+t.String(), "dequantize_"+t.String()+"_f16", "get_rows_"+t.String(), "gemm_q_"+t.String())
	}
	for _, t := range SupportedTypes() {
		if t.HasQ8MatVec() {
			names = append(names, "mul_mat_vec_q8_"+t.String(), "moe_gate_up_q8_"+t.String(), "moe_down_q8_"+t.String())
		}
	}
	for _, t := range SupportedTypes() {
		if t.HasGemmQ8() {
			names = append(names, "gemm_q8_"+t.String()+"_bm32", "gemm_q8_"+t.String()+"_bm64")
		}
	}
	names = append(names, "quantize_q8", "quantize_q8_sums")
	for hd := attentionHeadStep; hd <= MaxAttentionHeadDim; hd += attentionHeadStep {
		names = append(names, fmt.Sprintf("attention_decode_%d", hd), fmt.Sprintf("attention_prefill_%d", hd),
			fmt.Sprintf("attention_decode_int8_%d", hd), fmt.Sprintf("attention_prefill_int8_%d", hd))
	}
	for hd := attentionHeadStep; hd <= MaxAttentionHeadDim; hd += attentionHeadStep {
		if AttentionPrefillMMAFits(hd) {
			names = append(names, fmt.Sprintf("attention_prefill_mma_%d", hd), fmt.Sprintf("attention_prefill_mma_int8_%d", hd))
		}
		if AttentionDecodeMMAFits(hd) {
			names = append(names, fmt.Sprintf("attention_decode_mma_%d", hd), fmt.Sprintf("attention_decode_mma_int8_%d", hd))
		}
	}
	names = append(names, deltaNetKernelNames()...)
	names = append(names, fusedKernelNames()...)
	names = append(names, sampleKernelNames()...)
	return append(names, "kv_write_int8", "attention_merge", "gemm_f16_f32", "gemm_f16_f16", "rms_norm", "rope_neox", "router_topk", "router_f32",
		"swiglu", "add_f32", "scaled_add", "moe_combine", "kv_write", "f32_to_f16", "swiglu_clamped", "add_bias", "expert_bias", "rope_table", "rope_table_store")
}

// LoadKernels loads the embedded fatbin into c.
func (c *Context) LoadKernels() (*Kernels, error) {
	image, err := embeddedFatbin()
	if err != nil {
		return nil, err
	}
	return c.LoadKernelsFrom(image)
}

// embeddedFatbin is the embedded fatbin, unzipped: 0.28 s for 34 MB on the 2-core CI VM
// (BenchmarkEmbeddedFatbin), paid once a backend opens.
func embeddedFatbin() ([]byte, error) {
	if len(kernelsFatbinGz) == 0 {
		return nil, fmt.Errorf("cuda: the embedded kernels.fatbin.gz is empty (run make kernels)")
	}
	image, err := gunzip(strings.NewReader(kernelsFatbinGz))
	if err != nil {
		return nil, fmt.Errorf("cuda: the embedded kernels.fatbin.gz: %w", err)
	}
	return image, nil
}

// gunzip unzips a gzip stream.
func gunzip(data io.Reader) ([]byte, error) {
	r, err := gzip.NewReader(data)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// LoadKernelsFrom loads a fatbin built from cuda/kernels, as nvcc wrote it or gzipped as
// `make kernels` leaves it (for development builds).
func (c *Context) LoadKernelsFrom(image []byte) (*Kernels, error) {
	if bytes.HasPrefix(image, []byte{0x1f, 0x8b}) { // the gzip magic; a fatbin starts 0x50ed55ba
		var err error
		if image, err = gunzip(bytes.NewReader(image)); err != nil {
			return nil, fmt.Errorf("cuda: kernels: a gzipped fatbin: %w", err)
		}
	}
	mod, err := c.LoadModule(image)
	if err != nil {
		return nil, err
	}
	k := &Kernels{ctx: c, mod: mod, fns: map[string]*Function{}}
	for _, name := range kernelNames() {
		f, err := mod.Function(name)
		if err != nil {
			_ = mod.Unload()
			return nil, fmt.Errorf("cuda: kernels: %w", err)
		}
		k.fns[name] = f
	}
	if early, err := c.canLaunchEarly(); err != nil {
		_ = mod.Unload()
		return nil, fmt.Errorf("cuda: kernels: %w", err)
	} else if early && k.probeEarly() {
		for name, f := range k.fns {
			f.early = launchesEarly(name)
		}
	}
	return k, nil
}

// probeEarly launches add_f32 over no elements the early way and waits for it: a driver
// that refuses such launches (a platform or mode without them) gets plain launches only.
func (k *Kernels) probeEarly() bool {
	f := k.fns["add_f32"]
	s, err := k.ctx.NewStream()
	if f == nil || err != nil {
		return false
	}
	defer s.Destroy()
	f.early = true
	err = k.Add(s, 0, 0, 0, 0)
	f.early = false
	return err == nil && s.Synchronize() == nil
}

// earlyKernels are the kernels (names, or name prefixes ending in _) that open with
// grid_dependency_entry (kernels/common.cuh), so that they may be launched before the
// kernel ahead of them ends: a decode step's chain of small kernels, where each launch's
// latency would otherwise come after the last kernel's end. A kernel listed here without
// the wait in its source would read its inputs too early.
var earlyKernels = []string{
	"rms_norm_q8", "quantize_q8", "qk_norm_rope", "add_f32", "router_f32",
	"mul_mat_vec_q8_", "moe_gate_up_q8_", "moe_down_q8_", "attention_decode_mma_", "attention_merge",
}

// launchesEarly says whether kernel name opens with the wait for the grid ahead of it.
func launchesEarly(name string) bool {
	return slices.ContainsFunc(earlyKernels, func(e string) bool { return earlyEntryNames(e, name) })
}

// earlyEntryNames says whether entry e of earlyKernels names kernel name.
func earlyEntryNames(e, name string) bool {
	return name == e || (strings.HasSuffix(e, "_") && strings.HasPrefix(name, e))
}

// canLaunchEarly says whether c's device takes programmatic dependent launches: compute
// capability 9.0 or later and a driver with cuLaunchKernelEx, unless STRATA_PDL=0.
func (c *Context) canLaunchEarly() (bool, error) {
	if os.Getenv("STRATA_PDL") == "0" || c.d.api.cuLaunchKernelEx == nil {
		return false, nil
	}
	info, err := c.d.Device(c.Ordinal)
	if err != nil {
		return false, err
	}
	return info.Major >= 9, nil
}

// Unload releases the module.
func (k *Kernels) Unload() error { return k.mod.Unload() }

// Context returns the context the kernels were loaded into.
func (k *Kernels) Context() *Context { return k.ctx }

func (k *Kernels) launch(name string, s *Stream, grid, block Dim3, shared int, args *Args) error {
	f, ok := k.fns[name]
	if !ok {
		return fmt.Errorf("cuda: no kernel %q", name)
	}
	return f.Launch(s, grid, block, shared, args)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// elementwise launch shape: enough blocks to fill a large GPU, then grid-stride.
func elemGrid(n int) Dim3 {
	b := ceilDiv(n, 256)
	if b > 4096 {
		b = 4096
	}
	return Dim3{X: b}
}

const mmvThreads = 128 // MMV_THREADS in mul_mat_vec.cu

// MatVec computes y[rows] = W[rows x cols] x[cols]: W of type t (rows in GGUF block
// layout, back to back), x and y float32. cols must be a multiple of t's block (8 for
// the plain types).
func (k *Kernels) MatVec(s *Stream, t QuantType, w, x, y DevicePtr, rows, cols int) error {
	return k.matVec(s, t, w, 0, 0, 1, x, 0, y, rows, cols, 0)
}

// MatVecBias is MatVec plus bias (rows f32 on the device) added to y in the same launch.
func (k *Kernels) MatVecBias(s *Stream, t QuantType, w, x, y, bias DevicePtr, rows, cols int) error {
	return k.matVec(s, t, w, 0, 0, 1, x, 0, y, rows, cols, bias)
}

// MatVecExperts computes, for each of the n routed slots e, y[e] = W[ids[e]] x[e], in one
// launch: W holds all experts of a tensor, expertStride bytes apart; ids is n int32 on the
// device; x[e] is x + e*cols floats when xPerExpert, else x for every slot; y is [n][rows].
func (k *Kernels) MatVecExperts(s *Stream, t QuantType, w DevicePtr, expertStride int, ids DevicePtr, n int,
	x DevicePtr, xPerExpert bool, y DevicePtr, rows, cols int) error {
	if ids == 0 {
		return fmt.Errorf("cuda: mul_mat_vec_%v: nil expert ids", t)
	}
	xs := 0
	if xPerExpert {
		xs = cols
	}
	return k.matVec(s, t, w, expertStride, ids, n, x, xs, y, rows, cols, 0)
}

func (k *Kernels) matVec(s *Stream, t QuantType, w DevicePtr, expertStride int, ids DevicePtr, n int,
	x DevicePtr, xStride int, y DevicePtr, rows, cols int, bias DevicePtr) error {
	if _, err := t.RowBytes(cols); err != nil {
		return fmt.Errorf("cuda: mul_mat_vec: %w", err)
	}
	if cols%8 != 0 || rows <= 0 || n <= 0 || n > 65535 {
		return fmt.Errorf("cuda: mul_mat_vec_%v: bad shape rows=%d cols=%d slots=%d", t, rows, cols, n)
	}
	a := new(Args).Ptr(w).Int64(int64(expertStride)).Ptr(ids).Ptr(x).Int64(int64(xStride)).Ptr(y).Int(rows).Int(cols).Ptr(bias)
	return k.launch("mul_mat_vec_"+t.String(), s, Dim3{X: rows, Y: n}, Dim3{X: mmvThreads}, 0, a)
}

// HasQ8MatVec reports whether t has the fast 8-bit-activation matvec (MatVecQ8).
func (t QuantType) HasQ8MatVec() bool {
	switch t {
	case Q4_0, Q8_0, MXFP4, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S:
		return true
	}
	return false
}

// Q8RowBytes is the size of one row of cols activations quantised by QuantizeQ8: cols int8
// values, one float32 scale per 32, padded to 16 bytes.
func Q8RowBytes(cols int) int { return (cols + cols/8 + 15) &^ 15 }

const mmvqThreads = 128 // MMVQ_THREADS in mul_mat_vec_q8.cu

// mmvqMinBlocks is how many blocks a launch of the 8-bit matvec kernels should have to
// keep the H200's 132 SMs busy (4 blocks each); fewer rows share a block's 128 threads
// among fewer rows (rpb 4 -> 2 -> 1) until it has.
const mmvqMinBlocks = 4 * 132

// mmvqRowsPerBlock picks the rows per block of 128 threads for rows output rows in all.
func (k *Kernels) mmvqRowsPerBlock(rows int) int {
	if k.rowsPerBlock > 0 {
		return k.rowsPerBlock
	}
	rpb := 4
	for rpb > 1 && rows/rpb < mmvqMinBlocks {
		rpb /= 2
	}
	return rpb
}

// mmvqAligned checks what the 8-bit kernels' widest loads assume of a matrix's address and
// expert stride: Q4_K and Q5_K read their 144- and 176-byte blocks 16 bytes at a time,
// IQ4_XS 8 and Q2_K 4 at a time (the other types' loads need no more than their blocks').
func mmvqAligned(t QuantType, w DevicePtr, expertStride int) error {
	a := 1
	switch t {
	case Q4_K, Q5_K:
		a = 16
	case IQ4_XS:
		a = 8
	case Q2_K:
		a = 4
	}
	if uint64(w)%uint64(a) != 0 || expertStride%a != 0 {
		return fmt.Errorf("cuda: %v weights at %#x, expert stride %d: the 8-bit kernels need %d-byte alignment", t, uint64(w), expertStride, a)
	}
	return nil
}

// QuantizeQ8 quantises x [rows][cols] f32 (cols a multiple of 32) to 8 bits per value
// with a scale per 32 values, into xq (rows * Q8RowBytes(cols) bytes), for MatVecQ8.
func (k *Kernels) QuantizeQ8(s *Stream, x, xq DevicePtr, rows, cols int) error {
	if rows <= 0 || rows > 65535 || cols <= 0 || cols%32 != 0 {
		return fmt.Errorf("cuda: quantize_q8: bad shape rows=%d cols=%d (cols must be a multiple of 32)", rows, cols)
	}
	a := new(Args).Ptr(x).Ptr(xq).Int(cols).Int(Q8RowBytes(cols))
	return k.launch("quantize_q8", s, Dim3{X: ceilDiv(cols/32, 8), Y: rows}, Dim3{X: 256}, 0, a)
}

// MatVecQ8 computes y[rows] = W[rows x cols] x from x quantised by QuantizeQ8, with
// integer dot products: the fast decode path for the types where HasQ8MatVec.
func (k *Kernels) MatVecQ8(s *Stream, t QuantType, w, xq, y DevicePtr, rows, cols int) error {
	return k.MatVecsQ8(s, t, xq, cols, MatVecQ8Out{W: w, Y: y, Rows: rows})
}

// MatVecQ8Out is one product of MatVecsQ8: Y[Rows] = W x, plus Bias (Rows f32; 0: none).
type MatVecQ8Out struct {
	W, Y, Bias DevicePtr
	Rows       int
}

// MatVecsQ8 runs one to three MatVecQ8 products of matrices of the same type and width on
// the same quantised x (q, k and v) in one launch, each adding its bias if it has one.
func (k *Kernels) MatVecsQ8(s *Stream, t QuantType, xq DevicePtr, cols int, outs ...MatVecQ8Out) error {
	if len(outs) < 1 || len(outs) > 3 {
		return fmt.Errorf("cuda: mul_mat_vec_q8_%v: %d products in one launch (1 to 3)", t, len(outs))
	}
	var o [3]MatVecQ8Out
	copy(o[:], outs)
	total := 0
	for i, m := range outs {
		if m.Rows <= 0 || m.W == 0 || m.Y == 0 {
			return fmt.Errorf("cuda: mul_mat_vec_q8_%v: product %d: bad shape rows=%d cols=%d", t, i, m.Rows, cols)
		}
		if err := mmvqAligned(t, m.W, 0); err != nil {
			return err
		}
		total += m.Rows
	}
	return k.matVecQ8(s, t, o, total, 0, 0, 1, xq, 0, cols)
}

// MatVecQ8Experts is MatVecExperts on quantised activations: slot e uses row e of xq
// (Q8RowBytes(cols) bytes apart) when xPerExpert, else row 0.
func (k *Kernels) MatVecQ8Experts(s *Stream, t QuantType, w DevicePtr, expertStride int, ids DevicePtr, n int,
	xq DevicePtr, xPerExpert bool, y DevicePtr, rows, cols int) error {
	if ids == 0 {
		return fmt.Errorf("cuda: mul_mat_vec_q8_%v: nil expert ids", t)
	}
	if err := mmvqAligned(t, w, expertStride); err != nil {
		return err
	}
	xs := 0
	if xPerExpert {
		xs = Q8RowBytes(cols)
	}
	return k.matVecQ8(s, t, [3]MatVecQ8Out{{W: w, Y: y, Rows: rows}}, n*rows, expertStride, ids, n, xq, xs, cols)
}

// matVecQ8 launches mul_mat_vec_q8 over o's products (rows 0: none) for n slots; total is
// every slot's rows, which picks the rows per block.
func (k *Kernels) matVecQ8(s *Stream, t QuantType, o [3]MatVecQ8Out, total, expertStride int, ids DevicePtr, n int,
	xq DevicePtr, xqStride int, cols int) error {
	if !t.HasQ8MatVec() {
		return fmt.Errorf("cuda: mul_mat_vec_q8: no 8-bit kernel for %v (use MatVec)", t)
	}
	if _, err := t.RowBytes(cols); err != nil {
		return fmt.Errorf("cuda: mul_mat_vec_q8: %w", err)
	}
	if o[0].Rows <= 0 || n <= 0 || n > 65535 {
		return fmt.Errorf("cuda: mul_mat_vec_q8_%v: bad shape rows=%d cols=%d slots=%d", t, o[0].Rows, cols, n)
	}
	rpb := k.mmvqRowsPerBlock(total)
	a := new(Args)
	for _, m := range o {
		a.Ptr(m.W)
	}
	for _, m := range o {
		a.Ptr(m.Y)
	}
	for _, m := range o {
		a.Ptr(m.Bias)
	}
	blocks := 0
	for _, m := range o {
		a.Int(m.Rows)
		blocks += ceilDiv(m.Rows, rpb)
	}
	a.Int(rpb).Int64(int64(expertStride)).Ptr(ids).Ptr(xq).Int64(int64(xqStride)).Int(cols)
	return k.launch("mul_mat_vec_q8_"+t.String(), s, Dim3{X: blocks, Y: n}, Dim3{X: mmvqThreads}, 0, a)
}

// MoEGateUp is the fused first half of an MoE FFN in decode: for each of the n routed
// slots e, h[e] = silu(Wg[ids[e]] x) * (Wu[ids[e]] x), h [n][rows] f32. Wg and Wu are the
// gate and up tensors (same type t and expert stride); xq is x quantised by QuantizeQ8.
func (k *Kernels) MoEGateUp(s *Stream, t QuantType, wg, wu DevicePtr, expertStride int, ids DevicePtr, n int,
	xq, h DevicePtr, rows, cols int, x MoEExtras) error {
	if err := checkMoE(t, ids, n, rows, cols); err != nil {
		return err
	}
	if (x.Gate != 0 || x.Up != 0) && x.Stride < rows {
		return fmt.Errorf("cuda: moe_gate_up: bias stride %d below %d rows", x.Stride, rows)
	}
	if err := mmvqAligned(t, wg, expertStride); err != nil {
		return err
	}
	if err := mmvqAligned(t, wu, expertStride); err != nil {
		return err
	}
	rpb := k.mmvqRowsPerBlock(n * rows)
	a := new(Args).Ptr(wg).Ptr(wu).Int64(int64(expertStride)).Ptr(ids).Ptr(xq).Ptr(h).Int(rows).Int(cols).
		Ptr(x.Gate).Ptr(x.Up).Int64(int64(x.Stride)).Float(x.Limit).Float(x.Alpha).Int(rpb)
	return k.launch("moe_gate_up_q8_"+t.String(), s, Dim3{X: ceilDiv(rows, rpb), Y: n}, Dim3{X: mmvqThreads}, 0, a)
}

// MoEExtras are what gpt-oss's experts add to the fused MoE kernels (the zero value: none):
// for MoEGateUp, per-expert f32 bias stacks (0: none) for the gate and up products, Stride
// floats from one expert to the next, and the clamped SwiGLU when Limit > 0; for MoEDown,
// the down product's bias stack in Down (Stride its own).
type MoEExtras struct {
	Gate, Up, Down DevicePtr
	Stride         int
	Limit, Alpha   float32
}

// MoEDown is the fused second half: y[r] += sum over the n slots of weights[e] *
// (Wd[ids[e]] h[e])[r], with hq the n rows of h quantised by QuantizeQ8 and weights the n
// router weights (f32 on the device). Adding into y makes it the residual add as well.
func (k *Kernels) MoEDown(s *Stream, t QuantType, wd DevicePtr, expertStride int, ids, weights DevicePtr, n int,
	hq, y DevicePtr, rows, cols int, x MoEExtras) error {
	if err := checkMoE(t, ids, n, rows, cols); err != nil {
		return err
	}
	if x.Down != 0 && x.Stride < rows {
		return fmt.Errorf("cuda: moe_down: bias stride %d below %d rows", x.Stride, rows)
	}
	if err := mmvqAligned(t, wd, expertStride); err != nil {
		return err
	}
	rpb := k.mmvqRowsPerBlock(rows)
	a := new(Args).Ptr(wd).Int64(int64(expertStride)).Ptr(ids).Ptr(weights).Ptr(hq).Int64(int64(Q8RowBytes(cols))).Ptr(y).Int(rows).Int(cols).Int(n).
		Ptr(x.Down).Int64(int64(x.Stride)).Int(rpb)
	return k.launch("moe_down_q8_"+t.String(), s, Dim3{X: ceilDiv(rows, rpb)}, Dim3{X: mmvqThreads}, 0, a)
}

func checkMoE(t QuantType, ids DevicePtr, n, rows, cols int) error {
	if !t.HasQ8MatVec() {
		return fmt.Errorf("cuda: fused MoE kernels: no 8-bit kernel for %v", t)
	}
	if _, err := t.RowBytes(cols); err != nil {
		return fmt.Errorf("cuda: fused MoE kernels: %w", err)
	}
	if ids == 0 || n <= 0 || n > 65535 || rows <= 0 {
		return fmt.Errorf("cuda: fused MoE kernels: bad shape rows=%d cols=%d slots=%d", rows, cols, n)
	}
	return nil
}

// Dequantize writes the n values at src (type t, a whole number of blocks) to dst as f16.
func (k *Kernels) Dequantize(s *Stream, t QuantType, src, dst DevicePtr, n int) error {
	if _, err := t.RowBytes(n); err != nil {
		return fmt.Errorf("cuda: dequantize: %w", err)
	}
	chunks := n / 8
	a := new(Args).Ptr(src).Ptr(dst).Int64(int64(n))
	return k.launch("dequantize_"+t.String()+"_f16", s, Dim3{X: ceilDiv(chunks, 256)}, Dim3{X: 256}, 0, a)
}

// GetRows gathers rows ids[0..n) (int32 on the device) of W [* x cols] of type t into
// out [n x cols] float32: the embedding lookup.
func (k *Kernels) GetRows(s *Stream, t QuantType, w, ids DevicePtr, n int, out DevicePtr, cols int) error {
	if _, err := t.RowBytes(cols); err != nil {
		return fmt.Errorf("cuda: get_rows: %w", err)
	}
	if n <= 0 || n > 65535 {
		return fmt.Errorf("cuda: get_rows_%v: %d ids out of range 1..65535", t, n)
	}
	a := new(Args).Ptr(w).Ptr(ids).Ptr(out).Int(cols)
	return k.launch("get_rows_"+t.String(), s, Dim3{X: ceilDiv(cols/8, 128), Y: n}, Dim3{X: 128}, 0, a)
}

// GemmF16 computes Y[n x m] = X[n x k] W[m x k]^T on the tensor cores: W f16, X f32
// (or f16 when xF16), Y f32. k must be a multiple of 8.
func (k *Kernels) GemmF16(s *Stream, w, x DevicePtr, xF16 bool, y DevicePtr, m, n, kdim int) error {
	if m <= 0 || n <= 0 || kdim <= 0 || kdim%8 != 0 {
		return fmt.Errorf("cuda: gemm: bad shape m=%d n=%d k=%d (k must be a multiple of 8)", m, n, kdim)
	}
	if ceilDiv(n, 64) > 65535 {
		return fmt.Errorf("cuda: gemm: %d rows of X is too many for one launch", n)
	}
	name := "gemm_f16_f32"
	if xF16 {
		name = "gemm_f16_f16"
	}
	a := new(Args).Ptr(w).Ptr(x).Ptr(y).Int(m).Int(n).Int(kdim)
	return k.launch(name, s, Dim3{X: ceilDiv(m, 64), Y: ceilDiv(n, 64)}, Dim3{X: 128}, 0, a)
}

// GemmScratchBytes is the scratch Gemm needs to dequantise an m x k weight of type t.
func GemmScratchBytes(t QuantType, m, kdim int) int {
	if t == F16 {
		return 0
	}
	return m * kdim * 2
}

// Gemm computes Y[n x m] = X[n x k] W[m x k]^T for a weight of any supported type:
// W is dequantised to f16 into scratch (GemmScratchBytes) first, unless it is f16.
func (k *Kernels) Gemm(s *Stream, t QuantType, w, x, y DevicePtr, m, n, kdim int, scratch DevicePtr) error {
	if t != F16 {
		if scratch == 0 {
			return fmt.Errorf("cuda: gemm %v: needs %d bytes of scratch", t, GemmScratchBytes(t, m, kdim))
		}
		if err := k.Dequantize(s, t, w, scratch, m*kdim); err != nil {
			return err
		}
		w = scratch
	}
	return k.GemmF16(s, w, x, false, y, m, n, kdim)
}

// HasGemmQ8 reports whether t has the integer tensor-core GEMM (GemmQ8, GemmExpertsQ8).
func (t QuantType) HasGemmQ8() bool {
	switch t {
	case Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q4_K, Q5_K, Q6_K, IQ4_XS:
		return true
	}
	return false
}

// Q8SumsRowBytes is the size of one row of cols activations quantised by QuantizeQ8Sums:
// cols int8 values, then (scale, scale * sum of the group's values) as two float32 per 32,
// padded to 16 bytes.
func Q8SumsRowBytes(cols int) int { return (cols + cols/4 + 15) &^ 15 }

// QuantizeQ8Sums quantises x [rows][cols] f32 (cols a multiple of 32) as QuantizeQ8 does,
// with each group's sum beside its scale, into xq (rows * Q8SumsRowBytes(cols) bytes), for
// GemmQ8 and GemmExpertsQ8.
func (k *Kernels) QuantizeQ8Sums(s *Stream, x, xq DevicePtr, rows, cols int) error {
	if rows <= 0 || rows > 65535 || cols <= 0 || cols%32 != 0 {
		return fmt.Errorf("cuda: quantize_q8_sums: bad shape rows=%d cols=%d (cols must be a multiple of 32)", rows, cols)
	}
	a := new(Args).Ptr(x).Ptr(xq).Int(cols).Int(Q8SumsRowBytes(cols))
	return k.launch("quantize_q8_sums", s, Dim3{X: ceilDiv(cols/32, 8), Y: rows}, Dim3{X: 256}, 0, a)
}

// GemmQ8 computes Y[n x m] = X[n x k] W[m x k]^T on the integer tensor cores, X quantised
// by QuantizeQ8Sums into xq, W of a type where HasGemmQ8 (k a multiple of its block).
func (k *Kernels) GemmQ8(s *Stream, t QuantType, w, xq, y DevicePtr, m, n, kdim int) error {
	return k.gemmQ8(s, t, w, 0, 0, 0, 0, 1, n, n, xq, y, m, n, kdim)
}

// GemmExpertsQ8 is GemmExperts over activations quantised by QuantizeQ8Sums (rowIdx
// indexes xq's rows), on the integer tensor cores; rows is the total of the slots' rows
// (slotOff[nSlots]), which picks the tile height.
func (k *Kernels) GemmExpertsQ8(s *Stream, t QuantType, w DevicePtr, expertStride int, slotExpert, slotOff, rowIdx DevicePtr,
	nSlots, maxRows, rows int, xq, y DevicePtr, m, kdim int) error {
	if slotExpert == 0 || slotOff == 0 || rowIdx == 0 {
		return fmt.Errorf("cuda: gemm_q8_%v: grouped GEMM needs slot experts, offsets and row indices", t)
	}
	return k.gemmQ8(s, t, w, expertStride, slotExpert, rowIdx, slotOff, nSlots, maxRows, rows, xq, y, m, maxRows, kdim)
}

// gemmQ8TallRows is the mean rows a slot from which gemm_q8 takes 64-token tiles: below
// it, 32-token tiles waste less of the tensor cores' work on the rows slots lack (at 512
// tokens Qwen3-30B-A3B's experts get 32 each, gpt-oss-20b's 64).
const gemmQ8TallRows = 48

func (k *Kernels) gemmQ8(s *Stream, t QuantType, w DevicePtr, expertStride int, slotExpert, rowIdx, slotOff DevicePtr,
	nSlots, maxRows, rows int, xq, y DevicePtr, m, n, kdim int) error {
	if !t.HasGemmQ8() {
		return fmt.Errorf("cuda: gemm_q8: no integer GEMM for %v", t)
	}
	if _, err := t.RowBytes(kdim); err != nil || kdim%32 != 0 {
		return fmt.Errorf("cuda: gemm_q8_%v: k=%d: not whole blocks of 32 values", t, kdim)
	}
	if err := mmvqAligned(t, w, expertStride); err != nil {
		return err
	}
	bm := 64
	if rows < gemmQ8TallRows*nSlots {
		bm = 32
	}
	if m <= 0 || n <= 0 || maxRows <= 0 || rows < maxRows || ceilDiv(maxRows, bm) > 65535 || nSlots <= 0 || nSlots > 65535 {
		return fmt.Errorf("cuda: gemm_q8_%v: bad shape m=%d rows=%d (at most %d a slot) slots=%d", t, m, rows, maxRows, nSlots)
	}
	a := new(Args).Ptr(w).Int64(int64(expertStride)).Ptr(slotExpert).Ptr(xq).Int(Q8SumsRowBytes(kdim)).Ptr(rowIdx).Ptr(slotOff).
		Ptr(y).Int(m).Int(n).Int(kdim)
	return k.launch(fmt.Sprintf("gemm_q8_%v_bm%d", t, bm), s, Dim3{X: ceilDiv(m, 64), Y: ceilDiv(maxRows, bm), Z: nSlots}, Dim3{X: 128}, 0, a)
}

// GemmQ computes Y[n x m] = X[n x k] W[m x k]^T, X and Y f32, W of any supported type
// decoded tile by tile inside the kernel (no scratch). k must be a multiple of t's block
// (and of 8).
func (k *Kernels) GemmQ(s *Stream, t QuantType, w, x, y DevicePtr, m, n, kdim int) error {
	return k.gemmQ(s, t, w, 0, 0, 0, 0, 1, n, x, y, m, n, kdim)
}

// GemmExperts is the grouped MoE GEMM for prefill, one launch for all routed experts:
// for slot e < nSlots, output rows r in slotOff[e] .. slotOff[e+1] (int32 on the device,
// nSlots+1 of them) are Y[r] = W[slotExpert[e]] X[rowIdx[r]] (rowIdx: the token of each
// output row). W holds all experts, expertStride bytes apart; Y is [total rows x m];
// maxRows bounds the rows of any slot (it sizes the grid; larger slots would be cut).
func (k *Kernels) GemmExperts(s *Stream, t QuantType, w DevicePtr, expertStride int, slotExpert, slotOff, rowIdx DevicePtr,
	nSlots, maxRows int, x, y DevicePtr, m, kdim int) error {
	if slotExpert == 0 || slotOff == 0 || rowIdx == 0 {
		return fmt.Errorf("cuda: gemm_q_%v: grouped GEMM needs slot experts, offsets and row indices", t)
	}
	return k.gemmQ(s, t, w, expertStride, slotExpert, rowIdx, slotOff, nSlots, maxRows, x, y, m, maxRows, kdim)
}

func (k *Kernels) gemmQ(s *Stream, t QuantType, w DevicePtr, expertStride int, slotExpert, rowIdx, slotOff DevicePtr,
	nSlots, maxRows int, x, y DevicePtr, m, n, kdim int) error {
	if _, err := t.RowBytes(kdim); err != nil {
		return fmt.Errorf("cuda: gemm_q: %w", err)
	}
	if m <= 0 || n <= 0 || maxRows <= 0 || ceilDiv(maxRows, 64) > 65535 || nSlots <= 0 || nSlots > 65535 {
		return fmt.Errorf("cuda: gemm_q_%v: bad shape m=%d rows=%d slots=%d", t, m, maxRows, nSlots)
	}
	a := new(Args).Ptr(w).Int64(int64(expertStride)).Ptr(slotExpert).Ptr(x).Ptr(rowIdx).Ptr(slotOff).Ptr(y).Int(m).Int(n).Int(kdim)
	return k.launch("gemm_q_"+t.String(), s, Dim3{X: ceilDiv(m, 64), Y: ceilDiv(maxRows, 64), Z: nSlots}, Dim3{X: 128}, 0, a)
}

// RMSNorm normalises rows of dim floats: y = x / sqrt(mean(x^2)+eps) * w (w may be 0 for
// no weight; y may equal x). With dim = head size and rows = tokens*heads it is the per-head
// q/k norm.
func (k *Kernels) RMSNorm(s *Stream, x, w, y DevicePtr, rows, dim int, eps float32) error {
	if rows <= 0 || dim <= 0 {
		return fmt.Errorf("cuda: rms_norm: bad shape rows=%d dim=%d", rows, dim)
	}
	block := 256
	if dim <= 128 {
		block = 32 * ceilDiv(dim, 32)
	}
	a := new(Args).Ptr(x).Ptr(w).Ptr(y).Int(dim).Float(eps)
	return k.launch("rms_norm", s, Dim3{X: rows}, Dim3{X: block}, 0, a)
}

// RopeNeoX rotates x [tokens][heads][headDim] in place (NeoX pairing, the first ropeDim
// values of each head) by the positions pos [tokens] (int32 on the device).
func (k *Kernels) RopeNeoX(s *Stream, x, pos DevicePtr, tokens, heads, headDim, ropeDim int, freqBase float32) error {
	if tokens <= 0 || heads <= 0 || ropeDim <= 0 || ropeDim%2 != 0 || ropeDim > headDim {
		return fmt.Errorf("cuda: rope_neox: bad shape tokens=%d heads=%d head_dim=%d rope_dim=%d", tokens, heads, headDim, ropeDim)
	}
	if heads > 65535 {
		return fmt.Errorf("cuda: rope_neox: %d heads", heads)
	}
	a := new(Args).Ptr(x).Ptr(pos).Int(heads).Int(headDim).Int(ropeDim).Float(freqBase)
	return k.launch("rope_neox", s, Dim3{X: tokens, Y: heads}, Dim3{X: min(128, 32*ceilDiv(ropeDim/2, 32))}, 0, a)
}

// MaxAttentionHeadDim is the largest head size the attention kernels take; they take every
// multiple of attentionHeadStep up to it (one kernel each).
const (
	MaxAttentionHeadDim = 256
	attentionHeadStep   = 16
)

// AttentionOptions is what a query sees beyond plain causal attention over slots 0..pos.
type AttentionOptions struct {
	// Sinks (0: none) is f32 [nHead] on the device: one logit per query head that joins the
	// softmax's denominator and is then dropped (gpt-oss).
	Sinks DevicePtr
	// Window (0: none): the query at position q sees keys at k with 0 <= q-k < Window.
	Window int
	// Ring (0: none): the caches hold position p in slot p % Ring (a layer that keeps only
	// its latest Ring positions); Ring must cover the window and the batch.
	Ring int
	// Q8 (0: none; decode with several spans and a head size that is a multiple of 32):
	// the merge also writes the output row quantised as QuantizeQ8 does, Q8RowBytes(nHead
	// x headDim) bytes, so that the 8-bit matvec that reads it next needs no quantize_q8.
	Q8 DevicePtr
}

func checkAttention(name string, nHead, nKV, headDim int, o AttentionOptions) error {
	if headDim <= 0 || headDim > MaxAttentionHeadDim || headDim%attentionHeadStep != 0 {
		return fmt.Errorf("cuda: %s: head size %d (kernels exist for multiples of %d up to %d)", name, headDim, attentionHeadStep, MaxAttentionHeadDim)
	}
	if nHead <= 0 || nKV <= 0 || nHead%nKV != 0 {
		return fmt.Errorf("cuda: %s: %d query heads is not a multiple of %d kv heads", name, nHead, nKV)
	}
	if o.Window < 0 || o.Ring < 0 || (o.Ring > 0 && o.Window > o.Ring) {
		return fmt.Errorf("cuda: %s: window %d does not fit a ring of %d positions", name, o.Window, o.Ring)
	}
	return nil
}

// AttentionDecodeScratchBytes is the scratch AttentionDecode needs for nSplit spans.
func AttentionDecodeScratchBytes(nHead, headDim, nSplit int) int {
	if nSplit <= 1 {
		return 0
	}
	return nHead * nSplit * (headDim + 2) * 4
}

// Decode attention's geometry (attention.cu): a block takes one kv head and up to
// decodeHeadsPerBlock of its query heads, and a span of at least decodeChunk positions.
const (
	decodeHeadsPerBlock = 8
	decodeChunk         = 128
	// MaxDecodeSplits is the most spans AttentionDecode takes (attention_merge's table).
	MaxDecodeSplits = 1024
	// decodeBlocks is what a launch aims to fill: 4 blocks on each of an H200's 132 SMs
	// (the blocks' registers allow 4 a SM), so a long context keeps every SM busy.
	decodeBlocks = 4 * 132
)

// decodeGroups is the blocks a decode launch has per span: the kv heads times the slices
// their GQA groups are cut into, of at most perBlock query heads (decodeHeadsPerBlock for
// attention_decode, decodeMMARows for attention_decode_mma).
func decodeGroups(nHead, nKV, perBlock int) int {
	if nKV <= 0 || nHead < nKV {
		return max(nHead, 1)
	}
	return nKV * ceilDiv(nHead/nKV, perBlock)
}

// attention_decode_mma's geometry: a block takes up to decodeMMARows query heads of one GQA
// group (the rows of one m16n8k16 tile), and its spans are whole tiles of decodeMMATile
// positions.
const (
	decodeMMARows = 16
	decodeMMATile = 64
)

// DecodeSplits is how many spans AttentionDecode should be launched with for a cache of up
// to maxCtx positions: enough blocks to fill the GPU at the longest context, and no more
// spans than maxCtx has chunks of 128 positions. The kernels read the position from device
// memory and use only as many spans as it needs, so one launch, captured in a graph,
// serves every position.
func DecodeSplits(maxCtx, nHead, nKV int) int {
	return decodeSplits(maxCtx, decodeGroups(nHead, nKV, decodeHeadsPerBlock), decodeChunk)
}

// DecodeSplitsMMA is DecodeSplits for AttentionDecodeMMA, whose spans are single 64-position
// tiles: with spans of 128 a short context gave each block two tiles, one after the other,
// each a wait on memory (q30b at 516 positions: 5 spans of 4 blocks, 13.9 us under ncu).
func DecodeSplitsMMA(maxCtx, nHead, nKV int) int {
	return decodeSplits(maxCtx, decodeGroups(nHead, nKV, decodeMMARows), decodeMMATile)
}

func decodeSplits(maxCtx, groups, chunk int) int {
	return min(max(ceilDiv(decodeBlocks, groups), 1), max(ceilDiv(maxCtx, chunk), 1), MaxDecodeSplits)
}

// AttentionDecode attends one query q [nHead][headDim] f32 to the f16 caches
// [slot][nKV][headDim] up to and including position pos[0] (int32 on the device, so a
// captured graph can replay it at the next position), writing out [nHead][headDim] f32.
// A block reads each K/V row once for the query heads of its GQA group. The positions are
// split into up to nSplit spans of at least 128 (as many as pos[0] needs), computed in
// parallel and merged (scratch: AttentionDecodeScratchBytes; 0 when nSplit is 1).
func (k *Kernels) AttentionDecode(s *Stream, q, kCache, vCache, out, pos DevicePtr, nHead, nKV, headDim int, scale float32, nSplit int, scratch DevicePtr, o AttentionOptions) error {
	a := new(Args).Ptr(q).Ptr(kCache).Ptr(vCache).Ptr(out).Ptr(pos).Int(nHead).Int(nKV).Float(scale).Ptr(scratch).
		Ptr(o.Sinks).Int(o.Window).Int(o.Ring)
	return k.attentionDecode("attention_decode", decodeHeadsPerBlock, decodeChunk, s, a, out, pos, nHead, nKV, headDim, nSplit, scratch, o)
}

// AttentionDecodeInt8 is AttentionDecode reading an int8 cache in place.
func (k *Kernels) AttentionDecodeInt8(s *Stream, q DevicePtr, c Int8KV, out, pos DevicePtr, nHead, nKV, headDim int, scale float32, nSplit int, scratch DevicePtr, o AttentionOptions) error {
	a := new(Args).Ptr(q).Ptr(c.K).Ptr(c.KScales).Ptr(c.V).Ptr(c.VScales).Ptr(out).Ptr(pos).Int(nHead).Int(nKV).Float(scale).Ptr(scratch).
		Ptr(o.Sinks).Int(o.Window).Int(o.Ring)
	return k.attentionDecode("attention_decode_int8", decodeHeadsPerBlock, decodeChunk, s, a, out, pos, nHead, nKV, headDim, nSplit, scratch, o)
}

// AttentionDecodeMMAFits reports whether AttentionDecodeMMA and AttentionDecodeMMAInt8 have a
// kernel for headDim: the prefill tensor-core kernels' head sizes (multiples of 16 up to 128),
// and mmaDecodeWideHeadDim.
func AttentionDecodeMMAFits(headDim int) bool {
	return headDim == mmaDecodeWideHeadDim || AttentionPrefillMMAFits(headDim)
}

// mmaDecodeWideHeadDim is the head size past 128 with a tensor-core decode kernel (Qwen3-Next
// and Qwen3.5's 256), whose warps split the output's columns (attention_decode_mma.cu's
// dm_decode_wide_body); prefill has none (its warps hold whole output rows).
const mmaDecodeWideHeadDim = 256

// AttentionDecodeMMA is AttentionDecode (same arguments and scratch; its spans are whole
// 64-position tiles) on the tensor cores (attention_decode_mma.cu): the query heads of a GQA
// group are the rows of S = Q K^T and O = P V, with q and the softmax weights P rounded to
// f16 on the way in, as in AttentionPrefillMMA, so its results differ from AttentionDecode's
// by about 1e-3 of the values' scale. A warp runs a few hundred instructions a tile where
// attention_decode runs thousands a 32-position chunk, which bounded short contexts.
func (k *Kernels) AttentionDecodeMMA(s *Stream, q, kCache, vCache, out, pos DevicePtr, nHead, nKV, headDim int, scale float32, nSplit int, scratch DevicePtr, o AttentionOptions) error {
	if !AttentionDecodeMMAFits(headDim) {
		return fmt.Errorf("cuda: attention_decode_mma: no kernel for head size %d (multiples of %d up to %d, and %d)", headDim, attentionHeadStep, maxMMAPrefillHeadDim, mmaDecodeWideHeadDim)
	}
	a := new(Args).Ptr(q).Ptr(kCache).Ptr(vCache).Ptr(out).Ptr(pos).Int(nHead).Int(nKV).Float(scale).Ptr(scratch).
		Ptr(o.Sinks).Int(o.Window).Int(o.Ring)
	return k.attentionDecode("attention_decode_mma", decodeMMARows, decodeMMATile, s, a, out, pos, nHead, nKV, headDim, nSplit, scratch, o)
}

// AttentionDecodeMMAInt8 is AttentionDecodeMMA reading an int8 cache, each tile dequantised to
// f16 on its way into shared memory (as AttentionPrefillMMAInt8).
func (k *Kernels) AttentionDecodeMMAInt8(s *Stream, q DevicePtr, c Int8KV, out, pos DevicePtr, nHead, nKV, headDim int, scale float32, nSplit int, scratch DevicePtr, o AttentionOptions) error {
	if !AttentionDecodeMMAFits(headDim) {
		return fmt.Errorf("cuda: attention_decode_mma_int8: no kernel for head size %d (multiples of %d up to %d, and %d)", headDim, attentionHeadStep, maxMMAPrefillHeadDim, mmaDecodeWideHeadDim)
	}
	a := new(Args).Ptr(q).Ptr(c.K).Ptr(c.KScales).Ptr(c.V).Ptr(c.VScales).Ptr(out).Ptr(pos).Int(nHead).Int(nKV).Float(scale).Ptr(scratch).
		Ptr(o.Sinks).Int(o.Window).Int(o.Ring)
	return k.attentionDecode("attention_decode_mma_int8", decodeMMARows, decodeMMATile, s, a, out, pos, nHead, nKV, headDim, nSplit, scratch, o)
}

// attentionDecode launches name_<headDim> with blocks of perBlock query heads a kv head and
// nSplit spans in units of chunk positions, then attention_merge when there are several.
func (k *Kernels) attentionDecode(name string, perBlock, chunk int, s *Stream, a *Args, out, pos DevicePtr, nHead, nKV, headDim, nSplit int, scratch DevicePtr, o AttentionOptions) error {
	if err := checkAttention(name, nHead, nKV, headDim, o); err != nil {
		return err
	}
	if nSplit < 1 || nSplit > MaxDecodeSplits {
		return fmt.Errorf("cuda: %s: %d spans (1 to %d)", name, nSplit, MaxDecodeSplits)
	}
	if nSplit > 1 && scratch == 0 {
		return fmt.Errorf("cuda: %s: %d spans need %d bytes of scratch", name, nSplit, AttentionDecodeScratchBytes(nHead, headDim, nSplit))
	}
	if o.Q8 != 0 && (nSplit == 1 || headDim%32 != 0) {
		return fmt.Errorf("cuda: %s: a quantised output needs the merge of several spans and whole 32-value groups a head (%d spans, head size %d)", name, nSplit, headDim)
	}
	if err := k.launch(fmt.Sprintf("%s_%d", name, headDim), s, Dim3{X: decodeGroups(nHead, nKV, perBlock), Y: nSplit}, Dim3{X: 128}, 0, a); err != nil {
		return err
	}
	if nSplit == 1 {
		return nil
	}
	return k.launch("attention_merge", s, Dim3{X: nHead}, Dim3{X: 32 * ceilDiv(headDim, 32)}, 0,
		new(Args).Ptr(scratch).Ptr(out).Ptr(pos).Int(nSplit).Int(headDim).Ptr(o.Sinks).Int(o.Window).Int(chunk).Ptr(o.Q8).Int(nHead*headDim))
}

// AttentionPrefill is causal attention for nTok queries q [nTok][nHead][headDim]: query t
// attends positions 0..pos[t] of the caches (which must already hold them), or the last
// o.Window of them.
func (k *Kernels) AttentionPrefill(s *Stream, q, kCache, vCache, out, pos DevicePtr, nTok, nHead, nKV, headDim int, scale float32, o AttentionOptions) error {
	a := new(Args).Ptr(q).Ptr(kCache).Ptr(vCache).Ptr(out).Ptr(pos).Int(nTok).Int(nHead).Int(nKV).Float(scale).
		Ptr(o.Sinks).Int(o.Window).Int(o.Ring)
	return k.attentionPrefill("attention_prefill", s, a, nTok, nHead, nKV, headDim, o)
}

// Tensor-core prefill attention's geometry (attention_prefill.cu): a block of mmaPrefillRows
// query tokens of one head, 16 a warp, and head sizes that are multiples of 16 up to
// maxMMAPrefillHeadDim (its registers hold a warp's whole output rows).
const (
	mmaPrefillRows       = 64
	maxMMAPrefillHeadDim = 128
)

// AttentionPrefillMMAFits reports whether AttentionPrefillMMA and AttentionPrefillMMAInt8
// have a kernel for headDim: multiples of 16 up to 128. Other head sizes take
// AttentionPrefill (AttentionPrefillInt8).
func AttentionPrefillMMAFits(headDim int) bool {
	return headDim > 0 && headDim <= maxMMAPrefillHeadDim && headDim%attentionHeadStep == 0
}

// AttentionPrefillMMA is AttentionPrefill (same arguments, f16 caches) on the tensor cores
// (attention_prefill.cu): S = Q K^T and O = P V are mma.sync products with q and the
// softmax weights P rounded to f16 on the way in (f32 accumulators, softmax in f32), so its
// results differ from AttentionPrefill's, which keeps q and P in f32, by about 1e-3 of the
// values' scale.
func (k *Kernels) AttentionPrefillMMA(s *Stream, q, kCache, vCache, out, pos DevicePtr, nTok, nHead, nKV, headDim int, scale float32, o AttentionOptions) error {
	a := new(Args).Ptr(q).Ptr(kCache).Ptr(vCache).Ptr(out).Ptr(pos).Int(nTok).Int(nHead).Int(nKV).Float(scale).
		Ptr(o.Sinks).Int(o.Window).Int(o.Ring)
	return k.attentionPrefillMMA("attention_prefill_mma", s, a, nTok, nHead, nKV, headDim, o)
}

// AttentionPrefillMMAInt8 is AttentionPrefillMMA reading an int8 cache: each tile of K and V
// is dequantised to f16 (value times its block's scale, rounded once) on its way into shared
// memory, so its results differ from AttentionPrefillInt8's by that rounding too.
func (k *Kernels) AttentionPrefillMMAInt8(s *Stream, q DevicePtr, c Int8KV, out, pos DevicePtr, nTok, nHead, nKV, headDim int, scale float32, o AttentionOptions) error {
	a := new(Args).Ptr(q).Ptr(c.K).Ptr(c.KScales).Ptr(c.V).Ptr(c.VScales).Ptr(out).Ptr(pos).Int(nTok).Int(nHead).Int(nKV).Float(scale).
		Ptr(o.Sinks).Int(o.Window).Int(o.Ring)
	return k.attentionPrefillMMA("attention_prefill_mma_int8", s, a, nTok, nHead, nKV, headDim, o)
}

// attentionPrefillMMA checks the shape for the tensor-core kernels and launches name_<headDim>
// with a block of mmaPrefillRows tokens of one head.
func (k *Kernels) attentionPrefillMMA(name string, s *Stream, a *Args, nTok, nHead, nKV, headDim int, o AttentionOptions) error {
	if err := checkAttention(name, nHead, nKV, headDim, o); err != nil {
		return err
	}
	if !AttentionPrefillMMAFits(headDim) {
		return fmt.Errorf("cuda: %s: head size %d (kernels exist for multiples of %d up to %d)", name, headDim, attentionHeadStep, maxMMAPrefillHeadDim)
	}
	if nTok <= 0 || ceilDiv(nTok, mmaPrefillRows) > 65535 {
		return fmt.Errorf("cuda: %s: %d tokens out of range", name, nTok)
	}
	return k.launch(fmt.Sprintf("%s_%d", name, headDim), s, Dim3{X: nHead, Y: ceilDiv(nTok, mmaPrefillRows)}, Dim3{X: 128}, 0, a)
}

// AttentionPrefillInt8 is AttentionPrefill reading an int8 cache in place.
func (k *Kernels) AttentionPrefillInt8(s *Stream, q DevicePtr, c Int8KV, out, pos DevicePtr, nTok, nHead, nKV, headDim int, scale float32, o AttentionOptions) error {
	a := new(Args).Ptr(q).Ptr(c.K).Ptr(c.KScales).Ptr(c.V).Ptr(c.VScales).Ptr(out).Ptr(pos).Int(nTok).Int(nHead).Int(nKV).Float(scale).
		Ptr(o.Sinks).Int(o.Window).Int(o.Ring)
	return k.attentionPrefill("attention_prefill_int8", s, a, nTok, nHead, nKV, headDim, o)
}

func (k *Kernels) attentionPrefill(name string, s *Stream, a *Args, nTok, nHead, nKV, headDim int, o AttentionOptions) error {
	if err := checkAttention(name, nHead, nKV, headDim, o); err != nil {
		return err
	}
	if nTok <= 0 || ceilDiv(nTok, 4) > 65535 {
		return fmt.Errorf("cuda: %s: %d tokens out of range", name, nTok)
	}
	return k.launch(fmt.Sprintf("%s_%d", name, headDim), s, Dim3{X: nHead, Y: ceilDiv(nTok, 4)}, Dim3{X: 128}, 0, a)
}

// Int8KV is one layer of an int8 KV cache on the device: keys and values [slot][nKV][headDim]
// int8, and a float32 scale per Int8KVBlock(headDim) values of each head's row,
// [slot][nKV][headDim/block] (engine/kv's int8 cache holds the same numbers).
type Int8KV struct {
	K, KScales, V, VScales DevicePtr
}

// Int8KVBlock is the values per scale of an int8 cache row of headDim values: 32, as q8_0,
// or the whole row when headDim is not a multiple of 32 (as engine/kv.BlockSize).
func Int8KVBlock(headDim int) int {
	if headDim%32 == 0 {
		return 32
	}
	return headDim
}

// Int8KVRowBytes is what one position of one layer of an int8 cache takes for keys (or
// values) of rowElems = nKV*headDim: the values and their scales.
func Int8KVRowBytes(rowElems, headDim int) int {
	return rowElems + 4*(rowElems/Int8KVBlock(headDim))
}

// SwiGLU computes y = silu(g) * u over n floats (y may equal g or u).
func (k *Kernels) SwiGLU(s *Stream, g, u, y DevicePtr, n int) error {
	return k.launch("swiglu", s, elemGrid(n), Dim3{X: 256}, 0, new(Args).Ptr(g).Ptr(u).Ptr(y).Int64(int64(n)))
}

// Add computes y = a + b over n floats.
func (k *Kernels) Add(s *Stream, a, b, y DevicePtr, n int) error {
	return k.launch("add_f32", s, elemGrid(n), Dim3{X: 256}, 0, new(Args).Ptr(a).Ptr(b).Ptr(y).Int64(int64(n)))
}

// ScaledAdd computes y += w[wIndex] * x over n floats, the scale read on the device.
func (k *Kernels) ScaledAdd(s *Stream, y, x, w DevicePtr, wIndex, n int) error {
	return k.launch("scaled_add", s, elemGrid(n), Dim3{X: 256}, 0, new(Args).Ptr(y).Ptr(x).Ptr(w).Int(wIndex).Int64(int64(n)))
}

// MoECombine computes, per token t, y[t] (+)= sum_e w[t][e] * x[t][e] with x [tokens][topK][n]
// and w [tokens][topK]; accumulate adds to y instead of overwriting it.
func (k *Kernels) MoECombine(s *Stream, x, w, y DevicePtr, tokens, topK, n int, accumulate bool) error {
	if tokens <= 0 || tokens > 65535 || topK <= 0 || n <= 0 {
		return fmt.Errorf("cuda: moe_combine: bad shape tokens=%d k=%d n=%d", tokens, topK, n)
	}
	acc := 0
	if accumulate {
		acc = 1
	}
	a := new(Args).Ptr(x).Ptr(w).Ptr(y).Int(n).Int(topK).Int(acc)
	return k.launch("moe_combine", s, Dim3{X: ceilDiv(n, 256), Y: tokens}, Dim3{X: 256}, 0, a)
}

// KVWrite stores src [tokens][rowElems] f32 as f16 into cache rows pos[t] (int32 on the
// device), or rows pos[t] % ring when ring > 0 (a layer that keeps its latest ring positions).
func (k *Kernels) KVWrite(s *Stream, src, cache, pos DevicePtr, tokens, rowElems, ring int) error {
	if tokens <= 0 || tokens > 65535 || rowElems <= 0 || ring < 0 {
		return fmt.Errorf("cuda: kv_write: bad shape tokens=%d row=%d ring=%d", tokens, rowElems, ring)
	}
	a := new(Args).Ptr(src).Ptr(cache).Ptr(pos).Int(rowElems).Int(ring)
	return k.launch("kv_write", s, Dim3{X: ceilDiv(rowElems, 256), Y: tokens}, Dim3{X: 256}, 0, a)
}

// KVWriteInt8 quantises src [tokens][kvHeads*headDim] f32 into the int8 cache rows pos[t]
// (pos[t] % ring when ring > 0) and their scales (see Int8KV), as engine/kv does: a scale of
// max|x|/127 per block, values rounded half away from zero.
func (k *Kernels) KVWriteInt8(s *Stream, src, cache, scales, pos DevicePtr, tokens, kvHeads, headDim, ring int) error {
	if tokens <= 0 || tokens > 65535 || kvHeads <= 0 || headDim <= 0 || headDim%16 != 0 || ring < 0 {
		return fmt.Errorf("cuda: kv_write_int8: bad shape tokens=%d kv heads=%d head dim=%d ring=%d", tokens, kvHeads, headDim, ring)
	}
	block := Int8KVBlock(headDim)
	blocks := kvHeads * headDim / block
	a := new(Args).Ptr(src).Ptr(cache).Ptr(scales).Ptr(pos).Int(kvHeads * headDim).Int(block).Int(ring)
	return k.launch("kv_write_int8", s, Dim3{X: ceilDiv(blocks, 8), Y: tokens}, Dim3{X: 256}, 0, a)
}

// F32ToF16 converts n floats.
func (k *Kernels) F32ToF16(s *Stream, x, y DevicePtr, n int) error {
	return k.launch("f32_to_f16", s, elemGrid(n), Dim3{X: 256}, 0, new(Args).Ptr(x).Ptr(y).Int64(int64(n)))
}

// SwiGLUClamped is gpt-oss's activation over n floats: g = min(g, limit), u = clamp(u,
// ±limit), y = g * sigmoid(alpha*g) * (u + 1) (y may equal g or u).
func (k *Kernels) SwiGLUClamped(s *Stream, g, u, y DevicePtr, n int, limit, alpha float32) error {
	return k.launch("swiglu_clamped", s, elemGrid(n), Dim3{X: 256}, 0, new(Args).Ptr(g).Ptr(u).Ptr(y).Int64(int64(n)).Float(limit).Float(alpha))
}

// AddBias adds bias [cols] f32 to each of the rows of x [rows][cols].
func (k *Kernels) AddBias(s *Stream, x, bias DevicePtr, rows, cols int) error {
	if rows <= 0 || cols <= 0 {
		return fmt.Errorf("cuda: add_bias: bad shape rows=%d cols=%d", rows, cols)
	}
	return k.launch("add_bias", s, elemGrid(rows*cols), Dim3{X: 256}, 0, new(Args).Ptr(x).Ptr(bias).Int(cols).Int64(int64(rows*cols)))
}

// ExpertBias adds to each row r of x [rows][n] f32 the bias of expert ids[r] (int32 on the
// device): bias + ids[r]*stride floats.
func (k *Kernels) ExpertBias(s *Stream, x, bias, ids DevicePtr, rows, n, stride int) error {
	if rows <= 0 || rows > 65535 || n <= 0 || stride < n {
		return fmt.Errorf("cuda: expert_bias: bad shape rows=%d n=%d stride=%d", rows, n, stride)
	}
	a := new(Args).Ptr(x).Ptr(bias).Ptr(ids).Int(n).Int64(int64(stride))
	return k.launch("expert_bias", s, Dim3{X: ceilDiv(n, 256), Y: rows}, Dim3{X: 256}, 0, a)
}

// RopeTable rotates x [tokens][heads][headDim] in place (NeoX pairing) by a frequency table
// invFreq [half] f32 on the device: pair (i, i+half) turns by pos[t]*invFreq[i], cos and sin
// times scale.
func (k *Kernels) RopeTable(s *Stream, x, pos, invFreq DevicePtr, tokens, heads, headDim, half int, scale float32) error {
	if tokens <= 0 || heads <= 0 || heads > 65535 || half <= 0 || 2*half > headDim {
		return fmt.Errorf("cuda: rope_table: bad shape tokens=%d heads=%d head_dim=%d half=%d", tokens, heads, headDim, half)
	}
	a := new(Args).Ptr(x).Ptr(pos).Ptr(invFreq).Int(heads).Int(headDim).Int(half).Float(scale)
	return k.launch("rope_table", s, Dim3{X: tokens, Y: heads}, Dim3{X: min(128, 32*ceilDiv(half, 32))}, 0, a)
}
