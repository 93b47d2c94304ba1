package gui

import (
	"context"

	"strata/engine"
)

// Engine is the part of the engine API the app uses. engineAPI forwards to package engine;
// the interface exists so controller tests can run without loading a model.
type Engine interface {
	Inspect(ctx context.Context, path string) (engine.ModelInfo, error)
	Open(ctx context.Context, path string, cfg engine.Config, onProgress func(engine.Progress)) (Model, error)
}

// Model is an opened model (engine.Model).
type Model interface {
	Info() engine.ModelInfo
	Config() engine.Config
	Tiers() engine.TierSnapshot
	NewSession(opts engine.SessionOptions) Session
	Close() error
}

// Session is one conversation's state (engine.Session).
type Session interface {
	Chat(ctx context.Context, msgs []engine.Message, sp engine.Sampling, onToken func(engine.Token)) (engine.Result, error)
}

// engineAPI is the real engine.
type engineAPI struct{}

func (engineAPI) Inspect(ctx context.Context, path string) (engine.ModelInfo, error) {
	return engine.Inspect(ctx, path)
}

func (engineAPI) Open(ctx context.Context, path string, cfg engine.Config, onProgress func(engine.Progress)) (Model, error) {
	m, err := engine.Open(ctx, path, cfg, onProgress)
	if err != nil {
		return nil, err
	}
	return engineModel{m}, nil
}

type engineModel struct{ *engine.Model }

func (m engineModel) NewSession(opts engine.SessionOptions) Session { return m.Model.NewSession(opts) }
