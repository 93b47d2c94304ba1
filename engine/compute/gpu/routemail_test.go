package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/gpu"
	"strata/engine/quant"
)

// TestRouteMail: with MailRoutes on, a decode row's routes and its router's input come back
// through the mail (no download) bit for bit as the downloads bring them, through Read and
// through HostRoutes, also when the router runs inside a replayed graph; where something
// was queued after the router, or two routes wait, the downloads are used and the values
// are the stream's latest.
func TestRouteMail(t *testing.T) {
	b := newGPU(t)
	rng := rand.New(rand.NewPCG(31, 32))
	const hidden, experts, k = 2048, 128, 8
	wv := make([]float32, experts*hidden)
	data := make([]byte, 4*len(wv))
	for i := range wv {
		wv[i] = float32(rng.NormFloat64() * 0.05)
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(wv[i]))
	}
	w, err := b.Place(compute.WeightSpec{Name: "router", Type: quant.F32, Rows: experts, Cols: hidden, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	randRow := func() []float32 {
		v := make([]float32, hidden)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	x, logits, d := b.NewBuf(hidden), b.NewBuf(experts), b.NewBuf(hidden)
	xv, dv := randRow(), randRow()
	b.Write(x, xv)
	b.Write(d, dv)
	route := func() *compute.Routes {
		r := b.RouteRows(logits, x, w, nil, 1, experts, k, false, true)
		if r == nil {
			t.Fatal("RouteRows took nothing")
		}
		return r
	}
	// check compares r with the routes of the device's logits (downloaded) and, when got is
	// not nil, got with the row the host expects.
	check := func(what string, r *compute.Routes, got, want []float32) {
		t.Helper()
		if err := b.Err(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got != nil && !slices.Equal(got, want) {
			t.Fatalf("%s: the row read differs from the row on the device", what)
		}
		l := make([]float32, experts)
		b.Read(logits, l)
		sameRoutes(t, what, r, compute.RouteHost(l, 1, experts, k, true))
	}
	b.MailRoutes(true)
	step := func() { // a decode layer's tail: four ops (a graph once seen twice), the router
		for range 4 {
			b.Add(x, d, hidden)
			for i := range xv {
				xv[i] += dv[i]
			}
		}
	}
	for i := range 5 {
		step()
		r := route()
		b.Flush()
		before := gpu.MailReads(b)
		got := make([]float32, hidden)
		b.Read(x, got)
		if gpu.MailReads(b) != before+1 {
			t.Fatalf("step %d: the routes were not read from the mail", i)
		}
		check(fmt.Sprintf("Read, step %d", i), r, got, xv)
	}
	if gpu.GraphReplays(b) == 0 {
		t.Error("no step ran as a replayed graph")
	}

	step()
	r := route()
	before := gpu.MailReads(b)
	b.HostRoutes(r)
	if gpu.MailReads(b) != before+1 {
		t.Fatal("HostRoutes did not read the mail")
	}
	check("HostRoutes", r, nil, nil)

	// Work queued after the router: x changes after it read it, so the mail's row is stale.
	r = route()
	b.Add(x, d, hidden)
	for i := range xv {
		xv[i] += dv[i]
	}
	before = gpu.MailReads(b)
	got := make([]float32, hidden)
	b.Read(x, got)
	if gpu.MailReads(b) != before {
		t.Error("Read took the mail with an add queued after the router")
	}
	if !slices.Equal(got, xv) {
		t.Fatal("Read after an add queued behind the router: not the latest row")
	}
	l := make([]float32, experts)
	b.Read(logits, l)
	sameRoutes(t, "an add after the router", r, compute.RouteHost(l, 1, experts, k, true))

	// Two routes waiting: the second's mail does not cover the first.
	r1 := route()
	r2 := route()
	before = gpu.MailReads(b)
	b.Read(x, got)
	if gpu.MailReads(b) != before {
		t.Error("Read took the mail with two routes waiting")
	}
	check("two routes waiting, the first", r1, got, xv)
	check("two routes waiting, the second", r2, nil, nil)

	// Off: the downloads, the same values.
	b.MailRoutes(false)
	step()
	r = route()
	before = gpu.MailReads(b)
	b.Read(x, got)
	if gpu.MailReads(b) != before {
		t.Error("Read took the mail with mail off")
	}
	check("mail off", r, got, xv)
}
