package cuda

import "fmt"

// RopeTableStore is RopeTable of q [tokens][heads][headDim] and of k [tokens][kvHeads][headDim]
// by one table, in place and in one launch, with k (rotated) and v written to the f16 KV
// cache as KVWrite writes them (st: V and both caches; Ring as KVWrite's ring).
func (k *Kernels) RopeTableStore(s *Stream, q, kk, pos, invFreq DevicePtr, tokens, heads, kvHeads, headDim, half int, scale float32, st KVStore) error {
	if tokens <= 0 || tokens > 1<<31-1 || heads <= 0 || kvHeads <= 0 || heads+kvHeads > 65535 || half <= 0 || 2*half > headDim || st.Ring < 0 {
		return fmt.Errorf("cuda: rope_table_store: bad shape tokens=%d heads=%d kv_heads=%d head_dim=%d half=%d ring=%d", tokens, heads, kvHeads, headDim, half, st.Ring)
	}
	if st.V == 0 || st.KCache == 0 || st.VCache == 0 {
		return fmt.Errorf("cuda: rope_table_store: needs v and both caches")
	}
	a := new(Args).Ptr(q).Ptr(kk).Ptr(st.V).Ptr(pos).Ptr(invFreq).Ptr(st.KCache).Ptr(st.VCache).Int(st.Ring).
		Int(heads).Int(kvHeads).Int(headDim).Int(half).Float(scale)
	return k.launch("rope_table_store", s, Dim3{X: tokens, Y: heads + kvHeads}, Dim3{X: min(128, 32*ceilDiv(half, 32))}, 0, a)
}
