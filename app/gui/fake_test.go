package gui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"strata/engine"
)

// fakeEngine stands in for the engine in controller and GUI tests that must not depend on
// a working forward pass: it streams numbered tokens until cancelled or MaxTokens.
type fakeEngine struct {
	tokenDelay time.Duration
	stepDelay  time.Duration // between Open's progress reports
	openErr    error
	opened     int
	mu         sync.Mutex
}

func (f *fakeEngine) Inspect(ctx context.Context, path string) (engine.ModelInfo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return engine.ModelInfo{}, err
	}
	if !strings.HasPrefix(string(data), "GGUF") {
		return engine.ModelInfo{}, fmt.Errorf("gguf: %s: bad magic: %w", path, engine.ErrNotGGUF)
	}
	return engine.ModelInfo{Path: path, Name: "fake-moe", Architecture: "qwen3moe", FileBytes: int64(len(data)),
		Quantization: "Q8_0", TotalParams: 1e9, ActiveParams: 1e8, Layers: 2, Experts: 4, ExpertsUsed: 2,
		ExpertBytes: 800, NonExpertBytes: 200}, nil
}

func (f *fakeEngine) Open(ctx context.Context, path string, cfg engine.Config, onProgress func(engine.Progress)) (Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if f.openErr != nil {
		return nil, f.openErr
	}
	info, err := f.Inspect(ctx, path)
	if err != nil {
		return nil, err
	}
	for i := int64(0); i <= 4; i++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		onProgress(engine.Progress{Phase: "mapping", Done: i * 25, Total: 100})
		time.Sleep(time.Millisecond + f.stepDelay)
	}
	f.mu.Lock()
	f.opened++
	f.mu.Unlock()
	return &fakeModel{info: info, cfg: cfg, delay: f.tokenDelay}, nil
}

type fakeModel struct {
	info   engine.ModelInfo
	cfg    engine.Config
	delay  time.Duration
	mu     sync.Mutex
	hits   uint64
	closed bool
	opts   engine.SessionOptions // of the last NewSession
}

func (m *fakeModel) Info() engine.ModelInfo { return m.info }
func (m *fakeModel) Config() engine.Config  { return m.cfg }
func (m *fakeModel) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("closed twice")
	}
	m.closed = true
	return nil
}

func (m *fakeModel) Tiers() engine.TierSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := engine.TierSnapshot{Layers: 2, Experts: 4, TokensPerSec: 42,
		Tier:         [][]engine.Tier{{0, 2, 3, 3}, {0, 0, 2, 3}},
		Hits:         [][]uint64{{m.hits, 1, 0, 0}, {m.hits / 2, 3, 1, 0}},
		BytesPerTier: map[engine.Tier]int64{engine.TierVRAM: 300, engine.TierPinned: 200, engine.TierCold: 300},
		HitsPerTier:  map[engine.Tier]uint64{engine.TierVRAM: m.hits, engine.TierPinned: 1},
		Memory:       []engine.MemoryUse{{Device: "vram", Kind: "weights", Bytes: 200}, {Device: "ram", Kind: "pinned", Bytes: 200}},
	}
	return s
}

func (m *fakeModel) NewSession(o engine.SessionOptions) Session {
	m.mu.Lock()
	m.opts = o
	m.mu.Unlock()
	return &fakeSession{m: m}
}

type fakeSession struct {
	m    *fakeModel
	last []engine.Message
}

func (s *fakeSession) Chat(ctx context.Context, msgs []engine.Message, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error) {
	s.last = msgs
	n := sp.MaxTokens
	if n == 0 {
		n = 100000
	}
	var res engine.Result
	start := time.Now()
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			res.Stop = engine.StopCancelled
			break
		}
		t := engine.Token{ID: i, Text: fmt.Sprintf("t%d ", i), Thinking: i < 2}
		if t.Thinking {
			res.Thinking += t.Text
		} else {
			res.Text += t.Text
		}
		res.Tokens = append(res.Tokens, i)
		s.m.mu.Lock()
		s.m.hits++
		s.m.mu.Unlock()
		onToken(t)
		time.Sleep(s.m.delay)
	}
	if res.Stop == "" {
		res.Stop = engine.StopMaxTokens
	}
	res.Timings = engine.Timings{GeneratedTokens: len(res.Tokens), Decode: time.Since(start) + time.Millisecond}
	return res, nil
}
