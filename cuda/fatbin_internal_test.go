package cuda

import (
	"regexp"
	"strings"
	"testing"
)

// TestEmbeddedFatbinHasEveryKernel runs without a GPU: the committed fatbin must hold
// machine code for every architecture the README promises and every kernel the
// launchers look up (kernel names are stored uncompressed in its ELF symbol tables).
func TestEmbeddedFatbinHasEveryKernel(t *testing.T) {
	image, err := embeddedFatbin()
	if err != nil {
		t.Fatal(err)
	}
	kernelsFatbin := string(image)
	archs := map[string]bool{}
	for _, m := range regexp.MustCompile(`-arch (sm_[0-9]+)`).FindAllStringSubmatch(kernelsFatbin, -1) {
		archs[m[1]] = true
	}
	for _, a := range []string{"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"} {
		if !archs[a] {
			t.Errorf("kernels.fatbin has no %s machine code (found %v)", a, archs)
		}
	}
	seen := map[string]bool{}
	for _, name := range kernelNames() {
		if seen[name] {
			t.Errorf("kernel %s listed twice", name)
		}
		seen[name] = true
		if !strings.Contains(kernelsFatbin, name+"\x00") {
			t.Errorf("kernels.fatbin lacks kernel %s", name)
		}
	}
}

func TestTypeGeometry(t *testing.T) {
	for _, c := range []struct {
		t          QuantType
		cols, want int
	}{{Q4_K, 2048, 8 * 144}, {Q8_0, 64, 68}, {MXFP4, 32, 17}, {F16, 8, 16}, {Q6_K, 256, 210}, {IQ4_XS, 512, 272}, {IQ3_XXS, 512, 196}, {IQ2_XXS, 256, 66}} {
		got, err := c.t.RowBytes(c.cols)
		if err != nil || got != c.want {
			t.Errorf("%v.RowBytes(%d) = %d, %v; want %d", c.t, c.cols, got, err, c.want)
		}
	}
	if _, err := Q4_K.RowBytes(100); err == nil {
		t.Error("Q4_K.RowBytes(100): want an error for a partial block")
	}
	if _, err := QuantType(19).RowBytes(256); err == nil {
		t.Error("IQ1_S has no kernel: want an error")
	}
	if got := Q8RowBytes(2048); got != 2048+256 || got%16 != 0 {
		t.Errorf("Q8RowBytes(2048) = %d", got)
	}
	if got := Q8RowBytes(96); got%16 != 0 || got < 96+12 {
		t.Errorf("Q8RowBytes(96) = %d: not padded to 16 or too small", got)
	}
	// qwen3moe 30b-a3b (4 groups of 8 query heads), gpt-oss (8 groups of 8), 24 heads on 2
	// (two slices of 6 a group), plain and bad head counts: spans for 528 blocks in all, at
	// most one per 128 positions
	for _, c := range []struct{ ctx, nHead, nKV, want int }{
		{1, 32, 4, 1}, {300, 32, 4, 3}, {4096, 32, 4, 32}, {40960, 32, 4, 132}, {1 << 20, 32, 4, 132},
		{1 << 20, 64, 8, 66}, {1 << 20, 24, 2, 132}, {1 << 20, 1, 1, 528}, {1 << 20, 7, 0, 76},
	} {
		if got := DecodeSplits(c.ctx, c.nHead, c.nKV); got != c.want {
			t.Errorf("DecodeSplits(%d, %d, %d) = %d, want %d", c.ctx, c.nHead, c.nKV, got, c.want)
		}
	}
	// the tensor-core kernels: spans of one 64-position tile, groups of up to 16 query heads
	// (24 on 2: one slice of 12 a group)
	for _, c := range []struct{ ctx, nHead, nKV, want int }{
		{1, 32, 4, 1}, {300, 32, 4, 5}, {656, 32, 4, 11}, {4096, 32, 4, 64}, {1 << 20, 32, 4, 132},
		{1 << 20, 64, 8, 66}, {1 << 20, 24, 2, 264}, {1 << 20, 16, 2, 264}, {1 << 20, 32, 1, 264},
	} {
		if got := DecodeSplitsMMA(c.ctx, c.nHead, c.nKV); got != c.want {
			t.Errorf("DecodeSplitsMMA(%d, %d, %d) = %d, want %d", c.ctx, c.nHead, c.nKV, got, c.want)
		}
	}
}
