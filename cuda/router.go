package cuda

import "fmt"

// RouteMode is how router.cu turns a token's expert logits into k ids and weights.
type RouteMode int

const (
	// RouteSoftmax: a softmax over every expert, the k most probable (ties to the lower
	// id) and their probabilities (compute.RouteHost without norm).
	RouteSoftmax RouteMode = iota
	// RouteSoftmaxNorm: RouteSoftmax renormalised so the k weights sum to 1.
	RouteSoftmaxNorm
	// RouteTopKSoftmax: the k largest logits (ties to the lower id), then a softmax over
	// those k (gpt-oss; compute.RouteHostTopK).
	RouteTopKSoftmax
)

// MaxRouterExperts bounds the experts a router kernel takes: its shared memory holds the
// values and every 32-expert slice's k candidates.
const MaxRouterExperts = 2048

const routerThreads = 128 // ROUTER_THREADS in router.cu

// RouterFits reports whether the router kernels take experts and k.
func RouterFits(experts, k int) bool {
	return k > 0 && k <= 32 && k <= experts && experts <= MaxRouterExperts
}

// routerShared is route_block's shared memory: the padded values, then the candidates'
// values and ids.
func routerShared(experts, k int) int {
	slices := ceilDiv(experts, 32)
	return 4 * (32*slices + 2*slices*k)
}

func (m RouteMode) valid() bool { return m >= RouteSoftmax && m <= RouteTopKSoftmax }

// RouterTopK routes logits [tokens][nExp]: the topK expert ids of each token (int32) into
// ids [tokens][topK] and their weights into weights, by mode.
func (k *Kernels) RouterTopK(s *Stream, logits, ids, weights DevicePtr, tokens, nExp, topK int, mode RouteMode) error {
	if tokens <= 0 || tokens > 1<<31-1 || !RouterFits(nExp, topK) || !mode.valid() {
		return fmt.Errorf("cuda: router_topk: bad shape tokens=%d experts=%d k=%d mode=%d", tokens, nExp, topK, mode)
	}
	a := new(Args).Ptr(logits).Ptr(ids).Ptr(weights).Int(nExp).Int(topK).Int(int(mode))
	return k.launch("router_topk", s, Dim3{X: tokens}, Dim3{X: routerThreads}, routerShared(nExp, topK), a)
}

// RouterF32Fits reports whether RouterF32 takes a router of nExp rows of cols values with k
// experts a token, x and w at these addresses.
func RouterF32Fits(x, w DevicePtr, cols, nExp, k int) bool {
	return RouterFits(nExp, k) && cols > 0 && cols%4 == 0 && x%16 == 0 && w%16 == 0
}

// RouterF32 is a decode row's router in one launch: logits [nExp] = W [nExp][cols] (f32) x
// [cols], plus bias [nExp] (0: none), then RouterTopK of them (one token) into ids and
// weights. done is 4 zeroed bytes of the caller's that the launch uses to find its last
// block and leaves zero; launches sharing it must be ordered (one stream).
func (k *Kernels) RouterF32(s *Stream, x, w, bias, logits, ids, weights, done DevicePtr, cols, nExp, topK int, mode RouteMode) error {
	return k.RouterF32Mail(s, x, w, bias, logits, ids, weights, done, cols, nExp, topK, mode, 0, 0)
}

// The route mail's layout in bytes (router.cu's ROUTE_MAIL_*): the tag, then the ids, the
// weights and x.
const (
	RouteMailIDs     = 4 * 32
	RouteMailWeights = 4 * 64
	RouteMailX       = 4 * 128
)

// RouteMailBytes is the size of a route mail for a row of cols values.
func RouteMailBytes(cols int) int { return RouteMailX + 4*cols }

// RouterF32Mail is RouterF32 that also posts its result to the host: with mail (page-locked
// host memory mapped into the device, RouteMailBytes(cols) of it, 16-byte aligned; 0:
// none) the launch writes x, the ids and the weights there (RouteMail* offsets), and then
// tag in its first word, so that a host polling that word for tag reads them without a copy
// or a wait for the stream.
func (k *Kernels) RouterF32Mail(s *Stream, x, w, bias, logits, ids, weights, done DevicePtr, cols, nExp, topK int, mode RouteMode, mail DevicePtr, tag uint32) error {
	if !RouterF32Fits(x, w, cols, nExp, topK) || !mode.valid() || done == 0 || mail%16 != 0 {
		return fmt.Errorf("cuda: router_f32: bad shape cols=%d experts=%d k=%d mode=%d (cols a multiple of 4, x, w and the mail 16-byte aligned, a counter)", cols, nExp, topK, mode)
	}
	a := new(Args).Ptr(x).Ptr(w).Ptr(bias).Ptr(logits).Ptr(ids).Ptr(weights).Ptr(done).Int(cols).Int(nExp).Int(topK).Int(int(mode)).Ptr(mail).Int(int(int32(tag)))
	return k.launch("router_f32", s, Dim3{X: nExp}, Dim3{X: routerThreads}, routerShared(nExp, topK), a)
}
