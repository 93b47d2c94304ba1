package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/compute/gpu"
	"strata/engine/gguf"
	"strata/engine/kv"
	"strata/engine/model"
	"strata/engine/sample"
	"strata/platform"
)

// Model is an opened GGUF model with its weights placed on the backends. One Session
// generates at a time; Info and Tiers may be called from any goroutine.
type Model struct {
	info    ModelInfo
	cfg     Config
	file    *gguf.File
	place   *placement // the backends and, when tiered, the expert cache and its plan
	backend compute.Backend
	net     *model.Model
	text    *textCodec
	stats   *routeStats
	// timeSteps records where each decoded token's time goes (STRATA_STEP_TIMING=1).
	timeSteps bool

	mu      sync.Mutex   // one forward pass at a time; guards the two fields below
	kvState *model.State // the one KV cache, allocated on first use
	kvOwner *Session     // the session whose tokens it holds
}

// Open reads and checks the model file's header, places the weights and returns when the
// first token can be generated. The file is mapped as soon as placement knows it will not
// first fill the resident RAM arena from it; that fill reads around the page cache while the
// file is not mapped, and the file is mapped after it. onProgress (may be nil) is called from
// the loading goroutine.
func Open(ctx context.Context, path string, cfg Config, onProgress func(Progress)) (*Model, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	report := func(p Progress) {
		if onProgress != nil {
			onProgress(p)
		}
	}
	report(Progress{Phase: "mapping"})
	f, err := gguf.OpenUnmapped(path)
	if err != nil {
		return nil, err
	}
	m, err := open(ctx, f, cfg, report)
	if err != nil {
		f.Close()
		return nil, err
	}
	report(Progress{Phase: "ready", Done: 1, Total: 1})
	return m, nil
}

func open(ctx context.Context, f *gguf.File, cfg Config, report func(Progress)) (*Model, error) {
	info, err := describe(f)
	if err != nil {
		return nil, err
	}
	if err := checkContextLimit(cfg, info); err != nil {
		return nil, err
	}
	pl, err := place(ctx, f, cfg, info, report)
	if err != nil {
		return nil, err
	}
	return openPlaced(ctx, f, cfg, info, pl)
}

// openPlaced finishes open once the weights are placed (tests place them on a stand-in
// device); it closes pl on failure.
func openPlaced(ctx context.Context, f *gguf.File, cfg Config, info ModelInfo, pl *placement) (*Model, error) {
	b, net := pl.backend, pl.net
	if err := ctx.Err(); err != nil {
		pl.close()
		return nil, err
	}
	text, err := newTextCodec(f)
	if err != nil {
		pl.close()
		return nil, err
	}
	if cfg.Threads == 0 {
		if c, ok := b.(*cpu.Backend); ok {
			cfg.Threads = c.Threads()
		}
	}
	if cfg.Prefill <= 0 {
		cfg.Prefill = defaultPrefill
		if pl.batch > 0 { // what the plan's activations were sized for
			cfg.Prefill = pl.batch
		}
	}
	if g, ok := b.(*gpu.Backend); ok {
		// The backend's scratch for the largest batch, now: it would grow on the first
		// prompts, leaving the smaller buffers allocated beside the larger.
		if err := g.Reserve(batchSpec(f, net.H, cfg.Prefill)); err != nil {
			pl.close()
			return nil, fmt.Errorf("engine: --prefill %d: %w", cfg.Prefill, err)
		}
	}
	if cfg.MaxContext == 0 {
		// Sliding-window layers cost their ring whatever the context, a recurrent layer its
		// state; the rest grow with it.
		fixed := kvBytes(info, info.RingKeep, kvType(cfg)) + info.RecurrentBytes
		full := net.H.Layers - info.RingLayers - info.RecurrentLayers
		cfg.MaxContext, err = kv.ContextFor(0, max(info.ContextLimit, 1), max(full, 1), net.H.KVHeads, net.H.HeadDim, kvType(cfg), max(kvBudget(ctx, b, cfg, sessionActivationBytes(net.H, cfg.Prefill))-fixed, 1))
		if err != nil {
			pl.close()
			return nil, err
		}
	} else if err := checkContextFits(cfg, info, explicitKVBudget(ctx, b, cfg, info, sessionActivationBytes(net.H, cfg.Prefill))); err != nil {
		pl.close()
		return nil, err
	}
	slog.Info("engine: model open", "path", f.Path, "arch", info.Architecture, "backend", b.Name(), "context", cfg.MaxContext)
	return &Model{info: info, cfg: cfg, file: f, place: pl, backend: b, net: net, text: text, stats: newRouteStats(net.H.Layers, net.H.Experts),
		timeSteps: os.Getenv("STRATA_STEP_TIMING") == "1"}, nil
}

// kvBytes is the KV cache of ctx positions: every full-attention layer holds them all, a
// sliding-window layer at most its ring, a recurrent layer none.
func kvBytes(info ModelInfo, ctx int, t kv.Type) int64 {
	full := info.Layers - info.RingLayers - info.RecurrentLayers
	return kv.Bytes(full, info.KVHeads, info.HeadDim, ctx, t) + kv.Bytes(info.RingLayers, info.KVHeads, info.HeadDim, min(ctx, info.RingKeep), t)
}

// kvType is the cache format the config asks for; the float reference path keeps float32
// unless --kv int8 asks for int8 (which it then honours, to measure int8 alone).
func kvType(cfg Config) kv.Type {
	t, err := kv.ParseType(cfg.KVType)
	if err != nil {
		return kv.F16
	}
	if cfg.FloatPath && t != kv.Int8 {
		return kv.F32
	}
	return t
}

// kvBudget is the memory the default context's KV cache may take: on a GPU, what is free
// after the weights and the backend's scratch, less the reserve and the session's
// activations (act); on the CPU, a quarter of the available RAM.
func kvBudget(ctx context.Context, b compute.Backend, cfg Config, act int64) int64 {
	if g, ok := b.(*gpu.Backend); ok {
		free := g.FreeBytes() - int64(cfg.VRAMReserveMiB)<<20 - act
		if cfg.VRAMBudgetMiB > 0 {
			free = min(free, int64(cfg.VRAMBudgetMiB)<<20-g.UsedBytes()-act)
		}
		return max(free, 1)
	}
	if avail := platform.ProbeMemory(ctx).AvailableBytes; avail > 0 {
		return avail / 4
	}
	return 4 << 30
}

// explicitKVBudget is what a context the user asked for (--max-context) may take: on a GPU
// the same as kvBudget, on the CPU the available RAM less the non-expert weights (their
// mapped pages count as available, but they are read every token) and the session's
// activations (act), as the plan counts it (a quarter of it is only the default's share).
func explicitKVBudget(ctx context.Context, b compute.Backend, cfg Config, info ModelInfo, act int64) int64 {
	if _, ok := b.(*gpu.Backend); ok {
		return kvBudget(ctx, b, cfg, act)
	}
	if avail := platform.ProbeMemory(ctx).AvailableBytes; avail > 0 {
		return max(avail-info.NonExpertBytes-act, 1)
	}
	return 0 // not known: not checked
}

// Close releases the model's memory and files.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	if m.place.cache != nil && m.cfg.LearnProfile {
		errs = append(errs, m.saveLearnedProfile())
	}
	errs = append(errs, m.place.close(), m.file.Close())
	return errors.Join(errs...)
}

// Warmed is closed once the model file's pages are mapped into the process: after a CPU
// load that happens in the background, so the first prompt takes no page faults. It is
// closed at once when nothing is being mapped.
func (m *Model) Warmed() <-chan struct{} {
	if m.place.warm != nil {
		return m.place.warm.done
	}
	c := make(chan struct{})
	close(c)
	return c
}

// Info describes the model.
func (m *Model) Info() ModelInfo { return m.info }

// Config is the configuration the model was opened with, with automatic values resolved.
func (m *Model) Config() Config { return m.cfg }

// Backend names the compute backend, e.g. "cpu (avx2)".
func (m *Model) Backend() string { return m.backend.Name() }

// Session is one conversation: the tokens its KV cache holds. The model has one KV cache
// (a full context of it can take gigabytes of VRAM or RAM); the session that generates takes
// it, and a session whose cache was taken by another one re-reads its prompt next time.
type Session struct {
	m      *Model
	opts   SessionOptions
	state  *model.State // the model's cache while this session owns it, else nil
	tokens []int        // what the cache holds for this session, position by position
}

// NewSession starts an empty conversation. It takes the KV cache on first use.
func (m *Model) NewSession(opts SessionOptions) *Session { return &Session{m: m, opts: opts} }

// acquireState gives s the model's KV cache, allocating it once. Callers hold m.mu.
func (s *Session) acquireState() error {
	m := s.m
	if m.kvOwner == s && s.state != nil {
		return nil
	}
	if m.kvState == nil {
		st, err := m.net.NewState(m.cfg.MaxContext, string(kvType(m.cfg)))
		if err != nil {
			return fmt.Errorf("engine: kv cache of %d tokens: %w", m.cfg.MaxContext, err)
		}
		// The scratch of a full prefill batch now, so it never grows (the plan counted it
		// once).
		m.net.ReserveScratch(st, m.cfg.Prefill)
		m.kvState = st
	}
	if prev := m.kvOwner; prev != nil && prev != s {
		prev.state, prev.tokens = nil, nil
	}
	m.kvState.Rewind(0)
	s.state, s.tokens, m.kvOwner = m.kvState, s.tokens[:0], s
	return nil
}

// prefillBatch is the prompt chunk size per forward pass.
func (s *Session) prefillBatch() int { return prefillBatchOf(s.m.cfg) }

// Eval runs tokens from an empty cache and hands the logits of every position to fn.
func (s *Session) Eval(ctx context.Context, tokens []int, fn func(pos int, logits []float32)) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if err := s.acquireState(); err != nil {
		return err
	}
	if err := checkPromptFits(len(tokens), s.state.Capacity(), false); err != nil {
		return err
	}
	s.state.Rewind(0)
	s.tokens = s.tokens[:0]
	V := s.m.net.H.Vocab
	batch := s.prefillBatch()
	logits := make([]float32, batch*V)
	for i := 0; i < len(tokens); i += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := tokens[i:min(i+batch, len(tokens))]
		if err := s.m.net.Forward(s.state, chunk, true, logits, s.m.stats); err != nil {
			return fmt.Errorf("engine: eval: %w", err)
		}
		s.tokens = append(s.tokens, chunk...)
		for j := range chunk {
			fn(i+j, logits[j*V:(j+1)*V])
		}
	}
	return nil
}

// Generate continues raw prompt tokens (reusing the cached prefix it shares with the last
// call) and streams what it generates.
func (s *Session) Generate(ctx context.Context, prompt []int, sp Sampling, onToken func(Token)) (Result, error) {
	return s.generate(ctx, prompt, sp, onToken, nil)
}

// generate is the decode loop shared by Generate and Chat. split (may be nil) separates
// reasoning from the answer in the streamed text.
func (s *Session) generate(ctx context.Context, prompt []int, sp Sampling, onToken func(Token), split *reasoningFilter) (Result, error) {
	if len(prompt) == 0 {
		return Result{}, errors.New("engine: empty prompt")
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if err := s.acquireState(); err != nil {
		return Result{}, err
	}
	capacity := s.state.Capacity()
	if err := checkPromptFits(len(prompt), capacity, true); err != nil {
		return Result{}, err
	}
	// Reuse the cached prefix; always recompute at least the last prompt token for its logits.
	// A recurrent state goes back only to a checkpoint, and a sliding-window ring only as far
	// as it holds the window, which may keep less (model.State.Rewind).
	keep := commonPrefix(s.tokens, prompt)
	keep = s.state.Rewind(min(keep, len(prompt)-1))
	s.tokens = s.tokens[:keep]

	V := s.m.net.H.Vocab
	smp := sample.New(sample.Params{
		Temperature: sp.Temperature, TopK: sp.TopK, TopP: sp.TopP, MinP: sp.MinP,
		RepeatPenalty: sp.RepeatPenalty, RepeatLastN: sp.RepeatLastN, Seed: sp.Seed,
	})
	for _, t := range prompt {
		smp.Accept(t)
	}
	var res Result
	res.Timings.PromptTokens = len(prompt) - keep
	res.Timings.CachedTokens = keep
	logits := make([]float32, V)
	start := time.Now()
	batch := s.prefillBatch()
	// A recurrent state is checkpointed before the prompt's last token, the point a
	// regenerated reply or the next turn rewinds to: the prefill stops there once.
	mark := -1
	if s.state.Recurrent() {
		mark = len(prompt) - 1
	}
	for i := keep; i < len(prompt); {
		if err := ctx.Err(); err != nil {
			res.Stop = StopCancelled
			return res, nil
		}
		end := min(i+batch, len(prompt))
		if i < mark && end > mark {
			end = mark
		}
		if i == mark {
			s.state.Checkpoint()
		}
		chunk := prompt[i:end]
		if err := s.m.net.Forward(s.state, chunk, false, logits, s.m.stats); err != nil {
			return res, fmt.Errorf("engine: prefill: %w", err)
		}
		s.tokens = append(s.tokens, chunk...)
		i = end
	}
	res.Timings.Prefill = time.Since(start)

	stream := s.m.text.newStream()
	var answer, thinking strings.Builder
	emit := func(id int, text string) {
		for _, part := range split.feed(text) {
			if part.thinking {
				thinking.WriteString(part.text)
			} else {
				answer.WriteString(part.text)
			}
			if onToken != nil && part.text != "" {
				onToken(Token{ID: id, Text: part.text, Thinking: part.thinking})
			}
		}
	}
	// Greedy without a penalty is the logits' argmax, which the backend may find where the
	// logits are: the passes after the first then return the next token instead of logits.
	argmaxOnDevice := sp.Temperature <= 0 && (sp.RepeatPenalty <= 0 || sp.RepeatPenalty == 1) && s.m.net.CanArgmax()
	next := -1 // the token the last pass chose, or -1 to sample from logits
	decodeStart := time.Now()
	var step StepTiming
	timer := s.m.stepTimer()
	for {
		t0 := time.Now()
		id := next
		if id < 0 {
			id = smp.Sample(logits)
		}
		step.Sample = time.Since(t0)
		if !sp.IgnoreEOS && s.m.text.isEnd(id) {
			res.Stop = StopEndOfTurn
			break
		}
		res.Tokens = append(res.Tokens, id)
		smp.Accept(id)
		if n := len(res.Tokens); n >= 2 { // the tier map's rate is live while an answer is written
			s.m.stats.setSpeed(float64(n-1) / time.Since(decodeStart).Seconds())
		}
		emit(id, stream.add(id))
		if sp.MaxTokens > 0 && len(res.Tokens) >= sp.MaxTokens {
			res.Stop = StopMaxTokens
			break
		}
		if s.state.Pos() >= capacity {
			res.Stop = StopContext
			break
		}
		if ctx.Err() != nil {
			res.Stop = StopCancelled
			break
		}
		t1 := time.Now()
		step.Emit = t1.Sub(t0) - step.Sample
		var err error
		if argmaxOnDevice {
			next, err = s.m.net.ForwardArgmax(s.state, id, s.m.stats)
		} else {
			err = s.m.net.Forward(s.state, []int{id}, false, logits, s.m.stats)
		}
		if err != nil {
			return res, fmt.Errorf("engine: decode: %w", err)
		}
		s.tokens = append(s.tokens, id)
		if timer != nil {
			step.Forward = time.Since(t1)
			res.Steps = append(res.Steps, timer(step))
		}
	}
	s.state.Checkpoint() // where the next turn continues from
	emit(-1, stream.flush())
	for _, part := range split.flush() {
		if part.thinking {
			thinking.WriteString(part.text)
		} else {
			answer.WriteString(part.text)
		}
		if onToken != nil && part.text != "" {
			onToken(Token{ID: -1, Text: part.text, Thinking: part.thinking})
		}
	}
	res.Timings.GeneratedTokens = len(res.Tokens)
	res.Timings.Decode = time.Since(decodeStart)
	res.Text, res.Thinking = answer.String(), thinking.String()
	s.m.stats.setSpeed(res.Timings.DecodeTokensPerSec())
	return res, nil
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// stepTimer returns what completes a decoded token's StepTiming with the backend's records
// of its forward pass, or nil when steps are not timed.
func (m *Model) stepTimer() func(StepTiming) StepTiming {
	if !m.timeSteps {
		return nil
	}
	g, _ := m.backend.(*gpu.Backend)
	if g != nil {
		g.StepTimings() // drop the prefill's
	}
	return func(st StepTiming) StepTiming {
		if g == nil {
			return st
		}
		for _, r := range g.StepTimings() {
			st.Record += r.Record
			st.Launch += r.Launch
			st.GPU += r.GPU
			st.GPUSpan += r.GPUSpan
			st.Read += r.Read
			st.Segments += r.Segments
			st.Graphs += r.Graphs
			st.Ops += r.Ops
		}
		return st
	}
}
