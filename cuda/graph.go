package cuda

/*
#include "shim.h"

static CUresult s_begin(strata_cu *d, CUcontext c, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuStreamBeginCapture(s, 2); // CU_STREAM_CAPTURE_MODE_RELAXED
}
static CUresult s_end(strata_cu *d, CUcontext c, CUstream s, CUgraph *g) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuStreamEndCapture(s, g);
}
static CUresult s_instantiate(strata_cu *d, CUcontext c, CUgraphExec *x, CUgraph g) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuGraphInstantiateWithFlags(x, g, 0);
}
static CUresult s_glaunch(strata_cu *d, CUcontext c, CUgraphExec x, CUstream s) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	return d->cuGraphLaunch(x, s);
}
static CUresult s_gdestroy(strata_cu *d, CUcontext c, CUgraph g, CUgraphExec x) {
	CUresult r = d->cuCtxSetCurrent(c); if (r) return r;
	if (x) { r = d->cuGraphExecDestroy(x); if (r) return r; }
	if (g) r = d->cuGraphDestroy(g);
	return r;
}
*/
import "C"

// Graph is a captured, instantiated sequence of stream work (a decode step, say),
// replayed with one launch. Captured kernels keep the pointers and sizes they were
// captured with: buffers must stay where they were.
type Graph struct {
	c *Context
	g C.CUgraph
	x C.CUgraphExec
}

// BeginCapture starts recording the work queued on s into a graph instead of running it.
func (s *Stream) BeginCapture() error {
	return s.c.d.check(C.s_begin(s.c.d.api, s.c.ctx, s.s), "cuStreamBeginCapture")
}

// EndCapture stops recording and instantiates the graph.
func (s *Stream) EndCapture() (*Graph, error) {
	var g C.CUgraph
	if err := s.c.d.check(C.s_end(s.c.d.api, s.c.ctx, s.s, &g), "cuStreamEndCapture"); err != nil {
		return nil, err
	}
	gr := &Graph{c: s.c, g: g}
	if err := s.c.d.check(C.s_instantiate(s.c.d.api, s.c.ctx, &gr.x, g), "cuGraphInstantiate"); err != nil {
		_ = gr.Destroy()
		return nil, err
	}
	return gr, nil
}

// Launch replays the graph on s.
func (g *Graph) Launch(s *Stream) error {
	return g.c.d.check(C.s_glaunch(g.c.d.api, g.c.ctx, g.x, s.s), "cuGraphLaunch")
}

// Destroy releases the graph.
func (g *Graph) Destroy() error {
	if g == nil || (g.g == nil && g.x == nil) {
		return nil
	}
	gg, x := g.g, g.x
	g.g, g.x = nil, nil
	return g.c.d.check(C.s_gdestroy(g.c.d.api, g.c.ctx, gg, x), "cuGraphDestroy")
}
