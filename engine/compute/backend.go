// Package compute is the contract the forward pass is written against: buffers on a device and
// the handful of operations a MoE transformer needs. The CPU implementation is in compute/cpu,
// the NVIDIA one in compute/gpu; the model code never knows which one it drives.
package compute

import (
	"fmt"

	"strata/engine/quant"
)

// Buf is a float32 array living on the backend's device.
type Buf interface {
	Len() int
}

// Weight is a matrix (or a stack of expert matrices) placed on the backend's device, in its
// GGUF block format. Rows are of Cols values; a stacked tensor holds Experts matrices of
// Rows x Cols each, expert after expert.
type Weight interface {
	Name() string
	Type() quant.Type
	Rows() int
	Cols() int
	Experts() int // 1 for a plain matrix
}

// WeightSpec describes a tensor to place: its bytes as they sit in the model file.
type WeightSpec struct {
	Name    string
	Type    quant.Type
	Rows    int // per expert
	Cols    int
	Experts int // 0 or 1 for a plain matrix
	Data    []byte
	// ExpertStride is the distance in bytes from one expert's matrix to the next in Data;
	// 0 means back to back. Blob layouts (an expert's gate, up and down together, as in
	// experts.bin and the RAM arena) view each matrix as a stack with a stride.
	ExpertStride int
}

// CheckSize checks that Data holds the experts of spec with rowBytes per row and returns
// the bytes of one expert and the stride between them.
func (spec WeightSpec) CheckSize(rowBytes int) (per, stride int, err error) {
	exps := max(spec.Experts, 1)
	per = rowBytes * spec.Rows
	stride = spec.ExpertStride
	if stride == 0 {
		stride = per
	}
	if stride < per {
		return 0, 0, fmt.Errorf("tensor %q: expert stride %d is less than one expert's %d bytes", spec.Name, stride, per)
	}
	if want := (exps-1)*stride + per; len(spec.Data) < want || (spec.ExpertStride == 0 && len(spec.Data) != want) {
		return 0, 0, fmt.Errorf("tensor %q: %d bytes, want %d for %d x %d x %d %s", spec.Name, len(spec.Data), want, exps, spec.Rows, spec.Cols, spec.Type)
	}
	return per, stride, nil
}

// KV is one session's key/value cache on the backend's device.
type KV interface {
	Capacity() int // positions it can hold
}

// KVSpec sizes a KV cache.
type KVSpec struct {
	Layers, KVHeads, HeadDim, Positions int
	Type                                string // "f16", "f32" (reference), "int8"
	// Keep (nil: all Positions everywhere) is per layer how many of the latest positions
	// the layer needs, 0 meaning all: a sliding-window layer keeps only its window (plus
	// room for the longest batch), so a long context costs memory on its full layers only.
	Keep []int
}

// AttentionSpec describes one attention call over n new tokens at positions pos0..pos0+n-1.
type AttentionSpec struct {
	Layer, Pos0, N          int
	Heads, KVHeads, HeadDim int
	Scale                   float32
	// Sinks (nil: none) holds one logit per query head that joins the softmax's denominator
	// and is then dropped (gpt-oss): p_j = exp(s_j) / (sum_i exp(s_i) + exp(sink_h)).
	Sinks Weight
	// Window (0: none) is a sliding window: the query at position q sees keys at k with
	// 0 <= q-k < Window.
	Window int
}

// Rope is a NeoX rotation's frequencies: within each head, element i and element
// i+len(InvFreq) (i < len(InvFreq)) turn by the angle position*InvFreq[i]; elements past
// 2*len(InvFreq) are left as they are (partial rotation). Scale multiplies cos and sin
// (YaRN's attention factor); 0 means 1.
type Rope struct {
	InvFreq []float32
	Scale   float32
}

// ExpertFFN is what an expert computes beyond its three products when it is not the plain
// down(silu(gate·x) * up·x). A nil *ExpertFFN is that plain SwiGLU.
type ExpertFFN struct {
	// Biases stacked per expert (Rows 1, Cols the product's output size, Experts as the
	// weights); nil where a product has none.
	GateBias, UpBias, DownBias Weight
	// Limit > 0 selects gpt-oss's clamped SwiGLU: g = min(g, Limit), u = clamp(u, ±Limit),
	// a = g * sigmoid(Alpha*g) * (u + 1).
	Limit, Alpha float32
}

// Routes are the experts chosen for n tokens: IDs[t*K+j] with weight Weights[t*K+j].
type Routes struct {
	N, K    int
	IDs     []int32
	Weights []float32
	// Dev is the backend's own copy (a GPU keeps ids and weights in VRAM and fills IDs and
	// Weights at its next synchronisation, so decode does not stop once per layer).
	Dev any
}

// SlotAlign is where each weight and slot stack starts inside a device's one region of
// them (the GPU backend's ReserveRegion): a multiple of this many bytes, as cuMemAlloc's own
// allocations are. Whoever sizes the region rounds each allocation up to it (SlotAligned).
const SlotAlign = 256

// SlotAligned is n bytes rounded up to SlotAlign.
func SlotAligned(n int64) int64 { return (n + SlotAlign - 1) / SlotAlign * SlotAlign }

// LateRows are rows of page-locked host memory that a device reads only once the host
// calls Ready: the op that reads them is queued before the host has filled them (the GPU
// backend's LateRows and AddLate), so the device work after it is queued too.
type LateRows struct {
	Rows  []float32
	Ready func()
	Dev   any // the backend's own handle
}

// Backend runs the operations. Activations are row-major [n x dim] Bufs. Every method that
// can fail on bad input returns an error naming the tensor; arithmetic ops assume the model
// checked shapes at load.
type Backend interface {
	Name() string
	Close() error

	NewBuf(n int) Buf
	Write(dst Buf, src []float32)
	Read(src Buf, dst []float32)

	Place(spec WeightSpec) (Weight, error)
	NewKV(spec KVSpec) (KV, error)

	// Embed writes the rows of table for ids into dst [len(ids) x table.Cols()].
	Embed(dst Buf, table Weight, ids []int) error
	// RMSNorm normalises each of the rows (of len(w) values) of x into dst, times w.
	RMSNorm(dst, x Buf, w Weight, rows int, eps float32)
	// MatMul: dst[n x w.Rows()] = x[n x w.Cols()] · wᵀ.
	MatMul(dst Buf, w Weight, x Buf, n int)
	// MatMuls is MatMul for several weights that read the same input (q, k and v), which a
	// backend can run as one parallel pass over one quantised copy of x.
	MatMuls(dst []Buf, w []Weight, x Buf, n int)
	// RoPENeoX rotates n rows of heads x headDim values in place; row t is at positions[t].
	RoPENeoX(x Buf, n, heads, headDim int, positions []int, base float32)
	// RoPE rotates n rows of heads x headDim values in place by r (see Rope).
	RoPE(x Buf, n, heads, headDim int, positions []int, r *Rope)
	// AddBias adds the vector bias (of bias.Cols() values) to each of the rows of x.
	AddBias(x Buf, bias Weight, rows int)
	// StoreKV writes n rows of k and v (KVHeads x HeadDim each) at pos0.. of layer.
	StoreKV(kv KV, layer, pos0, n int, k, v Buf)
	// Attention computes causal GQA attention of q [n x heads*headDim] over the cache.
	Attention(dst, q Buf, kv KV, spec AttentionSpec)
	// Route picks each token's experts from router logits [n x experts]: a softmax over all
	// experts, the top k (ties to the lower id), renormalised to sum to 1 when norm is set.
	// IDs and Weights are valid after the next Read at the latest.
	Route(logits Buf, n, experts, k int, norm bool) *Routes
	// RouteTopK picks each token's experts the other way round (gpt-oss): the k largest
	// logits (ties to the lower id), then a softmax over those k only.
	RouteTopK(logits Buf, n, experts, k int) *Routes
	// MoE adds to dst [n x hidden] the routed experts' SwiGLU outputs of x, weighted; ffn
	// (nil: plain SwiGLU, no biases) says what else the experts compute.
	MoE(dst, x Buf, gate, up, down Weight, ffn *ExpertFFN, r *Routes)
	// Add: dst += x over the first n values.
	Add(dst, x Buf, n int)
	// Copy moves n values from src[srcOff:] to dst[dstOff:].
	Copy(dst Buf, dstOff int, src Buf, srcOff int, n int)

	// Err returns the first error an operation hit since the last call, and clears it. The
	// operations themselves return nothing, so the forward pass reads like the maths; it
	// checks Err once per layer.
	Err() error
}

// Experts runs one layer's routed experts wherever they live. The plain case is the
// backend's own MoE over stacked weights it holds (BackendExperts); the expert tiers split a
// layer's experts between a GPU cache and host memory.
type Experts interface {
	// MoE adds to dst [n x hidden] the routed experts' SwiGLU outputs of x, weighted.
	MoE(dst, x Buf, r *Routes)
	// Err returns the first error since the last call (beside the backend's own Err).
	Err() error
}

// BackendExperts is a layer's stacked expert weights placed on one backend.
type BackendExperts struct {
	B              Backend
	Gate, Up, Down Weight
	FFN            *ExpertFFN // nil: plain SwiGLU
}

// MoE runs the backend's MoE.
func (e BackendExperts) MoE(dst, x Buf, r *Routes) { e.B.MoE(dst, x, e.Gate, e.Up, e.Down, e.FFN, r) }

// Err is nil: the backend reports its own errors.
func (e BackendExperts) Err() error { return nil }

// SlotWrite is one expert's matrix to copy into slot Slot of a slot stack.
type SlotWrite struct {
	Slot int
	Data []byte
}
