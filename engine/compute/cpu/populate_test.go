package cpu

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"strata/engine/quant"
)

// The populater asks for every range's read first, then maps them in order; a populate call
// the OS lacks (Windows) leaves the asks alone.
func TestPopulaterOrder(t *testing.T) {
	data := make([]byte, 40)
	ranges := [][]byte{data[0:10], data[10:20], data[20:30], data[30:40]}
	var mu sync.Mutex
	var calls []string
	rec := func(kind string, err error) func([]byte) error {
		return func(b []byte) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, fmt.Sprintf("%s%d", kind, cap(data)-cap(b)))
			return err
		}
	}
	p := startPopulate(ranges, rec("read", nil), rec("ask", nil))
	p.wait2()
	want := []string{"ask0", "ask10", "ask20", "ask30", "read0", "read10", "read20", "read30"}
	if !slices.Equal(calls, want) || p.done.Load() != 4 {
		t.Fatalf("calls %v, done %d; want %v, 4", calls, p.done.Load(), want)
	}

	calls = nil
	p = startPopulate(ranges, rec("read", errors.ErrUnsupported), rec("ask", nil))
	p.wait2()
	if want := []string{"ask0", "ask10", "ask20", "ask30", "read0"}; !slices.Equal(calls, want) || p.done.Load() != 0 {
		t.Fatalf("calls %v, done %d; want %v, 0", calls, p.done.Load(), want)
	}
}

// wait2 waits for the goroutine to finish everything, without stopping it.
func (p *populater) wait2() { p.wg.Wait() }

// An error stops the populater (the products fault the pages in themselves), and wait
// stops it after the range in progress.
func TestPopulaterStops(t *testing.T) {
	data := make([]byte, 30)
	ranges := [][]byte{data[0:10], data[10:20], data[20:30]}
	p := startPopulate(ranges, func(b []byte) error {
		if cap(data)-cap(b) == 10 {
			return errors.New("boom")
		}
		return nil
	}, nil)
	p.wait2()
	if got := p.done.Load(); got != 1 {
		t.Fatalf("done %d ranges, want 1 (stopped at the error)", got)
	}

	started, release := make(chan struct{}), make(chan struct{})
	var calls int
	p = startPopulate(ranges, func([]byte) error {
		calls++
		if calls == 1 {
			close(started)
			<-release
		}
		return nil
	}, nil)
	<-started
	p.stop.Store(true) // as wait does, while the first range is in progress
	close(release)
	p.wait()
	if calls != 1 {
		t.Fatalf("%d ranges read after wait, want 1 (the one in progress)", calls)
	}
}

// expertRanges lists every routed expert's gate and up, then every down: the order of
// MoE's two passes.
func TestExpertRanges(t *testing.T) {
	mk := func(tag byte) *Weight {
		rb, err := quant.RowBytes(quant.F32, 4)
		if err != nil {
			t.Fatal(err)
		}
		w := &Weight{typ: quant.F32, rows: 2, cols: 4, exps: 3, rowBytes: rb, stride: 2 * rb, data: make([]byte, 3*2*rb)}
		for e := range 3 {
			for i := range w.expert(e) {
				w.expert(e)[i] = tag + byte(e)
			}
		}
		return w
	}
	g, u, d := mk(10), mk(20), mk(30)
	var got []byte
	for _, r := range expertRanges(g, u, d, []int32{0, 2}) {
		if len(r) != 2*g.rowBytes {
			t.Fatalf("a range of %d bytes, want %d", len(r), 2*g.rowBytes)
		}
		got = append(got, r[0])
	}
	if want := []byte{10, 20, 12, 22, 30, 32}; !slices.Equal(got, want) {
		t.Fatalf("ranges of %v, want %v", got, want)
	}
}
