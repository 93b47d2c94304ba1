package quant

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Rows gathered with CopyRow into reused activations are the rows that Set would make from
// the same floats, for each activation format (32-blocks, 256-blocks, float).
func TestActivationsCopyRowEqualsSet(t *testing.T) {
	const cols = 512
	rng := rand.New(rand.NewPCG(3, 4))
	for _, wt := range []Type{Q8_0, Q4_K, F16} {
		t.Run(wt.String(), func(t *testing.T) {
			src, xs := vdRandomActs(t, wt, cols, 5, rng)
			order := []int{4, 0, 0, 2} // rows out of order, one of them twice
			// A reused value: first larger than needed, then grown past its capacity.
			got, err := NewActivations(Q8_0, 2*cols, 6)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{len(order), 2 * len(order)} {
				if err := got.Reset(wt, cols, n); err != nil {
					t.Fatalf("Reset(%s, %d, %d): %v", wt, cols, n, err)
				}
				want, err := NewActivations(wt, cols, n)
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					j := order[i%len(order)]
					if err := got.CopyRow(i, src, j); err != nil {
						t.Fatalf("CopyRow(%d, src, %d): %v", i, j, err)
					}
					if err := want.Set(i, xs[j*cols:(j+1)*cols]); err != nil {
						t.Fatal(err)
					}
				}
				if got.N() != n || got.Cols() != cols || got.Weight() != wt {
					t.Fatalf("after Reset: n=%d cols=%d weight=%s, want %d %d %s", got.N(), got.Cols(), got.Weight(), n, cols, wt)
				}
				same := slices.Equal(got.xf, want.xf)
				if got.kind != actFloat {
					same = slices.Equal(got.qs, want.qs) && slices.Equal(got.d, want.d) && slices.Equal(got.sums, want.sums)
				}
				if !same {
					t.Errorf("n=%d: gathered rows differ from rows Set from the same floats", n)
				}
			}
		})
	}
}

func TestActivationsResetKeepsBuffers(t *testing.T) {
	a, err := NewActivations(Q4_K, 1024, 4)
	if err != nil {
		t.Fatal(err)
	}
	q := &a.qs[0]
	if err := a.Reset(Q4_K, 512, 3); err != nil {
		t.Fatal(err)
	}
	if &a.qs[0] != q || len(a.qs) != 512*3 || len(a.d) != 2*3 || len(a.sums) != 32*3 {
		t.Errorf("Reset to fewer values: reallocated or wrong lengths (qs %d, d %d, sums %d)", len(a.qs), len(a.d), len(a.sums))
	}
	if err := a.Reset(Q4_K, 100, 1); err == nil {
		t.Error("Reset to 100 Q4_K columns: want an error")
	}
	if err := a.Reset(Q8_0, 64, 0); err == nil {
		t.Error("Reset to 0 rows: want an error")
	}
}

func TestActivationsCopyRowBadArguments(t *testing.T) {
	mk := func(wt Type, cols, n int) *Activations {
		a, err := NewActivations(wt, cols, n)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	dst := mk(Q8_0, 64, 2)
	cases := []struct {
		name     string
		src      *Activations
		i, j     int
		wantFail bool
	}{
		{"other type", mk(Q4_0, 64, 2), 0, 0, true},
		{"other cols", mk(Q8_0, 128, 2), 0, 0, true},
		{"dst row past end", mk(Q8_0, 64, 2), 2, 0, true},
		{"src row past end", mk(Q8_0, 64, 2), 0, 2, true},
		{"negative row", mk(Q8_0, 64, 2), -1, 0, true},
		{"valid", mk(Q8_0, 64, 2), 1, 1, false},
	}
	for _, c := range cases {
		err := dst.CopyRow(c.i, c.src, c.j)
		if (err != nil) != c.wantFail {
			t.Errorf("%s: err = %v, want failure %v", c.name, err, c.wantFail)
		}
	}
}
