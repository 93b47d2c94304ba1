package quant

import (
	"math/bits"
	"testing"
)

// TestGridTables checks the transcribed grids' shape: entry counts, coordinate indices in
// range, entries strictly ascending (ggml's tables are sorted), and the ggml-form values.
func TestGridTables(t *testing.T) {
	cases := []struct {
		name    string
		hex     string
		entries int
		coords  int // per entry
		width   uint
		maxIdx  uint32
	}{
		{"iq2xxs", gridHexIQ2XXS, 256, 8, 2, 2},
		{"iq2xs", gridHexIQ2XS, 512, 8, 2, 2},
		{"iq2s", gridHexIQ2S, 1024, 8, 2, 2},
		{"iq3xxs", gridHexIQ3XXS, 256, 4, 4, 7},
		{"iq3s", gridHexIQ3S, 512, 4, 4, 7},
		{"iq1s", gridHexIQ1S, 2048, 8, 2, 2},
	}
	for _, c := range cases {
		if len(c.hex) != 4*c.entries {
			t.Errorf("%s: %d hex characters, want %d", c.name, len(c.hex), 4*c.entries)
			continue
		}
		for i := 0; i < len(c.hex); i++ {
			if ch := c.hex[i]; !('0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f') {
				t.Fatalf("%s: character %d is %q", c.name, i, ch)
			}
		}
		prev := -1
		for i := 0; i < c.entries; i++ {
			e := gridEntry(c.hex, i)
			if int(e) <= prev {
				t.Errorf("%s: entry %d (%#04x) not above entry %d (%#04x)", c.name, i, e, i-1, prev)
			}
			prev = int(e)
			for j := 0; j < c.coords; j++ {
				if k := (e >> (c.width * uint(j))) & (1<<c.width - 1); k > c.maxIdx {
					t.Errorf("%s: entry %d coordinate %d has index %d", c.name, i, j, k)
				}
			}
		}
	}
	// Spot values in ggml's form (ggml-common.h).
	if g := gridIQ2XXS(0); g != 0x0808080808080808 {
		t.Errorf("iq2xxs_grid[0] = %#x", g)
	}
	if g := gridIQ2XXS(1); g != 0x080808080808082b {
		t.Errorf("iq2xxs_grid[1] = %#x", g)
	}
	if g := gridIQ2S(1023); g != 0x2b2b2b2b2b2b2b2b {
		t.Errorf("iq2s_grid[1023] = %#x", g)
	}
	// Entries the fixtures do not reach, checked against ggml-common.h's tables.
	spots64 := []struct {
		name string
		grid func(int) uint64
		i    int
		want uint64
	}{
		{"iq1s", gridIQ1S, 30, 0xffffff00ff000100},
		{"iq1s", gridIQ1S, 31, 0xffffff00ff000101},
		{"iq1s", gridIQ1S, 700, 0x00ff00ff0000ff00},
		{"iq1s", gridIQ1S, 1300, 0x000100ff010100ff},
		{"iq1s", gridIQ1S, 1901, 0x0101ff000001ff00},
		{"iq2s", gridIQ2S, 900, 0x2b08192b082b2b19},
		{"iq2s", gridIQ2S, 901, 0x2b08192b19080808},
		{"iq2xs", gridIQ2XS, 321, 0x19082b0819080808},
		{"iq2xs", gridIQ2XS, 322, 0x19082b0819081919},
	}
	for _, s := range spots64 {
		if g := s.grid(s.i); g != s.want {
			t.Errorf("%s_grid[%d] = %#016x, want %#016x", s.name, s.i, g, s.want)
		}
	}
	if g := gridIQ3XXS(0); g != 0x04040404 {
		t.Errorf("iq3xxs_grid[0] = %#x", g)
	}
	if g := gridIQ3S(0); g != 0x01010101 {
		t.Errorf("iq3s_grid[0] = %#x", g)
	}
	if g := gridIQ1S(0); g != 0xffffffffffffffff {
		t.Errorf("iq1s_grid[0] = %#x", g)
	}
	if g := gridIQ1S(2047); g != 0x0101010101010101 {
		t.Errorf("iq1s_grid[2047] = %#x", g)
	}
}

// TestKSigns: ksigns_iq2xs keeps the 7 stored bits and makes the parity even.
func TestKSigns(t *testing.T) {
	want := map[uint32]uint8{0: 0x00, 1: 0x81, 2: 0x82, 3: 0x03, 127: 0xff, 126: 0x7e}
	for i, w := range want {
		if got := ksignsIQ2XS(i); got != w {
			t.Errorf("ksigns[%d] = %#02x, want %#02x", i, got, w)
		}
	}
	for i := uint32(0); i < 128; i++ {
		if s := ksignsIQ2XS(i); bits.OnesCount8(s)%2 != 0 || uint32(s&127) != i {
			t.Errorf("ksigns[%d] = %#02x", i, s)
		}
	}
}
