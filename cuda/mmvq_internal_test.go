package cuda

import "testing"

func TestMMVQRowsPerBlock(t *testing.T) {
	k := &Kernels{}
	for _, c := range []struct{ rows, want int }{
		{512, 1}, {mmvqMinBlocks, 1}, {2 * mmvqMinBlocks, 2}, {2048, 2}, {4096, 4}, {6144, 4}, {151936, 4},
	} {
		if got := k.mmvqRowsPerBlock(c.rows); got != c.want {
			t.Errorf("%d rows: %d rows per block, want %d", c.rows, got, c.want)
		}
	}
	k.rowsPerBlock = 2
	if got := k.mmvqRowsPerBlock(151936); got != 2 {
		t.Errorf("fixed at 2: got %d", got)
	}
}

func TestMMVQAligned(t *testing.T) {
	for _, c := range []struct {
		t      QuantType
		w      DevicePtr
		stride int
		ok     bool
	}{
		{Q4_K, 0x1000, 144 * 8, true}, {Q4_K, 0x1008, 0, false}, {Q4_K, 0x1000, 72, false},
		{Q5_K, 0x1010, 176, true}, {IQ4_XS, 0x1008, 136, true}, {IQ4_XS, 0x1004, 136, false},
		{Q2_K, 0x1002, 84, false}, {MXFP4, 0x1003, 17, true}, {Q8_0, 0x1002, 34, true},
	} {
		if err := mmvqAligned(c.t, c.w, c.stride); (err == nil) != c.ok {
			t.Errorf("%v at %#x stride %d: error %v, want ok=%v", c.t, uint64(c.w), c.stride, err, c.ok)
		}
	}
}
