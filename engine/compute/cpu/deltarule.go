package cpu

import (
	"fmt"
	"math"

	"strata/engine/compute"
)

// deltaChunk is the token count of one block of the chunked delta rule (transformers' and
// the fla kernels' 64).
const deltaChunk = 64

// GatedDeltaNet runs the gated delta rule, one value head per task: the recurrent form for a
// single token (decode), the chunked form for more (prompt).
func (b *Backend) GatedDeltaNet(dst, qkv, alpha, beta, state compute.Buf, s compute.DeltaSpec) {
	if err := checkDelta(s, dst, qkv, alpha, beta, state); err != nil {
		b.err.Set(fmt.Errorf("cpu: gated delta rule: %w", err))
		return
	}
	dtBias, A := s.DtBias.(*Weight).vec, s.A.(*Weight).vec
	n, KH, VH, KD, VD := s.N, s.KHeads, s.VHeads, s.KDim, s.VDim
	C := s.Channels()
	in, al, be, out, st := f32(qkv), f32(alpha), f32(beta), f32(dst), f32(state)

	// q and k normalised once per key head, q scaled.
	qn, kn := make([]float32, n*KH*KD), make([]float32, n*KH*KD)
	b.forWork(n, n*KH*KD*2, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			for h := range KH {
				q := in[t*C+h*KD : t*C+(h+1)*KD]
				k := in[t*C+(KH+h)*KD : t*C+(KH+h+1)*KD]
				l2Normalise(qn[(t*KH+h)*KD:(t*KH+h+1)*KD], q, s.Scale)
				l2Normalise(kn[(t*KH+h)*KD:(t*KH+h+1)*KD], k, 1)
			}
		}
	})
	b.forWork(VH, n*VH*KD*VD*4, func(lo, hi int) {
		q, k := make([]float32, n*KD), make([]float32, n*KD)
		v, o := make([]float32, n*VD), make([]float32, n*VD)
		g, bt := make([]float32, n), make([]float32, n)
		for h := lo; h < hi; h++ {
			kh := s.KeyHead(h)
			for t := range n {
				copy(q[t*KD:(t+1)*KD], qn[(t*KH+kh)*KD:])
				copy(k[t*KD:(t+1)*KD], kn[(t*KH+kh)*KD:])
				copy(v[t*VD:(t+1)*VD], in[t*C+2*KH*KD+h*VD:])
				g[t] = softplus(al[t*VH+h]+dtBias[h]) * A[h]
				bt[t] = sigmoid(be[t*VH+h])
			}
			S := st[h*KD*VD : (h+1)*KD*VD]
			if n == 1 {
				deltaRecurrent(S, q, k, v, g, bt, o, n, KD, VD)
			} else {
				deltaChunked(S, q, k, v, g, bt, o, n, KD, VD, deltaChunk)
			}
			for t := range n {
				copy(out[(t*VH+h)*VD:(t*VH+h+1)*VD], o[t*VD:(t+1)*VD])
			}
		}
	})
}

// checkDelta checks the spec and the buffer sizes, so bad shapes give an error, not a panic.
func checkDelta(s compute.DeltaSpec, dst, qkv, alpha, beta, state compute.Buf) error {
	switch {
	case s.N <= 0 || s.KHeads <= 0 || s.VHeads <= 0 || s.KDim <= 0 || s.VDim <= 0:
		return fmt.Errorf("shape %+v has a zero or negative size", s)
	case s.VHeads%s.KHeads != 0:
		return fmt.Errorf("%d value heads are not a multiple of %d key heads", s.VHeads, s.KHeads)
	case s.DtBias == nil || s.A == nil:
		return fmt.Errorf("dt bias or A is missing")
	}
	for _, w := range []compute.Weight{s.DtBias, s.A} {
		if v := w.(*Weight).vec; len(v) != s.VHeads {
			return fmt.Errorf("tensor %q holds %d values, want one per value head (%d)", w.Name(), len(v), s.VHeads)
		}
	}
	for _, c := range []struct {
		what string
		b    compute.Buf
		want int
	}{
		{"output", dst, s.N * s.VHeads * s.VDim}, {"qkv", qkv, s.N * s.Channels()},
		{"alpha", alpha, s.N * s.VHeads}, {"beta", beta, s.N * s.VHeads}, {"state", state, s.StateLen()},
	} {
		if c.b.Len() < c.want {
			return fmt.Errorf("%s buffer holds %d values, want %d", c.what, c.b.Len(), c.want)
		}
	}
	return nil
}

// l2Normalise writes x/sqrt(Σx² + 1e-6)·scale to dst.
func l2Normalise(dst, x []float32, scale float32) {
	r := float32(1/math.Sqrt(sumSquares(x)+1e-6)) * scale
	for i, v := range x {
		dst[i] = v * r
	}
}

// deltaRecurrent runs one head token by token: S ← S·e^g; S ← S + k ⊗ β(v − Sᵀk); o = Sᵀq.
// q, k are [n x KD], v and o [n x VD], S [KD x VD].
func deltaRecurrent(S, q, k, v, g, beta, o []float32, n, KD, VD int) {
	mem := make([]float32, VD)
	for t := range n {
		qt, kt, vt, ot := q[t*KD:(t+1)*KD], k[t*KD:(t+1)*KD], v[t*VD:(t+1)*VD], o[t*VD:(t+1)*VD]
		decay := float32(math.Exp(float64(g[t])))
		clear(mem)
		for i := range KD {
			row := S[i*VD : (i+1)*VD]
			for j := range row {
				row[j] *= decay
				mem[j] += row[j] * kt[i]
			}
		}
		for j := range mem {
			mem[j] = (vt[j] - mem[j]) * beta[t] // the delta
		}
		clear(ot)
		for i := range KD {
			row := S[i*VD : (i+1)*VD]
			for j := range row {
				row[j] += kt[i] * mem[j]
				ot[j] += row[j] * qt[i]
			}
		}
	}
}

// deltaChunked is deltaRecurrent computed a block of L tokens at a time (the WY form that
// transformers' torch_chunk_gated_delta_rule uses). Within a block, with G the running sum
// of g, the decays between tokens are exp(G_i − G_j); the block's corrected values
// U = T·(β v) and decayed keys W = T·(β k e^G) come from T = (I − A)⁻¹, A_ij = −β_i k_i·k_j
// e^(G_i−G_j) (j < i), solved by forward substitution; then the state's contribution and the
// block's own causal part give the outputs, and the state moves past the block.
func deltaChunked(S, q, k, v, g, beta, o []float32, n, KD, VD, chunk int) {
	T := make([]float32, chunk*chunk)
	E := make([]float32, chunk*chunk) // E[i][j] = exp(G_i − G_j), j <= i
	row := make([]float32, chunk)
	G, toEnd := make([]float32, chunk), make([]float32, chunk)
	U, W := make([]float32, chunk*VD), make([]float32, chunk*KD)
	kb := make([]float32, chunk*KD)
	for c0 := 0; c0 < n; c0 += chunk {
		L := min(chunk, n-c0)
		qc, kc, vc, oc := q[c0*KD:(c0+L)*KD], k[c0*KD:(c0+L)*KD], v[c0*VD:(c0+L)*VD], o[c0*VD:(c0+L)*VD]
		var acc float32
		for i := range L {
			acc += g[c0+i]
			G[i] = acc
		}
		for i := range L {
			for j := 0; j <= i; j++ {
				E[i*chunk+j] = float32(math.Exp(float64(G[i] - G[j])))
			}
			toEnd[i] = float32(math.Exp(float64(G[L-1] - G[i])))
		}
		// A, strictly lower: -(β_i k_i · k_j) e^(G_i - G_j).
		for i := range L {
			b := beta[c0+i]
			ki := kc[i*KD : (i+1)*KD]
			for j := range L {
				if j >= i {
					T[i*chunk+j] = 0
					continue
				}
				kj := kc[j*KD : (j+1)*KD]
				var d float32
				for x, v := range ki {
					d += v * kj[x]
				}
				T[i*chunk+j] = -d * b * E[i*chunk+j]
			}
		}
		// Forward substitution: row i += Σ_m row_i[m]·T[m] over the rows already solved.
		for i := 1; i < L; i++ {
			copy(row[:i], T[i*chunk:i*chunk+i])
			for j := range i {
				var s float32
				for m := j + 1; m < i; m++ {
					s += row[m] * T[m*chunk+j]
				}
				T[i*chunk+j] = row[j] + s
			}
		}
		for i := range L {
			T[i*chunk+i] = 1
		}
		// U = T·(β v), W = T·(β k e^G).
		for i := range L {
			b, e := beta[c0+i], float32(math.Exp(float64(G[i])))
			for x := range KD {
				kb[i*KD+x] = kc[i*KD+x] * b * e
			}
		}
		for i := range L {
			u, w := U[i*VD:(i+1)*VD], W[i*KD:(i+1)*KD]
			clear(u)
			clear(w)
			for j := 0; j <= i; j++ {
				t := T[i*chunk+j]
				bj := beta[c0+j] * t
				for y := range VD {
					u[y] += bj * vc[j*VD+y]
				}
				for x := range KD {
					w[x] += t * kb[j*KD+x]
				}
			}
		}
		// New values v' = U − W·S; outputs (q e^G)·S + Σ_{j<=i} (q_i·k_j) e^(G_i−G_j) v'_j.
		for i := range L {
			u, w := U[i*VD:(i+1)*VD], W[i*KD:(i+1)*KD]
			for x := range KD {
				sx := S[x*VD : (x+1)*VD]
				for y := range VD {
					u[y] -= w[x] * sx[y]
				}
			}
		}
		for i := range L {
			ot, qi := oc[i*VD:(i+1)*VD], qc[i*KD:(i+1)*KD]
			clear(ot)
			e := float32(math.Exp(float64(G[i])))
			for x := range KD {
				sx := S[x*VD : (x+1)*VD]
				qx := qi[x] * e
				for y := range VD {
					ot[y] += qx * sx[y]
				}
			}
			for j := 0; j <= i; j++ {
				kj := kc[j*KD : (j+1)*KD]
				var d float32
				for x, v := range qi {
					d += v * kj[x]
				}
				d *= E[i*chunk+j]
				for y, u := range U[j*VD : (j+1)*VD] {
					ot[y] += d * u
				}
			}
		}
		// S ← S e^(G_last) + Σ_i (k_i e^(G_last − G_i)) ⊗ v'_i.
		eL := float32(math.Exp(float64(G[L-1])))
		for x := range KD {
			sx := S[x*VD : (x+1)*VD]
			for y := range sx {
				sx[y] *= eL
			}
			for i := range L {
				kx := kc[i*KD+x] * toEnd[i]
				for y, u := range U[i*VD : (i+1)*VD] {
					sx[y] += kx * u
				}
			}
		}
	}
}
