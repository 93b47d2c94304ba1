package cuda

import (
	"strings"
	"testing"
)

// TestDeltaArgsRefusesBadShapes runs without a GPU: both delta-rule launchers refuse, by
// name, the shapes their kernels cannot take, each against its own key head limit.
func TestDeltaArgsRefusesBadShapes(t *testing.T) {
	ok := DeltaShape{Tokens: 3, KHeads: 2, VHeads: 6, KDim: 128, VDim: 45}
	for _, c := range []struct {
		name    string
		maxKDim int
		d       DeltaShape
		vStride int
		bad     bool
	}{
		{"gated_delta_rule", MaxDeltaKDim, ok, 6 * 45, false},
		{"gated_delta_chunked", MaxDeltaChunkedKDim, ok, 6*45 + 7, false},
		{"gated_delta_chunked", MaxDeltaChunkedKDim, DeltaShape{Tokens: 3, KHeads: 2, VHeads: 6, KDim: MaxDeltaChunkedKDim + 1, VDim: 45}, 6 * 45, true},
		{"gated_delta_rule", MaxDeltaKDim, DeltaShape{Tokens: 1, KHeads: 2, VHeads: 3, KDim: 8, VDim: 8}, 24, true},
		{"gated_delta_rule", MaxDeltaKDim, DeltaShape{Tokens: 0, KHeads: 2, VHeads: 6, KDim: 8, VDim: 8}, 48, true},
		{"gated_delta_rule", MaxDeltaKDim, ok, 6*45 - 1, true},
	} {
		args, err := deltaArgs(c.name, c.maxKDim, 0, 0, c.vStride, 0, 0, 0, 0, 0, 0, c.d)
		if c.bad != (err != nil) || (err == nil) == (args == nil) {
			t.Errorf("%s %+v stride %d: args %v, err %v; want refused %v", c.name, c.d, c.vStride, args != nil, err, c.bad)
		}
		if err != nil && !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: the error does not name the kernel: %v", c.name, err)
		}
	}
}
