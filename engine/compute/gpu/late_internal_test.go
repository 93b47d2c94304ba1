package gpu

import (
	"slices"
	"testing"
	"time"
)

// TestAddLate queues late adds before the host fills the rows: the device must wait for
// Ready, then add what the rows hold then (not when the add was queued), for several rounds
// so that both areas are reused.
func TestAddLate(t *testing.T) {
	b := newForTest(t)
	const n = 2048 + 3
	dst := b.NewBuf(n)
	base := make([]float32, n)
	for i := range base {
		base[i] = float32(i % 97)
	}
	for round := range 5 {
		b.Write(dst, base)
		r, err := b.LateRows(n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Rows {
			r.Rows[i] = -1e9 // what an add run too early would bring
		}
		if err := b.AddLate(dst, r); err != nil {
			r.Ready()
			t.Fatal(err)
		}
		b.Flush()
		want := make([]float32, n)
		go func() {
			time.Sleep(20 * time.Millisecond) // the stream reaches the wait long before
			for i := range r.Rows {
				r.Rows[i] = float32(round*1000 + i)
			}
			r.Ready()
		}()
		for i := range want {
			want[i] = base[i] + float32(round*1000+i)
		}
		got := make([]float32, n)
		b.Read(dst, got)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			k := 0
			for k < n && got[k] == want[k] {
				k++
			}
			t.Fatalf("round %d: element %d is %g, want %g", round, k, got[k], want[k])
		}
	}
	if b.late == nil || b.late.seq != 5 {
		t.Errorf("late area %+v after 5 rounds", b.late)
	}
}

// TestAddLateRejects refuses rows of another call and a destination too small, and
// gives rows larger than the area from a new one.
func TestAddLateRejects(t *testing.T) {
	b := newForTest(t)
	small := b.NewBuf(8)
	r1, err := b.LateRows(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AddLate(small, r1); err == nil {
		t.Error("16 floats into a buffer of 8: no error")
	}
	r1.Ready()
	r2, err := b.LateRows(64) // a larger area
	if err != nil {
		t.Fatal(err)
	}
	big := b.NewBuf(64)
	if err := b.AddLate(big, r1); err == nil {
		t.Error("rows of an earlier call: no error")
	}
	// The larger area's rows go through, its tickets numbered on from the first area's.
	for i := range r2.Rows {
		r2.Rows[i] = float32(i + 1)
	}
	b.Write(big, make([]float32, 64))
	if err := b.AddLate(big, r2); err != nil {
		t.Error(err)
	}
	r2.Ready()
	got := make([]float32, 64)
	b.Read(big, got)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, r2.Rows) {
		t.Errorf("the larger area's add brought %v", got[:4])
	}
	if b.late.n < 64 || b.late.seq != 2 {
		t.Errorf("area of %d floats at ticket %d after asking for 16, then 64", b.late.n, b.late.seq)
	}
}

// TestAddLateHeldArea makes rows for four adds in a row with no Read between: the adds are
// held for a graph, so the area of the first must not be handed out again (and refilled)
// before the device has read it.
func TestAddLateHeldArea(t *testing.T) {
	b := newForTest(t)
	const n, rounds = 1000, 4
	dst := b.NewBuf(n)
	b.Write(dst, make([]float32, n))
	want := make([]float32, n)
	for round := range rounds {
		r, err := b.LateRows(n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Rows {
			r.Rows[i] = float32((round + 1) * (i + 1))
			want[i] += r.Rows[i]
		}
		err = b.AddLate(dst, r)
		r.Ready()
		if err != nil {
			t.Fatal(err)
		}
	}
	got := make([]float32, n)
	b.Read(dst, got)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("after %d adds: %v, want %v", rounds, got[:4], want[:4])
	}
}
