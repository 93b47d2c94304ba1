package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"strata/engine"
	"strata/engine/quant"
	"strata/platform"
)

// benchReport is `strata bench --json`.
type benchReport struct {
	Model        string  `json:"model"`
	Backend      string  `json:"backend"`
	Threads      int     `json:"threads"`
	LoadSeconds  float64 `json:"load_s"`
	ReadySeconds float64 `json:"ready_s"` // process start until the first token can be made
	// After the load until the model's pages were mapped in the background (CPU); the runs
	// start then, as a prompt typed after the load would.
	WarmSeconds  float64 `json:"warm_s"`
	PromptTokens int     `json:"prompt_tokens"`
	// PrefillBatch is the prompt tokens one forward pass took: --prefill's, or what auto
	// chose for the plan (larger while experts stream).
	PrefillBatch int     `json:"prefill_batch"`
	PrefillTPS   float64 `json:"prefill_tokens_per_s"`
	DecodeTokens int     `json:"decode_tokens"`
	DecodeTPS    float64 `json:"decode_tokens_per_s"`
	// With --repeat N > 1 the two rates above are medians, and every run's are here.
	PrefillRuns   []float64 `json:"prefill_tokens_per_s_runs,omitempty"`
	DecodeRuns    []float64 `json:"decode_tokens_per_s_runs,omitempty"`
	BytesPerToken int64     `json:"weight_bytes_read_per_token"`
	// The read bandwidth (decode only reads weights) around each run: the higher of the
	// samples just before and just after it. The one below is their median, the bound comes
	// from it, and the fraction is the median of each run's decode rate over its own bound.
	BandwidthRuns   []float64 `json:"memory_bandwidth_gb_s_runs,omitempty"`
	MemBandwidthGBs float64   `json:"memory_bandwidth_gb_s"`
	CopyGBs         float64   `json:"copy_bandwidth_gb_s"` // a parallel copy, read + written bytes (STREAM)
	BoundTPS        float64   `json:"bandwidth_bound_tokens_per_s"`
	FractionOfBound float64   `json:"fraction_of_bound"`
	PeakRSSBytes    int64     `json:"peak_rss_bytes"`
	// Start-up: bytes the process read from storage until ready, and the lowest available
	// RAM seen while it started.
	ReadyDiskReadBytes int64   `json:"ready_disk_read_bytes"`
	LowestAvailBytes   int64   `json:"lowest_available_ram_bytes"`
	ExpertHitRateCPU   float64 `json:"expert_hit_rate_cpu"`
	// Tiered experts only: the share of routed experts each tier served in decode steps,
	// and where the host's time went.
	DecodeHitRate map[string]float64 `json:"decode_hit_rate,omitempty"`
	Cache         *cacheReport       `json:"expert_cache,omitempty"`
	// StepTiming (STRATA_STEP_TIMING=1): where a decoded token's time went in the last run,
	// medians over its tokens in microseconds.
	StepTiming *stepTimingReport `json:"step_timing_us,omitempty"`
}

// stepTimingReport is the median of each part of engine.StepTiming over a run's tokens, in
// microseconds (counts as they are).
type stepTimingReport struct {
	Tokens   int     `json:"tokens"`
	Forward  float64 `json:"forward"`
	Sample   float64 `json:"sample"`
	Emit     float64 `json:"emit"`
	Record   float64 `json:"record"`
	Launch   float64 `json:"launch"`
	GPU      float64 `json:"gpu"`
	GPUSpan  float64 `json:"gpu_span"`
	Read     float64 `json:"read"`
	Segments float64 `json:"segments"`
	Graphs   float64 `json:"graphs"`
	Ops      float64 `json:"ops"`
}

// summariseSteps is the medians of steps' parts (nil for none).
func summariseSteps(steps []engine.StepTiming) *stepTimingReport {
	if len(steps) == 0 {
		return nil
	}
	med := func(f func(engine.StepTiming) float64) float64 {
		xs := make([]float64, len(steps))
		for i, st := range steps {
			xs[i] = f(st)
		}
		return median(xs)
	}
	us := func(f func(engine.StepTiming) time.Duration) float64 {
		return med(func(st engine.StepTiming) float64 { return float64(f(st)) / 1e3 })
	}
	return &stepTimingReport{
		Tokens:   len(steps),
		Forward:  us(func(st engine.StepTiming) time.Duration { return st.Forward }),
		Sample:   us(func(st engine.StepTiming) time.Duration { return st.Sample }),
		Emit:     us(func(st engine.StepTiming) time.Duration { return st.Emit }),
		Record:   us(func(st engine.StepTiming) time.Duration { return st.Record }),
		Launch:   us(func(st engine.StepTiming) time.Duration { return st.Launch }),
		GPU:      us(func(st engine.StepTiming) time.Duration { return st.GPU }),
		GPUSpan:  us(func(st engine.StepTiming) time.Duration { return st.GPUSpan }),
		Read:     us(func(st engine.StepTiming) time.Duration { return st.Read }),
		Segments: med(func(st engine.StepTiming) float64 { return float64(st.Segments) }),
		Graphs:   med(func(st engine.StepTiming) float64 { return float64(st.Graphs) }),
		Ops:      med(func(st engine.StepTiming) float64 { return float64(st.Ops) }),
	}
}

func runBench(ctx context.Context, args []string, io IO) error {
	fs := newFlags("bench", io)
	cfg := engine.DefaultConfig()
	modelPath := fs.String("m", "", "model GGUF file")
	promptN := fs.Int("prompt", 512, "prompt tokens for the prefill measurement")
	decodeN := fs.Int("decode", 128, "tokens to decode")
	repeat := fs.Int("repeat", 1, "generate this many times after one load, each in a new session, and report the median rates")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the generation to this file")
	// Sampling as the GUI or a server would ask for it (default greedy, as llama-bench's
	// decode, which samples nothing).
	temp := fs.Float64("temp", 0, "sampling temperature (0 = greedy)")
	topK := fs.Int("top-k", 0, "sample from the k most likely tokens (0 = off)")
	topP := fs.Float64("top-p", 0, "nucleus sampling threshold (0 = off)")
	minP := fs.Float64("min-p", 0, "minimum probability relative to the most likely token (0 = off)")
	repeatPenalty := fs.Float64("repeat-penalty", 0, "repetition penalty (0 or 1 = off)")
	addEngineFlags(fs, &cfg)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *modelPath == "" {
		return usagef("-m MODEL is required")
	}
	if *promptN < 1 || *decodeN < 2 {
		return usagef("--prompt must be >= 1 and --decode >= 2")
	}
	if *repeat < 1 {
		return usagef("--repeat must be >= 1")
	}
	if cfg.MaxContext == 0 {
		cfg.MaxContext = *promptN + *decodeN + 16
	}
	cfg.LearnProfile = false // random tokens would skew the profile the next runs start from
	t0 := time.Now()
	lowest := watchAvailableRAM(ctx)
	m, err := engine.Open(ctx, *modelPath, cfg, nil)
	low := lowest()
	if err != nil {
		return err
	}
	defer m.Close()
	rep := benchReport{Model: *modelPath, Backend: m.Backend(), Threads: m.Config().Threads, PrefillBatch: m.Config().Prefill}
	rep.LoadSeconds = time.Since(t0).Seconds()
	rep.ReadySeconds = time.Since(io.start()).Seconds()
	rep.ReadyDiskReadBytes, rep.LowestAvailBytes = diskReadBytes(), low
	info := m.Info()
	warmStart := time.Now()
	select {
	case <-m.Warmed():
	default:
		// From a cold disk this reads the whole file: say why nothing happens meanwhile.
		fmt.Fprintln(io.Err, "waiting for the model's pages to be mapped (the runs start after it, as a prompt typed after a load would)")
		select {
		case <-m.Warmed():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	rep.WarmSeconds = time.Since(warmStart).Seconds()

	rng := rand.New(rand.NewPCG(1, 2))
	prompt := make([]int, *promptN)
	for i := range prompt {
		prompt[i] = rng.IntN(info.Vocab)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// The read bandwidth is sampled before the first run and after each: a VM's memory
	// bandwidth drifts by half within minutes, and a bound measured once, away from the runs,
	// put some runs above it.
	meter := newBandwidthMeter(m.Config().Threads)
	bwSamples := []float64{meter.read()}
	for run := range *repeat {
		if *repeat > 1 && !*asJSON {
			fmt.Fprintf(io.Err, "run %d of %d\n", run+1, *repeat)
		}
		s := m.NewSession(engine.SessionOptions{})
		sp := engine.Sampling{MaxTokens: *decodeN, IgnoreEOS: true, Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP),
			MinP: float32(*minP), RepeatPenalty: float32(*repeatPenalty), Seed: 1}
		res, err := s.Generate(ctx, prompt, sp, nil)
		if err != nil {
			return fmt.Errorf("bench run %d of %d: %w", run+1, *repeat, err)
		}
		rep.PromptTokens = res.Timings.PromptTokens
		rep.DecodeTokens = res.Timings.GeneratedTokens
		rep.PrefillRuns = append(rep.PrefillRuns, res.Timings.PrefillTokensPerSec())
		rep.DecodeRuns = append(rep.DecodeRuns, res.Timings.DecodeTokensPerSec())
		rep.StepTiming = summariseSteps(res.Steps)
		bwSamples = append(bwSamples, meter.read())
	}
	rep.PrefillTPS, rep.DecodeTPS = median(rep.PrefillRuns), median(rep.DecodeRuns)
	rep.BandwidthRuns = bandwidthPerRun(bwSamples)
	rep.MemBandwidthGBs = median(rep.BandwidthRuns)
	rep.CopyGBs = meter.copied()
	rep.BytesPerToken = info.DecodeBytesPerToken
	if rep.BytesPerToken > 0 {
		rep.BoundTPS = rep.MemBandwidthGBs * 1e9 / float64(rep.BytesPerToken)
		rep.FractionOfBound = fractionOfBound(rep.DecodeRuns, rep.BandwidthRuns, rep.BytesPerToken)
	}
	if *repeat == 1 {
		rep.PrefillRuns, rep.DecodeRuns, rep.BandwidthRuns = nil, nil, nil
	}
	rep.PeakRSSBytes = peakRSS()
	tiers := m.Tiers()
	var hits uint64
	for _, h := range tiers.HitsPerTier {
		hits += h
	}
	if hits > 0 {
		rep.ExpertHitRateCPU = float64(tiers.HitsPerTier[engine.TierCPU]) / float64(hits)
	}
	rep.DecodeHitRate = shares(tiers.DecodeHitsPerTier)
	if c := tiers.Cache; c != nil {
		rep.Cache = &cacheReport{
			VRAMSlots: c.VRAMSlots, PinnedSlots: c.PinnedSlots, Swaps: tiers.Swaps,
			PCIeReads: c.PCIeReads, PCIeShare: c.PCIeShare, Streamed: c.Streamed, Overlapped: c.OverlappedRounds, ColdReads: c.ColdReads,
			FillGB: float64(c.FillBytes) / 1e9, FillSeconds: c.FillTime.Seconds(),
			WaitRoutesSeconds: c.WaitRoutes.Seconds(), CPUMissSeconds: c.CPUMisses.Seconds(), UploadSeconds: c.Uploads.Seconds(),
			DecodeHost:  decodeHostOf(c),
			HelperSlots: c.HelperSlots[:], HelperHits: tiers.HitsPerTier[engine.TierHelper], HelperSeconds: c.Helpers.Seconds(), HelperResultSeconds: c.HelperResults.Seconds(),
			ArenaGB: float64(c.ArenaBytes) / 1e9, ArenaSeconds: c.ArenaFill.Seconds(),
			ArenaUnbuffered: c.ArenaUnbuffered, ArenaLocked: c.ArenaLocked, ArenaFromPack: c.ArenaFromPack,
			ArenaUnmapped: c.ArenaUnmapped, ArenaNotPinned: c.ArenaNotPinned,
			PinnedBudgetMiB: float64(c.PinnedBudget) / (1 << 20), PinnedUsedMiB: float64(c.PinnedUsed) / (1 << 20),
			Notes: c.Notes, Verify: c.Verify,
		}
	}
	if *asJSON {
		return json.NewEncoder(io.Out).Encode(rep)
	}
	fmt.Fprintf(io.Out, "model     %s (%s, %d threads)\n", rep.Model, rep.Backend, rep.Threads)
	fmt.Fprintf(io.Out, "load      %.2f s (ready %.2f s after start; pages mapped %.2f s later)\n", rep.LoadSeconds, rep.ReadySeconds, rep.WarmSeconds)
	fmt.Fprintf(io.Out, "prefill   %d tokens at %.1f tok/s (batches of %d)\n", rep.PromptTokens, rep.PrefillTPS, rep.PrefillBatch)
	if len(rep.PrefillRuns) > 1 {
		fmt.Fprintf(io.Out, "runs      %d (the rates shown are their medians): prefill %s tok/s; decode %s tok/s; read %s GB/s\n",
			len(rep.PrefillRuns), formatRates(rep.PrefillRuns), formatRates(rep.DecodeRuns), formatRates(rep.BandwidthRuns))
	}
	fmt.Fprintf(io.Out, "decode    %d tokens at %.2f tok/s (bound %.2f tok/s = %.1f GB/s read / %.1f MB per token: runs at %.0f%% of their bounds; a copy moves %.1f GB/s)\n",
		rep.DecodeTokens, rep.DecodeTPS, rep.BoundTPS, rep.MemBandwidthGBs, float64(rep.BytesPerToken)/1e6, 100*rep.FractionOfBound, rep.CopyGBs)
	fmt.Fprintf(io.Out, "peak RSS  %.2f GiB; %.2f GB read from disk until ready; lowest available RAM while starting %.2f GiB\n",
		float64(rep.PeakRSSBytes)/(1<<30), float64(rep.ReadyDiskReadBytes)/1e9, float64(rep.LowestAvailBytes)/(1<<30))
	if st := rep.StepTiming; st != nil {
		fmt.Fprintf(io.Out, "step      medians over %d tokens (µs): forward %.0f (record %.0f, launch %.0f, read %.0f; device %.0f, span %.0f), sample %.0f, emit %.0f; %.0f segments, %.0f graphs, %.0f ops\n",
			st.Tokens, st.Forward, st.Record, st.Launch, st.Read, st.GPU, st.GPUSpan, st.Sample, st.Emit, st.Segments, st.Graphs, st.Ops)
	}
	if c := rep.Cache; c != nil {
		fmt.Fprintf(io.Out, "experts   %d VRAM slots, %d pinned; decode hit rate %v; %d swaps, %d PCIe reads (share now %.2f), %d streamed\n",
			c.VRAMSlots, c.PinnedSlots, rep.DecodeHitRate, c.Swaps, c.PCIeReads, c.PCIeShare, c.Streamed)
		fmt.Fprintf(io.Out, "host time waiting for routes %.2f s, CPU misses %.2f s, uploads %.2f s; fill %.2f GB in %.2f s\n",
			c.WaitRoutesSeconds, c.CPUMissSeconds, c.UploadSeconds, c.FillGB, c.FillSeconds)
		if d := c.DecodeHost; d != nil {
			fmt.Fprintf(io.Out, "a decode token's host time (µs, over %d): waiting for routes %.0f, CPU misses %.0f, uploads %.0f; late misses: routes to start %.0f, done to next routes %.0f\n",
				d.Tokens, d.WaitRoutes, d.CPUMisses, d.Uploads, d.MissesLag, d.AfterMisses)
		}
		if c.ArenaGB > 0 {
			fmt.Fprintf(io.Out, "RAM arena %.2f GB in %.2f s (unbuffered %v, before the file was mapped %v, page-locked %v, from experts.bin %v)\n",
				c.ArenaGB, c.ArenaSeconds, c.ArenaUnbuffered, c.ArenaUnmapped, c.ArenaLocked, c.ArenaFromPack)
		}
		if c.ArenaNotPinned != "" {
			fmt.Fprintf(io.Out, "pinned    not pinned: %s\n", c.ArenaNotPinned)
		}
		for _, n := range c.Notes {
			fmt.Fprintf(io.Out, "note      %s\n", n)
		}
		for _, v := range c.Verify {
			fmt.Fprintf(io.Out, "verify    %s\n", v)
		}
	}
	return nil
}

// median is the middle value of xs (the mean of the two middle ones for an even count);
// 0 for none. xs is not changed.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// formatRates lists rates with one decimal, space-separated.
func formatRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strings.Join(parts, " ")
}

// decodeHostReport is the expert cache's host time per decode token, in microseconds:
// what the prompts' batches spend (streaming, mostly) is left out.
type decodeHostReport struct {
	Tokens     uint64  `json:"tokens"`
	WaitRoutes float64 `json:"wait_routes"`
	CPUMisses  float64 `json:"cpu_misses"`
	Uploads    float64 `json:"uploads"`
	// With late misses: routes on the host to misses started, misses done to the next
	// layer's routes on the host (the device's chain between two layers' misses).
	MissesLag   float64 `json:"misses_lag"`
	AfterMisses float64 `json:"after_misses"`
}

// decodeHostOf is c's host time per decode token (nil with no decode step).
func decodeHostOf(c *engine.CacheActivity) *decodeHostReport {
	if c.DecodeTokens == 0 {
		return nil
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(c.DecodeTokens) }
	return &decodeHostReport{Tokens: c.DecodeTokens, WaitRoutes: per(c.DecodeWaitRoutes), CPUMisses: per(c.DecodeCPUMisses), Uploads: per(c.DecodeUploads),
		MissesLag: per(c.DecodeMissesLag), AfterMisses: per(c.DecodeAfterMisses)}
}

// cacheReport is the expert cache's part of the bench report.
type cacheReport struct {
	VRAMSlots         int     `json:"vram_slots"`
	PinnedSlots       int     `json:"pinned_slots"`
	Swaps             uint64  `json:"swaps"`
	PCIeReads         uint64  `json:"pcie_reads"`
	PCIeShare         float64 `json:"pcie_share"`
	Streamed          uint64  `json:"streamed_experts"`
	Overlapped        uint64  `json:"overlapped_rounds"` // rounds of streamed experts copied beside the kernels (upload_s then counts queueing only)
	ColdReads         uint64  `json:"cold_unbuffered_reads"`
	FillGB            float64 `json:"fill_gb"`
	FillSeconds       float64 `json:"fill_s"`
	WaitRoutesSeconds float64 `json:"wait_routes_s"`
	CPUMissSeconds    float64 `json:"cpu_miss_s"`
	UploadSeconds     float64 `json:"upload_s"`
	// DecodeHost is a decode token's share of the three (nil before any decode step).
	DecodeHost    *decodeHostReport `json:"decode_host_us_per_token,omitempty"`
	HelperSlots   []int             `json:"helper_slots"` // helper GPUs 1 and 2
	HelperHits    uint64            `json:"helper_hits"`  // routed pairs the helpers computed
	HelperSeconds float64           `json:"helper_s"`     // host time sending them inputs and bringing results back
	// HelperResultSeconds is the part of HelperSeconds spent waiting for the helpers' results
	// and bringing them back to the main GPU.
	HelperResultSeconds float64 `json:"helper_results_s"`
	ArenaGB             float64 `json:"arena_gb"`
	ArenaSeconds        float64 `json:"arena_fill_s"`
	ArenaUnbuffered     bool    `json:"arena_unbuffered"`
	ArenaLocked         bool    `json:"arena_locked"`
	ArenaFromPack       bool    `json:"arena_from_pack"`
	ArenaUnmapped       bool    `json:"arena_filled_unmapped"`
	// ArenaNotPinned: "not pinned: why" when the pinned budget could not hold the arena.
	ArenaNotPinned  string   `json:"arena_not_pinned,omitempty"`
	PinnedBudgetMiB float64  `json:"pinned_budget_mib,omitempty"` // 0: no cap
	PinnedUsedMiB   float64  `json:"pinned_used_mib"`
	Notes           []string `json:"notes,omitempty"`
	Verify          []string `json:"verify,omitempty"`
}

// watchAvailableRAM samples the available RAM every 20 ms until the returned function is
// called, which gives the lowest value seen (0 when the platform does not say).
func watchAvailableRAM(ctx context.Context) func() int64 {
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		var low int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if a := platform.ProbeMemory(ctx).AvailableBytes; a > 0 && (low == 0 || a < low) {
				low = a
			}
			select {
			case <-done:
				result <- low
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-result
	}
}

// shares turns counts per tier into fractions keyed by tier name (nil when empty).
func shares(counts map[engine.Tier]uint64) map[string]float64 {
	var total uint64
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return nil
	}
	out := map[string]float64{}
	for t, n := range counts {
		out[t.String()] = float64(n) / float64(total)
	}
	return out
}

// bandwidthPerRun is each run's read bandwidth from the samples taken before the first run
// and after each (len(runs)+1 of them): the higher of the two around it, since a bound
// should not be taken in a dip.
func bandwidthPerRun(samples []float64) []float64 {
	var runs []float64
	for i := 1; i < len(samples); i++ {
		runs = append(runs, max(samples[i-1], samples[i]))
	}
	return runs
}

// fractionOfBound is the median over runs of the decode rate over that run's bound
// (bandwidth / bytes read per token).
func fractionOfBound(decode, bandwidthGBs []float64, bytesPerToken int64) float64 {
	var fr []float64
	for i := range min(len(decode), len(bandwidthGBs)) {
		if bandwidthGBs[i] > 0 {
			fr = append(fr, decode[i]*float64(bytesPerToken)/(bandwidthGBs[i]*1e9))
		}
	}
	return median(fr)
}

// bandwidthMeter measures memory bandwidth with threads goroutines over 256 MiB (far more
// than any cache), best of three passes.
type bandwidthMeter struct {
	threads  int
	src, dst []byte
	sums     []uint64
}

const meterBytes = 256 << 20

func newBandwidthMeter(threads int) *bandwidthMeter {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	src := make([]byte, meterBytes)
	for i := range src {
		src[i] = byte(i)
	}
	return &bandwidthMeter{threads: threads, src: src, sums: make([]uint64, threads)}
}

// read is the read bandwidth in GB/s with vector loads, as the kernels read weights: the
// bound for decode.
func (b *bandwidthMeter) read() float64 {
	return b.best(meterBytes, func(t, lo, hi int) { b.sums[t] = quant.ReadSum(b.src[lo:hi]) })
}

// copied is a parallel copy's bandwidth in GB/s, read + written bytes (STREAM's convention,
// for comparison with other tools).
func (b *bandwidthMeter) copied() float64 {
	if b.dst == nil {
		b.dst = make([]byte, meterBytes)
	}
	return b.best(2*meterBytes, func(_, lo, hi int) { copy(b.dst[lo:hi], b.src[lo:hi]) })
}

// best runs part over the buffer split between the threads three times and returns the
// best rate, counting bytesPerRun bytes a pass.
func (b *bandwidthMeter) best(bytesPerRun float64, part func(t, lo, hi int)) float64 {
	top := 0.0
	chunk := meterBytes / b.threads
	for range 3 {
		start := time.Now()
		var wg sync.WaitGroup
		for t := range b.threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				part(t, t*chunk, min((t+1)*chunk, meterBytes))
			}()
		}
		wg.Wait()
		top = max(top, bytesPerRun/time.Since(start).Seconds()/1e9)
	}
	runtime.KeepAlive(b.sums)
	return top
}
