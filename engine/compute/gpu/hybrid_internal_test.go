package gpu

import (
	"strings"
	"testing"

	"strata/engine/compute"
	"strata/engine/quant"
)

// TestCheckDeltaNamesBadInput: shapes the delta-rule kernels cannot take, or buffers too small
// for the spec, are errors naming what is wrong before anything is launched (no GPU needed).
func TestCheckDeltaNamesBadInput(t *testing.T) {
	vec := func(name string, n int) *Weight {
		return &Weight{name: name, typ: quant.F32, rows: 1, cols: n, exps: 1}
	}
	good := compute.DeltaSpec{N: 3, KHeads: 2, VHeads: 4, KDim: 16, VDim: 8, DtBias: vec("ssm_dt.bias", 4), A: vec("ssm_a", 4)}
	bufs := func(s compute.DeltaSpec) (dst, qkv, alpha, beta, state compute.Buf) {
		return &buf{n: s.N * s.VHeads * s.VDim}, &buf{n: s.N * s.Channels()}, &buf{n: s.N * s.VHeads}, &buf{n: s.N * s.VHeads}, &buf{n: s.StateLen()}
	}
	d, q, a, b, st := bufs(good)
	if err := checkDelta(good, d, q, a, b, st); err != nil {
		t.Fatalf("a good spec: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*compute.DeltaSpec)
		st   compute.Buf
		want string
	}{
		{"heads do not divide", func(s *compute.DeltaSpec) { s.VHeads = 3 }, nil, "not a multiple"},
		{"key heads too wide", func(s *compute.DeltaSpec) { s.KDim = 512 }, nil, "key head size 512"},
		{"dt bias of the wrong size", func(s *compute.DeltaSpec) { s.DtBias = vec("ssm_dt.bias", 5) }, nil, "ssm_dt.bias"},
		{"state too small", func(*compute.DeltaSpec) {}, &buf{n: good.StateLen() - 1}, "state buffer"},
	} {
		s := good
		tc.edit(&s)
		d, q, a, b, state := bufs(good)
		if tc.st != nil {
			state = tc.st
		}
		if err := checkDelta(s, d, q, a, b, state); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
