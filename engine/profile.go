package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"strata/engine/experts"
	"strata/engine/gguf"
)

// RoutingProfile is a snapshot of the routing counts since the model was opened, as a
// profile keyed to this model. Tokens is derived from the counts: each token routes to
// ExpertsUsed experts in every MoE layer.
func (m *Model) RoutingProfile() *experts.Profile {
	s := m.stats
	p := experts.NewProfile(experts.ModelKey(m.file), experts.Shape{Layers: s.layers, Experts: s.experts})
	s.mu.Lock()
	copy(p.Count, s.hits)
	copy(p.Weight, s.weight)
	s.mu.Unlock()
	p.Tokens = profileTokens(p, m.info.ExpertsUsed)
	return p
}

// profileTokens is the token count behind p's counts: a layer's routes over the experts each
// token uses. The busiest layer counts, so a model whose first layers are dense (no routed
// experts) still gets its count.
func profileTokens(p *experts.Profile, used int) uint64 {
	if used <= 0 || p.Experts == 0 {
		return 0
	}
	var most uint64
	for l := range p.Layers {
		var n uint64
		for _, c := range p.Count[l*p.Experts : (l+1)*p.Experts] {
			n += c
		}
		most = max(most, n)
	}
	return most / uint64(used)
}

// loadProfile finds the saved profile of the model in f (next to it or in the user cache
// folder). It returns nil when there is none or it does not fit the shape; the path says
// where it came from.
func loadProfile(f *gguf.File, s experts.Shape) (*experts.Profile, string) {
	key := experts.ModelKey(f)
	p, path, err := experts.FindProfile(f.Path, key)
	if err != nil {
		slog.Info("engine: a saved expert profile was passed over", "model", f.Path, "reason", err)
	}
	if p == nil {
		slog.Info("engine: no expert profile yet: experts start in the neutral order and the profile is learned from use", "model", f.Path)
		return nil, ""
	}
	if p.Layers != s.Layers || p.Experts != s.Experts {
		slog.Info("engine: the saved expert profile has another shape; passed over", "path", path,
			"profile", fmt.Sprintf("%dx%d", p.Layers, p.Experts), "model", fmt.Sprintf("%dx%d", s.Layers, s.Experts))
		return nil, ""
	}
	slog.Info("engine: expert profile loaded", "path", path, "tokens", p.Tokens)
	return p, path
}

// saveLearnedProfile adds the routes of this run to the model's saved profile (or starts
// one) and saves it where it was found, else in the first writable place. Nothing is
// written when nothing was routed. Call it once per run (from Close): a second call would
// count the same routes again.
func (m *Model) saveLearnedProfile() error {
	run := m.RoutingProfile()
	if run.Tokens == 0 {
		return nil
	}
	shape := experts.Shape{Layers: run.Layers, Experts: run.Experts}
	p, path := loadProfile(m.file, shape)
	if p == nil {
		p = experts.NewProfile(run.Key, shape)
	}
	if err := p.Add(run); err != nil {
		return fmt.Errorf("engine: learned profile of %s: %w", m.file.Path, err)
	}
	if path != "" {
		err := p.Save(path)
		if err == nil {
			slog.Info("engine: expert profile saved", "path", path, "tokens", p.Tokens)
			return nil
		}
		slog.Info("engine: expert profile not saved where it was found", "path", path, "reason", err)
	}
	saved, err := experts.SaveProfile(p, m.file.Path)
	if err != nil {
		return fmt.Errorf("engine: learned profile: %w", err)
	}
	slog.Info("engine: expert profile saved", "path", saved, "tokens", p.Tokens)
	return nil
}

// ProfileModel runs every prompt through the model's chat template as a user turn (prompt
// processing only: no token is generated) and returns the routing profile of just those
// runs. progress (may be nil) is called after each prompt. The counts are the difference of
// the model's routing counters, so another session generating at the same time would be
// counted too: profile a model nobody else is using.
func ProfileModel(ctx context.Context, m *Model, prompts []string, progress func(done, total int)) (*experts.Profile, error) {
	if len(prompts) == 0 {
		return nil, errors.New("engine: profile: no prompts")
	}
	before := m.RoutingProfile()
	limit := m.cfg.MaxContext
	for i, text := range prompts {
		ids, err := m.text.chatTokens([]Message{{Role: RoleUser, Content: text}}, nil, nil, true)
		if err != nil {
			return nil, fmt.Errorf("engine: profile: prompt %d: %w", i+1, err)
		}
		if limit > 1 && len(ids) >= limit {
			ids = ids[:limit-1] // Generate needs one position left for the token it samples
		}
		if len(ids) > 0 {
			// One sampled token and no decode step: the prompt's routes are what is counted.
			s := m.NewSession(SessionOptions{})
			if _, err := s.Generate(ctx, ids, Sampling{MaxTokens: 1}, nil); err != nil {
				return nil, fmt.Errorf("engine: profile: prompt %d: %w", i+1, err)
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(i+1, len(prompts))
		}
	}
	after := m.RoutingProfile()
	for i := range after.Count {
		after.Count[i] -= before.Count[i]
		after.Weight[i] = max(after.Weight[i]-before.Weight[i], 0)
	}
	after.Tokens = profileTokens(after, m.info.ExpertsUsed)
	if after.Tokens == 0 {
		return nil, fmt.Errorf("engine: profile: the %d prompts gave no tokens: the tokenizer of %s encodes no text", len(prompts), m.file.Path)
	}
	return after, nil
}
