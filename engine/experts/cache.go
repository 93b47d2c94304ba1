package experts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/platform"
)

// Errors recorded mid-pass surface through the layer's Err, which the model checks after
// every layer.

// Device is the GPU side of the expert cache: a backend that also holds stacks of expert
// slots (compute/gpu implements it; tests drive the cache with a CPU stand-in).
type Device interface {
	compute.Backend
	// NewSlots allocates slots experts of spec's type and shape in device memory.
	NewSlots(spec compute.WeightSpec, slots int) (compute.Weight, error)
	// RegisterHost page-locks host memory (the RAM arena) and maps it into the device.
	RegisterHost(mem []byte) error
	// HostStack views experts in registered host memory (spec.Data, spec.ExpertStride apart)
	// as a stack the device reads over PCIe.
	HostStack(spec compute.WeightSpec) (compute.Weight, error)
	// ReadSlot copies one expert's matrix back from a stack (for --verify).
	ReadSlot(w compute.Weight, slot int) ([]byte, error)
	// Flush starts the work queued so far (a device may hold ops back to replay them as a
	// graph), so it runs while the host computes.
	Flush()
	// WriteSlots copies matrices into slots; work queued afterwards sees them, and the
	// sources may be overwritten once it returns.
	WriteSlots(w compute.Weight, writes []compute.SlotWrite) error
	// HostRoutes makes a routing result readable on the host.
	HostRoutes(r *compute.Routes)
}

// routeMailer is a device whose decode routers can post their routes and input row to the
// host themselves, instead of the host downloading them after waiting for the stream (the
// GPU backend's route mail).
type routeMailer interface{ MailRoutes(on bool) }

// CacheConfig is the plan the cache starts from and how it behaves.
type CacheConfig struct {
	Shape Shape
	// Tier is every expert's starting tier ([layer*Experts+expert]): TierVRAM experts get a
	// slot of their layer's cache, TierPinned ones a pinned host slot, TierCold ones are read
	// from the model file.
	Tier []Tier
	// Rank is the fill order (hottest first); experts missing from it are filled last.
	Rank []ID
	// PCIeFrac is the share of pinned misses the GPU reads over PCIe instead of the CPU,
	// taken per layer and rounded (splitPCIe), so the GPU reads fewer than the share where
	// layers have few misses. PCIeAuto tunes it on the decode steps' times (pcietune.go),
	// from PCIeFrac when that is above 0.
	PCIeFrac float64
	PCIeAuto bool
	// AsyncMisses computes a decode layer's CPU misses on the host pool while the host's
	// goroutine queues the next layer, on a device whose stream can wait for them
	// (latemisses.go).
	AsyncMisses bool
	// AdaptEvery is the number of tokens between adaptive swaps; 0 = never.
	AdaptEvery int
	// StreamSlots is the size of the ring that batches stream non-VRAM experts through;
	// 0 computes every miss on the CPU.
	StreamSlots int
	// StreamMinTokens: batches of at least this many tokens stream their misses to the GPU;
	// smaller ones (decode) compute them on the CPU.
	StreamMinTokens int
	// Pinned holds the TierPinned experts (the RAM arena); PinnedMapped says it is
	// registered with the device, so the GPU can read it over PCIe.
	Pinned       *Arena
	PinnedMapped bool
	// Prefetch, when set, is asked to bring cold experts in as soon as they are routed.
	Prefetch *Prefetcher
	// Cold, when set, reads the cold experts a batch streams with unbuffered reads instead
	// of through the mapping (the tiered mode: the page cache should not fill with them).
	Cold *ColdReader
	// Helpers are the helper GPUs (helper 1, then helper 2) and HelperOf says which of them
	// holds each TierHelper expert ([layer*Experts+expert]: 0 or 1). A layer's helper hits
	// run there on a copy of the layer's input; their sum comes back through host memory
	// and is added on the main device.
	Helpers  []Device
	HelperOf []int8
	// HelperRows is how many tokens' results a helper sends back at once: each helper's
	// results return through HelperRows rows of the hidden size in page-locked host memory
	// (when the helper allocates such memory, see pinnedRows), a batch of more tokens in
	// several rounds. 0: a whole batch at once, in plain memory.
	HelperRows int
}

// pinnedRows is what a helper device offers for the rows its results come back through
// (the GPU backend: page-locked, portable host memory, so both cards copy at full speed).
type pinnedRows interface {
	PinnedFloats(n int) ([]float32, error)
}

// Cache places every layer's experts across VRAM slots, pinned host slots and the model
// file, and runs each layer's routed experts where they are: VRAM hits on the device,
// misses on the CPU pool at the same time (or on the device over PCIe, or streamed in for a
// batch), summed with the router weights on the device.
type Cache struct {
	dev   Device
	host  *cpu.Backend
	cfg   CacheConfig
	sh    Shape
	tier  []Tier  // current tier of every expert
	slot  []int32 // its slot in its tier's stack (-1 for cold)
	lays  []*layerCache
	rings map[ringKey]*ring

	mu    sync.Mutex // guards the counters below (Snapshot runs on other goroutines)
	stats CacheStats
	// heat is every expert's routes, decayed at each adaptive pass (adapt.go); tokens
	// counts the tokens since the last pass.
	heat   []float32
	tokens int
	pays   func(hin, hout float32) bool // paysToSwap; tests swap more eagerly
	// steps counts forward steps (a step runs the layers in ascending order, so a call for a
	// layer at or below the last one's starts a step); coldUsed[i] is 1 + the step in which
	// expert i was last computed from the file, 0 if never (see prefetchCold).
	steps     uint64
	lastLayer int
	coldUsed  []uint64

	tune shareTuner // the share when PCIeAuto (c.mu)
	err  compute.StickyErr

	hostX, hostOut compute.Buf // host activations for misses
	devOut         compute.Buf // their sum, uploaded
	hostXs         []float32
	// misses waits for the CPU misses started by startMisses (nil: none running). moe's
	// goroutine starts and waits for them; FinishMisses, between steps, too.
	misses func()
	// lateRefused: the device refused late rows once, so misses are no longer computed ahead.
	lateRefused bool
	// routesAt is when this layer's routes reached the host; readyAt when the last late
	// misses were made ready (written by the pool's worker, read after misses returned;
	// zero once counted).
	routesAt, readyAt time.Time

	helperX, helperOut [2]compute.Buf // each helper's copy of the input and its results
	helperDevOut       [2]compute.Buf // those results on the main device
	helperZeros        []float32      // clears a helper's results before its hits add up
	helperPlain        []float32      // results coming back without HelperRows
	// Each helper's result rows (HelperRows tokens, pinned when it offers them) and, when a
	// batch comes back in rounds, a round's rows on the helper and on the main device.
	helperRows             [2][]float32
	helperRound, mainRound [2]compute.Buf
	helperRoundN           [2]int
}

// CacheStats is what the tier map and benchmarks show of the cache.
type CacheStats struct {
	Routed         map[Tier]uint64 // routed (token, expert) pairs by the tier that served them
	Decode         map[Tier]uint64 // the same, counting single-token steps only
	PCIe           uint64          // pinned misses read by the GPU over PCIe
	PCIeShare      float64         // the share of pinned misses sent there now
	Streamed       uint64          // experts streamed into the ring for batches
	ColdReads      uint64          // of those, cold ones read around the page cache
	ColdReadErrors uint64          // unbuffered reads that failed (the mapping served them)
	Overlapped     uint64          // rounds of streamed batches copied on the device's copy stream, beside its kernels (ringlap.go)
	Swaps          uint64
	FillBytes      int64
	FillTime       time.Duration
	HostTime       // the host's time in every call
	// DecodeHost is the host's time in single-token calls only, and DecodeSteps how many
	// tokens those were (layer 0's calls), so that a decode token's share can be told apart
	// from the prompts'.
	DecodeHost    HostTime
	DecodeSteps   uint64
	Helpers       time.Duration // host time sending inputs to the helper GPUs and their results back
	HelperResults time.Duration // of that, waiting for the results and bringing them back
	DeviceSlots   int
	PinnedSlots   int
	HelperSlots   [2]int
}

// HostTime is where the host's time in the cache went.
type HostTime struct {
	WaitRoutes time.Duration // waiting for the routing result and activations
	CPUMisses  time.Duration // computing misses
	Uploads    time.Duration // uploading miss results (late misses: queueing their add) and streamed experts (overlapped rounds: queueing only, small)
	// Late misses only (latemisses.go), the two parts of a layer's critical path besides
	// the misses themselves: MissesLag from the routes on the host to the pool starting the
	// misses (sorting the pairs, queueing), AfterMisses from the misses' rows made ready to
	// the next layer's routes on the host (the device's add, attention and router, and the
	// routes' download).
	MissesLag, AfterMisses time.Duration
}

// addHost adds to the host times of a call over n tokens (the decode ones too for one
// token); c.mu is held.
func (c *Cache) addHost(n int, add func(*HostTime)) {
	add(&c.stats.HostTime)
	if n == 1 {
		add(&c.stats.DecodeHost)
	}
}

// layerCache is one layer's share.
type layerCache struct {
	l       int                   // the layer
	file    [3]compute.WeightSpec // the stacked tensors as they sit in the file
	fileCPU [3]compute.Weight     // the CPU's view of them
	vram    [3]compute.Weight     // device slot stacks (nil with no slots)
	pinDev  [3]compute.Weight     // pinned slot stacks, device view
	pinCPU  [3]compute.Weight     // the same bytes for the CPU
	helper  [2][3]compute.Weight  // slot stacks on helper GPUs 1 and 2 (nil with no slots)
	ffn     layerFFN              // biases and activation (gpt-oss); zero: plain SwiGLU
}

type ringKey struct {
	t          [3]string
	rows, cols [3]int
}

func keyOf(s [3]compute.WeightSpec) ringKey {
	var k ringKey
	for i, w := range s {
		k.t[i], k.rows[i], k.cols[i] = w.Type.String(), w.Rows, w.Cols
	}
	return k
}

// ring is a stack of device slots batches stream experts through (shared by layers of the
// same tensor shapes).
type ring struct {
	st   [3]compute.Weight
	bias [3]compute.Weight // float32 bias rows of the streamed experts (gpt-oss; nil: none)
	n    int
}

// NewCache starts an empty cache; Layer places each layer, Fill copies the experts in.
func NewCache(dev Device, host *cpu.Backend, cfg CacheConfig) (*Cache, error) {
	sh := cfg.Shape
	if len(cfg.Tier) != sh.Count() {
		return nil, fmt.Errorf("experts: plan has %d tiers for %d experts", len(cfg.Tier), sh.Count())
	}
	if len(cfg.Helpers) > 2 {
		return nil, fmt.Errorf("experts: %d helper GPUs, at most 2", len(cfg.Helpers))
	}
	for i, t := range cfg.Tier {
		if t != TierHelper {
			continue
		}
		if i >= len(cfg.HelperOf) || cfg.HelperOf[i] < 0 || int(cfg.HelperOf[i]) >= len(cfg.Helpers) {
			return nil, fmt.Errorf("experts: %s is planned on a helper GPU, but no helper holds it (%d helpers)", ID{i / sh.Experts, i % sh.Experts}, len(cfg.Helpers))
		}
	}
	c := &Cache{
		dev: dev, host: host, cfg: cfg, sh: sh,
		tier: slices.Clone(cfg.Tier), slot: make([]int32, sh.Count()),
		lays: make([]*layerCache, sh.Layers), rings: map[ringKey]*ring{},
		heat: make([]float32, sh.Count()), pays: paysToSwap,
		coldUsed: make([]uint64, sh.Count()), lastLayer: -1,
	}
	c.stats.Routed, c.stats.Decode = map[Tier]uint64{}, map[Tier]uint64{}
	if cfg.PCIeAuto {
		start := cfg.PCIeFrac
		if start <= 0 {
			start = tuneStart
		}
		c.tune = newShareTuner(start)
	}
	for i := range c.slot {
		c.slot[i] = -1
	}
	if m, ok := dev.(routeMailer); ok {
		m.MailRoutes(true) // every decode layer's routes are read here (moe)
	}
	return c, nil
}

// Layer places layer l's experts: slot stacks for its VRAM and pinned experts, the CPU's
// view of the file for the rest. It is a model.ExpertPlacer.
func (c *Cache) Layer(l int, gate, up, down compute.WeightSpec) (compute.Experts, error) {
	if l < 0 || l >= c.sh.Layers {
		return nil, fmt.Errorf("experts: layer %d of %d", l, c.sh.Layers)
	}
	L := &layerCache{l: l, file: [3]compute.WeightSpec{gate, up, down}}
	for i, s := range L.file {
		if s.Experts != c.sh.Experts {
			return nil, fmt.Errorf("experts: %s holds %d experts, the plan %d", s.Name, s.Experts, c.sh.Experts)
		}
		w, err := c.host.Place(s)
		if err != nil {
			return nil, err
		}
		L.fileCPU[i] = w
	}
	var nv, np int
	var nh [2]int
	for e := range c.sh.Experts {
		switch i := c.sh.Index(ID{l, e}); c.tier[i] {
		case TierVRAM:
			c.slot[i] = int32(nv)
			nv++
		case TierHelper:
			h := c.cfg.HelperOf[i]
			c.slot[i] = int32(nh[h])
			nh[h]++
		case TierPinned:
			c.slot[i] = int32(np)
			np++
		case TierCold:
		default:
			return nil, fmt.Errorf("experts: %s: tier %s cannot be served by the expert cache", ID{l, e}, c.tier[i])
		}
	}
	if nv > 0 {
		for i, s := range L.file {
			w, err := c.dev.NewSlots(s, nv)
			if err != nil {
				return nil, err
			}
			L.vram[i] = w
		}
	}
	if np > 0 {
		if err := c.pinnedStacks(l, L, np); err != nil {
			return nil, err
		}
	}
	for h, n := range nh {
		if n == 0 {
			continue
		}
		if err := c.allocHelperRows(h, L.file[0].Cols); err != nil {
			return nil, err
		}
		for i, s := range L.file {
			w, err := c.cfg.Helpers[h].NewSlots(s, n)
			if err != nil {
				return nil, fmt.Errorf("experts: helper GPU %d: %w", h+1, err)
			}
			L.helper[h][i] = w
		}
	}
	if c.cfg.StreamSlots > 0 && nv < c.sh.Experts {
		if _, ok := c.rings[keyOf(L.file)]; !ok {
			rg := &ring{n: min(c.cfg.StreamSlots, c.sh.Experts)}
			for i, s := range L.file {
				w, err := c.dev.NewSlots(s, rg.n)
				if err != nil {
					return nil, fmt.Errorf("experts: streaming ring: %w", err)
				}
				rg.st[i] = w
			}
			c.rings[keyOf(L.file)] = rg
		}
	}
	c.lays[l] = L
	c.stats.DeviceSlots += nv
	c.stats.HelperSlots[0] += nh[0]
	c.stats.HelperSlots[1] += nh[1]
	c.stats.PinnedSlots += np
	return &layerExperts{c: c, l: l}, nil
}

// pinnedStacks views layer l's pinned experts in the arena as three stacks (slot k is the
// k-th pinned expert by id), for the CPU and, when the arena is registered, the device.
func (c *Cache) pinnedStacks(l int, L *layerCache, np int) error {
	a := c.cfg.Pinned
	if a == nil {
		return fmt.Errorf("experts: layer %d has %d pinned experts but no RAM arena holds them", l, np)
	}
	base := a.Bytes()
	ids := make([]ID, 0, np)
	for e := range c.sh.Experts {
		if c.tier[c.sh.Index(ID{l, e})] == TierPinned {
			ids = append(ids, ID{l, e})
		}
	}
	for m := range 3 {
		var first, stride int
		for k, id := range ids {
			g, u, d, ok := a.Blob(id)
			if !ok {
				return fmt.Errorf("experts: %s is pinned but not in the RAM arena", id)
			}
			part := [3][]byte{g, u, d}[m]
			if len(part) != len(L.matrix(m, id.Expert)) {
				return fmt.Errorf("experts: %s: the arena holds %d bytes of matrix %d, the model %d", id, len(part), m, len(L.matrix(m, id.Expert)))
			}
			off := offsetIn(base, part)
			switch k {
			case 0:
				first = off
			case 1:
				stride = off - first
			default:
				if off != first+k*stride {
					return fmt.Errorf("experts: layer %d: the arena's blobs are not evenly spaced", l)
				}
			}
		}
		per := len(L.matrix(m, ids[0].Expert))
		if stride == 0 {
			stride = per
		}
		spec := L.file[m]
		spec.Experts, spec.ExpertStride = np, stride
		spec.Data = base[first : first+(np-1)*stride+per]
		w, err := c.host.Place(spec)
		if err != nil {
			return err
		}
		L.pinCPU[m] = w
		if c.cfg.PinnedMapped {
			if L.pinDev[m], err = c.dev.HostStack(spec); err != nil {
				return err
			}
		}
	}
	return nil
}

// offsetIn is where sub starts inside base (sub is a view of base).
func offsetIn(base, sub []byte) int {
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(base))))
}

// matrix returns expert e's bytes of matrix m (0 gate, 1 up, 2 down) in the file.
func (L *layerCache) matrix(m, e int) []byte {
	s := L.file[m]
	per := len(s.Data) / s.Experts
	return s.Data[e*per : (e+1)*per]
}

// Fill copies every VRAM expert into its slot, hottest first (Rank order), and reports
// bytes done of the total.
func (c *Cache) Fill(ctx context.Context, progress func(done, total int64)) error {
	start := time.Now()
	order := make([]ID, 0, c.sh.Count())
	seen := make([]bool, c.sh.Count())
	for _, id := range c.cfg.Rank {
		if id.Layer >= 0 && id.Layer < c.sh.Layers && id.Expert >= 0 && id.Expert < c.sh.Experts && !seen[c.sh.Index(id)] {
			seen[c.sh.Index(id)] = true
			order = append(order, id)
		}
	}
	for i := range seen {
		if !seen[i] {
			order = append(order, ID{i / c.sh.Experts, i % c.sh.Experts})
		}
	}
	var total, done int64
	for _, id := range order {
		if t := c.tier[c.sh.Index(id)]; t == TierVRAM || t == TierHelper {
			total += c.sh.BlobBytes()
		}
	}
	// Batches of experts in rank order; within a batch, one WriteSlots per stack.
	type stackWrites struct {
		dev    Device
		w      compute.Weight
		writes []compute.SlotWrite
	}
	const batch = 64
	var batches [][]stackWrites
	for lo := 0; lo < len(order); lo += batch {
		var b []stackWrites
		for _, id := range order[lo:min(lo+batch, len(order))] {
			i := c.sh.Index(id)
			L := c.lays[id.Layer]
			dev, stacks := c.dev, L.vram
			switch c.tier[i] {
			case TierVRAM:
			case TierHelper:
				h := c.cfg.HelperOf[i]
				dev, stacks = c.cfg.Helpers[h], L.helper[h]
			default:
				continue // pinned experts are in the arena already; cold ones stay in the file
			}
			for m, w := range stacks {
				k := slices.IndexFunc(b, func(s stackWrites) bool { return s.w == w })
				if k < 0 {
					k, b = len(b), append(b, stackWrites{dev: dev, w: w})
				}
				b[k].writes = append(b[k].writes, compute.SlotWrite{Slot: int(c.slot[i]), Data: L.matrix(m, id.Expert)})
			}
		}
		batches = append(batches, b)
	}
	// Ask the OS for the next batch's exact ranges while this one is written: left to page
	// faults, the file's read-ahead (8 MiB on many disks) also reads the neighbouring
	// experts this fill skips, two or three times the bytes the VRAM needs.
	advise := func(k int) {
		if k < len(batches) {
			for _, s := range batches[k] {
				for _, w := range s.writes {
					_ = platform.AdviseWillNeed(w.Data)
				}
			}
		}
	}
	advise(0)
	for k, b := range batches {
		if err := ctx.Err(); err != nil {
			return err
		}
		advise(k + 1)
		for _, s := range b {
			if err := s.dev.WriteSlots(s.w, s.writes); err != nil {
				return fmt.Errorf("experts: fill: %w", err)
			}
			for _, w := range s.writes {
				done += int64(len(w.Data))
			}
		}
		if progress != nil {
			progress(done, total)
		}
	}
	c.mu.Lock()
	c.stats.FillBytes, c.stats.FillTime = done, time.Since(start)
	c.mu.Unlock()
	return nil
}

// layerExperts is what the model calls for one layer.
type layerExperts struct {
	c *Cache
	l int
}

func (le *layerExperts) MoE(dst, x compute.Buf, r *compute.Routes) { le.c.moe(le.l, dst, x, r) }

func (le *layerExperts) Err() error { return le.c.err.Take() }

// entry is one routed (token, expert) pair with its weight and where it runs.
type entry struct {
	tok  int
	id   int32 // slot or expert id in the stack it runs on
	w    float32
	expt int32
}

// moe splits a layer's routed pairs by where their expert is and runs each part.
func (c *Cache) moe(l int, dst, x compute.Buf, r *compute.Routes) {
	if r.N <= 0 || r.K <= 0 {
		return
	}
	L := c.lays[l]
	n, K, H := r.N, r.K, L.file[0].Cols
	c.waitMisses()
	// A decode step whose layer has experts off the main device reads its input first: the
	// Read brings the routes with it, one wait instead of two (the routes', then x's).
	early := n == 1 && c.servedOff(l)
	if early {
		c.readX(x, n, H)
	}
	t0 := time.Now()
	c.dev.HostRoutes(r)
	c.routesAt = time.Now()
	wait, after := c.routesAt.Sub(t0), time.Duration(0)
	if !c.readyAt.IsZero() {
		if l > 0 { // not the misses of a step that failed before its end
			after = c.routesAt.Sub(c.readyAt)
		}
		c.readyAt = time.Time{}
	}
	c.mu.Lock()
	c.addHost(r.N, func(h *HostTime) { h.WaitRoutes += wait; h.AfterMisses += after })
	c.mu.Unlock()
	if len(r.IDs) < n*K || len(r.Weights) < n*K {
		c.err.Set(fmt.Errorf("experts: layer %d: routes hold %d ids for %d x %d pairs", l, len(r.IDs), n, K))
		return
	}
	stream := c.cfg.StreamSlots > 0 && n >= c.cfg.StreamMinTokens
	var vram, pcie, pinCPU, cold, streamed []entry
	var helper [2][]entry
	c.mu.Lock()
	for i, e := range r.IDs[:n*K] {
		if e < 0 || int(e) >= c.sh.Experts {
			c.mu.Unlock()
			c.err.Set(fmt.Errorf("experts: layer %d: pair %d routes to expert %d of %d", l, i, e, c.sh.Experts))
			return
		}
		idx := c.sh.Index(ID{l, int(e)})
		en := entry{tok: i / K, w: r.Weights[i], expt: e, id: c.slot[idx]}
		t := c.tier[idx]
		c.heat[idx]++
		switch {
		case t == TierVRAM:
			vram = append(vram, en)
		case t == TierHelper:
			h := c.cfg.HelperOf[idx]
			helper[h] = append(helper[h], en)
		case stream:
			streamed = append(streamed, en)
		case t == TierPinned:
			pinCPU = append(pinCPU, en)
		default:
			en.id = e
			cold = append(cold, en)
		}
		c.stats.Routed[t]++
		if n == 1 {
			c.stats.Decode[t]++
		}
	}
	if L.pinDev[0] != nil {
		pinCPU, pcie = c.splitPCIe(pinCPU)
		c.stats.PCIe += uint64(len(pcie))
	}
	if l == 0 {
		c.tokens += n
		if n == 1 {
			c.stats.DecodeSteps++
		}
		if c.cfg.PCIeAuto && n == 1 {
			c.tune.decodeStep(time.Now())
		} else if c.cfg.PCIeAuto {
			c.tune.batchStep()
		}
	}
	if l <= c.lastLayer {
		c.steps++
	}
	c.lastLayer = l
	var fetch []ID
	if c.cfg.Prefetch != nil && len(cold) > 0 {
		fetch = c.prefetchCold(l, cold)
	}
	c.mu.Unlock()

	if len(fetch) > 0 {
		// Ask the OS for the cold experts' pages now, so the pool's threads do not stall on
		// one page fault after another.
		c.cfg.Prefetch.Prefetch(fetch)
	}
	// The host's copy of x comes first, while the device is idle after the routes; then the
	// device work is queued, and runs while the host computes the misses.
	onHost := len(pinCPU)+len(cold) > 0
	onHelpers := len(helper[0])+len(helper[1]) > 0
	if (onHost || onHelpers) && !early {
		c.readX(x, n, H)
	}
	if onHelpers {
		// The helpers start first: they work while the main device runs its hits and the
		// host its misses.
		c.sendToHelpers(L, helper, n, H)
	}
	// Misses computed ahead start first, so the pool works while the device work is queued.
	var late *compute.LateRows
	if onHost && c.missesAhead(l, n, onHelpers) {
		late = c.startMisses(L, pinCPU, cold, n, H)
	}
	c.runOn(c.dev, dst, x, L.vram, L.ffn.vram, vram, n)
	c.runOn(c.dev, dst, x, L.pinDev, L.ffn.pinDev, pcie, n)
	if len(streamed) > 0 {
		c.stream(L, dst, x, streamed, n)
	}
	switch {
	case late != nil:
		c.addLate(dst, late, n, H)
	case onHost:
		c.dev.Flush()
		c.cpuMisses(L, dst, pinCPU, cold, n, H)
	}
	if onHelpers {
		c.helperResults(dst, helper, n, H)
	}
	if l == c.sh.Layers-1 && c.cfg.AdaptEvery > 0 && c.tokens >= c.cfg.AdaptEvery {
		c.adapt()
	}
}

// servedOff says whether some expert of layer l is served off the main device's slots
// (pinned, cold or on a helper), so that a step's pairs may need its input on the host.
func (c *Cache) servedOff(l int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.tier[l*c.sh.Experts:(l+1)*c.sh.Experts], func(t Tier) bool { return t != TierVRAM })
}

// prefetchRecent is how many steps after an expert was computed from the file its pages
// count as still in memory, so that prefetchCold leaves it out.
const prefetchRecent = 8

// prefetchCold lists the experts of layer l's cold entries worth a prefetch (each once), and
// records this step as their last use; c.mu is held. An expert computed within the last
// prefetchRecent steps is left out: its pages were just read, and asking the OS for them
// again costs a walk over every page of the expert (madvise over 2.7 MB of a 30b-a3b expert:
// ~50 us), which on the H200's 16 threads with every expert off the GPU took a core's worth
// of time beside the pool, for pages that were all in memory.
func (c *Cache) prefetchCold(l int, cold []entry) []ID {
	var ids []ID
	for _, e := range cold {
		i := c.sh.Index(ID{l, int(e.expt)})
		last := c.coldUsed[i]
		if last == c.steps+1 {
			continue // listed already in this step
		}
		if last == 0 || c.steps+1-last > prefetchRecent {
			ids = append(ids, ID{l, int(e.expt)})
		}
		c.coldUsed[i] = c.steps + 1
	}
	return ids
}

// splitPCIe takes the GPU's share of a layer's pinned misses off the CPU's list: the
// share times their number, rounded, per layer rather than spread evenly over all pairs.
// A layer waits for the later of the CPU's misses and the GPU's reads, and an expert read
// in place over PCIe costs the GPU a few of the CPU's, so a layer with one or two misses
// is quickest with them all on the CPU, while one with many gains from the GPU's help (a
// model of q30b's layers, eight routes and about three pinned misses each: 5% off the
// misses' time at the best share). c.mu is held.
func (c *Cache) splitPCIe(pinned []entry) (cpu, pcie []entry) {
	k := min(max(int(math.Round(c.pcieShare()*float64(len(pinned)))), 0), len(pinned))
	cut := len(pinned) - k
	return pinned[:cut:cut], pinned[cut:]
}

// pcieShare is the share of pinned misses the GPU reads over PCIe now; c.mu is held.
func (c *Cache) pcieShare() float64 {
	if c.cfg.PCIeAuto {
		return c.tune.share
	}
	return c.cfg.PCIeFrac
}

// routesOf packs entries into a Routes over n tokens: K' is the most entries any token has,
// and shorter lists are padded with weight-0 copies of slot 0 (their output is multiplied
// by zero).
func routesOf(es []entry, n int) *compute.Routes {
	per := make([]int, n)
	k := 0
	for _, e := range es {
		per[e.tok]++
		k = max(k, per[e.tok])
	}
	r := &compute.Routes{N: n, K: k, IDs: make([]int32, n*k), Weights: make([]float32, n*k)}
	clear(per)
	for _, e := range es {
		j := e.tok*k + per[e.tok]
		per[e.tok]++
		r.IDs[j], r.Weights[j] = e.id, e.w
	}
	return r
}

// runOn runs entries on stacks st of backend b (with ffn, in the stacks' order; nil: plain
// SwiGLU), adding into dst.
func (c *Cache) runOn(b compute.Backend, dst, x compute.Buf, st [3]compute.Weight, ffn *compute.ExpertFFN, es []entry, n int) {
	if len(es) == 0 {
		return
	}
	b.MoE(dst, x, st[0], st[1], st[2], ffn, routesOf(es, n))
}

// cpuMisses computes pinned and cold misses on the host pool (x is in hostXs, from readX)
// and adds them to dst on the device.
func (c *Cache) cpuMisses(L *layerCache, dst compute.Buf, pinCPU, cold []entry, n, H int) {
	t1 := time.Now()
	xs := c.hostXs[:n*H]
	c.hostMisses(L, xs, pinCPU, cold, n, H)
	t2 := time.Now()
	c.dev.Write(c.devOut, xs)
	c.dev.Add(dst, c.devOut, n*H)
	up := time.Since(t2)
	c.mu.Lock()
	c.addHost(n, func(h *HostTime) { h.CPUMisses += t2.Sub(t1); h.Uploads += up })
	c.mu.Unlock()
}

// hostMisses computes the pinned and cold misses on the host pool into out (n*H floats;
// it may be hostXs itself, which holds x).
func (c *Cache) hostMisses(L *layerCache, out []float32, pinCPU, cold []entry, n, H int) {
	c.host.Write(c.hostX, c.hostXs[:n*H])
	clear(out)
	c.host.Write(c.hostOut, out)
	c.runOn(c.host, c.hostOut, c.hostX, L.pinCPU, L.ffn.pinned, pinCPU, n)
	c.runOn(c.host, c.hostOut, c.hostX, L.fileCPU, L.ffn.file, cold, n)
	c.host.Read(c.hostOut, out)
}

// allocHelperRows gives helper h its result rows for a hidden size of H (once; every
// layer of a model has the same).
func (c *Cache) allocHelperRows(h, H int) error {
	if c.helperRows[h] != nil || c.cfg.HelperRows <= 0 {
		return nil
	}
	n := c.cfg.HelperRows * H
	if pr, ok := c.cfg.Helpers[h].(pinnedRows); ok {
		rows, err := pr.PinnedFloats(n)
		if err != nil {
			return fmt.Errorf("experts: helper GPU %d: result rows for %d tokens: %w", h+1, c.cfg.HelperRows, err)
		}
		c.helperRows[h] = rows
		return nil
	}
	c.helperRows[h] = make([]float32, n)
	return nil
}

// sendToHelpers gives each helper with hits the layer's input (in hostXs, from readX) and
// queues its hits there.
func (c *Cache) sendToHelpers(L *layerCache, helper [2][]entry, n, H int) {
	t0 := time.Now()
	if len(c.helperZeros) < n*H {
		c.helperZeros = make([]float32, n*H)
	}
	for h, es := range helper {
		if len(es) == 0 {
			continue
		}
		d := c.cfg.Helpers[h]
		if c.helperX[h] == nil || c.helperX[h].Len() < n*H {
			c.helperX[h], c.helperOut[h] = d.NewBuf(n*H), d.NewBuf(n*H)
			c.helperDevOut[h] = c.dev.NewBuf(n * H)
		}
		d.Write(c.helperX[h], c.hostXs[:n*H])
		d.Write(c.helperOut[h], c.helperZeros[:n*H])
		c.runOn(d, c.helperOut[h], c.helperX[h], L.helper[h], L.ffn.helper[h], es, n)
		d.Flush()
	}
	c.mu.Lock()
	c.stats.Helpers += time.Since(t0)
	c.mu.Unlock()
}

// helperResults brings each helper's sum back through its result rows and adds it to dst
// on the main device: in one piece when the rows hold the batch, else round by round.
func (c *Cache) helperResults(dst compute.Buf, helper [2][]entry, n, H int) {
	t0 := time.Now()
	for h, es := range helper {
		if len(es) == 0 {
			continue
		}
		d, out, devOut := c.cfg.Helpers[h], c.helperOut[h], c.helperDevOut[h]
		// The model checks the main device's errors; a helper's surface through the layer's.
		defer func() {
			if err := d.Err(); err != nil {
				c.err.Set(fmt.Errorf("experts: helper GPU %d: %w", h+1, err))
			}
		}()
		rows := c.helperRows[h]
		if rows == nil {
			if len(c.helperPlain) < n*H {
				c.helperPlain = make([]float32, n*H)
			}
			rows = c.helperPlain
		}
		if len(rows) >= n*H {
			d.Read(out, rows[:n*H])
			c.dev.Write(devOut, rows[:n*H])
			c.dev.Add(dst, devOut, n*H)
			continue
		}
		per := len(rows) / H // tokens a round brings back
		if c.helperRoundN[h] == 0 {
			c.helperRound[h], c.mainRound[h] = d.NewBuf(per*H), c.dev.NewBuf(per*H)
			c.helperRoundN[h] = per
		}
		for lo := 0; lo < n; lo += per {
			m := min(per, n-lo)
			d.Copy(c.helperRound[h], 0, out, lo*H, m*H)
			d.Read(c.helperRound[h], rows[:m*H])
			c.dev.Write(c.mainRound[h], rows[:m*H])
			c.dev.Copy(devOut, lo*H, c.mainRound[h], 0, m*H)
			// The main device copies out of the rows on its own time: it must be done
			// before the next round overwrites them.
			c.waitMain()
		}
		c.dev.Add(dst, devOut, n*H)
	}
	c.mu.Lock()
	c.stats.Helpers += time.Since(t0)
	c.stats.HelperResults += time.Since(t0)
	c.mu.Unlock()
}

// waitMain waits until the main device has run the work queued so far, where it can say so
// (a GPU: its copies out of pinned rows run later than they are queued; the CPU stand-in
// has done them already).
func (c *Cache) waitMain() {
	if w, ok := c.dev.(interface{ Synchronize() error }); ok {
		c.err.Set(w.Synchronize())
	}
}

// readX copies the layer's input (n tokens of H values) to the host for the misses.
func (c *Cache) readX(x compute.Buf, n, H int) {
	t0 := time.Now()
	nh := n * H
	if c.hostX == nil || c.hostX.Len() < nh {
		c.hostX, c.hostOut = c.host.NewBuf(nh), c.host.NewBuf(nh)
		c.devOut = c.dev.NewBuf(nh)
		c.hostXs = make([]float32, nh)
	}
	c.dev.Read(x, c.hostXs[:nh])
	wait := time.Since(t0)
	c.mu.Lock()
	c.addHost(n, func(h *HostTime) { h.WaitRoutes += wait })
	c.mu.Unlock()
}

// stream runs a batch's non-VRAM pairs on the device: their experts are copied into the
// ring (from pinned slots when they have one, else from the file), with their bias rows
// when the layer has biases, as many per round as it holds.
func (c *Cache) stream(L *layerCache, dst, x compute.Buf, es []entry, n int) {
	rg := c.rings[keyOf(L.file)]
	if rg == nil {
		c.err.Set(fmt.Errorf("experts: no streaming ring for %s", L.file[0].Name))
		return
	}
	order := expertsOf(es)
	t0 := time.Now()
	lapped, ok := c.streamLapped(L, rg, dst, x, es, order, n)
	for lo := 0; !ok && lo < len(order); lo += rg.n {
		round := order[lo:min(lo+rg.n, len(order))]
		src := c.srcOf(L, c.readCold(L, round))
		if err := c.ringRound(L, rg, dst, x, es, round, n, src); err != nil {
			c.err.Set(fmt.Errorf("experts: stream: %w", err))
			return
		}
	}
	c.mu.Lock()
	c.stats.Streamed += uint64(len(order))
	c.stats.Overlapped += uint64(lapped)
	c.stats.Uploads += time.Since(t0)
	c.mu.Unlock()
}

// expertsOf lists the experts of es, each once, in the order they first appear.
func expertsOf(es []entry) []int32 {
	var order []int32
	seen := map[int32]bool{}
	for _, e := range es {
		if !seen[e.expt] {
			seen[e.expt] = true
			order = append(order, e.expt)
		}
	}
	return order
}

// ringRound copies the round's experts (at most the ring's slots) into ring slots
// 0..len(round)-1 with WriteSlots, their matrices from src(matrix, expert) and their bias
// rows where the layer has biases, and runs es's pairs with those experts there (stream's
// plain rounds).
func (c *Cache) ringRound(L *layerCache, rg *ring, dst, x compute.Buf, es []entry, round []int32, n int,
	src func(m int, e int32) []byte) error {
	writes, sub := roundSlots(es, round, 0, src)
	for m := range 3 {
		if err := c.dev.WriteSlots(rg.st[m], writes[m]); err != nil {
			return err
		}
	}
	ffn := c.ringFFN(L, rg)
	if ffn != nil {
		if err := c.writeRingBias(L, rg, round, 0); err != nil {
			return err
		}
	}
	c.runOn(c.dev, dst, x, rg.st, ffn, sub, n)
	return nil
}

// roundSlots is the bookkeeping of one round on the ring, shared by ringRound and
// streamLapped's queueRound: ring slot base+j takes expert round[j], its matrices from
// src(matrix, expert), and sub is es's entries of those experts, each on its slot.
func roundSlots(es []entry, round []int32, base int, src func(m int, e int32) []byte) (writes [3][]compute.SlotWrite, sub []entry) {
	slotOf := make(map[int32]int32, len(round))
	for j, e := range round {
		slotOf[e] = int32(base + j)
		for m := range 3 {
			writes[m] = append(writes[m], compute.SlotWrite{Slot: base + j, Data: src(m, e)})
		}
	}
	for _, e := range es {
		if s, ok := slotOf[e.expt]; ok {
			e.id = s
			sub = append(sub, e)
		}
	}
	return writes, sub
}

// srcOf gives a ring write's source: the expert's matrix from cold (the cold reader's
// buffers of a round, may be nil) where it has the expert, else from its pinned slot or
// the file.
func (c *Cache) srcOf(L *layerCache, cold map[int32][3][]byte) func(m int, e int32) []byte {
	return func(m int, e int32) []byte {
		if b, ok := cold[e]; ok {
			return b[m]
		}
		return c.bytesOf(L, m, int(e))
	}
}

// readCold reads the round's cold experts with the cold reader (nil without one, or when it
// fails: the mapping serves them then, and the failure is counted).
func (c *Cache) readCold(L *layerCache, round []int32) map[int32][3][]byte {
	if c.cfg.Cold == nil {
		return nil
	}
	l := L.l
	var ids []ID
	for _, e := range round {
		if c.tier[c.sh.Index(ID{l, int(e)})] == TierCold {
			ids = append(ids, ID{l, int(e)})
		}
	}
	if len(ids) == 0 {
		return nil
	}
	parts, err := c.cfg.Cold.Read(ids)
	if err != nil {
		c.mu.Lock()
		c.stats.ColdReadErrors++
		c.mu.Unlock()
		return nil
	}
	out := make(map[int32][3][]byte, len(ids))
	for i, id := range ids {
		out[int32(id.Expert)] = parts[i]
	}
	c.mu.Lock()
	c.stats.ColdReads += uint64(len(ids))
	c.mu.Unlock()
	return out
}

// bytesOf is matrix m of expert e of a layer: its pinned copy when it has one, else the file.
func (c *Cache) bytesOf(L *layerCache, m, e int) []byte {
	if i := c.sh.Index(ID{L.l, e}); c.tier[i] == TierPinned {
		if w, ok := L.pinCPU[m].(*cpu.Weight); ok {
			return w.ExpertBytes(int(c.slot[i]))
		}
	}
	return L.matrix(m, e)
}

// VRAMChecksum reads every VRAM slot back and hashes the experts' matrices in (layer,
// expert) order, so two ways of filling the cache can be compared bit for bit.
func (c *Cache) VRAMChecksum() (string, error) {
	h := sha256.New()
	for l, L := range c.lays {
		for e := range c.sh.Experts {
			i := c.sh.Index(ID{l, e})
			if c.tier[i] != TierVRAM {
				continue
			}
			for m := range 3 {
				b, err := c.dev.ReadSlot(L.vram[m], int(c.slot[i]))
				if err != nil {
					return "", err
				}
				h.Write(b)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Snapshot is the cache's picture for the tier map.
type Snapshot struct {
	Tier  []Tier // [layer*Experts+expert]
	Stats CacheStats
}

// Snapshot copies the tiers and counters.
func (c *Cache) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.PCIeShare = c.pcieShare()
	st.Routed, st.Decode = maps.Clone(c.stats.Routed), maps.Clone(c.stats.Decode)
	return Snapshot{Tier: slices.Clone(c.tier), Stats: st}
}
