package gui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"strata/app/library"
	"strata/app/store"
	"strata/engine"
)

// Topics a Controller reports changes on; the window refreshes the matching screen.
const (
	topicCard  = "card"  // the model picker's card
	topicLoad  = "load"  // loading progress, success or failure
	topicChat  = "chat"  // the open chat (streaming tokens, stop, errors)
	topicChats = "chats" // the sidebar's list of chats
)

// Controller is the app's state and everything the screens' callbacks do. It knows no
// widget: screens call its methods and redraw when it reports a topic through onChange,
// which always runs on the UI goroutine (through post). Engine calls run in goroutines.
type Controller struct {
	eng          Engine
	chats        *store.Chats
	settingsPath string
	demoDir      string
	makeDemo     func(ctx context.Context, dir string, progress func(done, total int64)) (string, error)
	post         func(func())
	now          func() time.Time

	mu       sync.Mutex
	onChange func(topic string)
	settings store.Settings
	// settingsErr is why settings.json could not be read (the defaults are in use).
	settingsErr error

	// the picker's card
	cardPath string
	cardInfo engine.ModelInfo
	cardErr  error

	// loading
	loading    bool
	loadCancel context.CancelFunc
	loadStart  time.Time
	meter      phaseMeter
	progress   loadProgress
	loadErr    error
	ready      time.Duration
	lastNotify time.Time

	// the loaded model
	model     Model
	modelPath string
	demo      bool

	chat chatState

	server serverState // the OpenAI-compatible server (server.go)
}

// newController opens the stores under the given folders. post runs a function on the UI
// goroutine (fyne.Do in the app).
func newController(opts Options, post func(func())) (*Controller, error) {
	chats, err := store.OpenChats(filepath.Join(opts.DataDir, "chats"))
	if err != nil {
		return nil, err
	}
	c := &Controller{
		eng:          opts.Engine,
		chats:        chats,
		settingsPath: store.SettingsPath(opts.ConfigDir),
		demoDir:      filepath.Join(opts.DataDir, "demo"),
		makeDemo:     opts.MakeDemo,
		post:         post,
		now:          time.Now,
		onChange:     func(string) {},
	}
	c.settings, c.settingsErr = store.LoadSettings(c.settingsPath)
	if c.settingsErr != nil {
		slog.Warn("settings", "err", c.settingsErr)
	}
	c.chat.sampling = preset(c.settings.Preset)
	c.chat.preset = c.settings.Preset
	c.chat.cur = c.freshChat()
	return c, nil
}

// setOnChange installs the window's refresh function.
func (c *Controller) setOnChange(f func(topic string)) {
	c.mu.Lock()
	c.onChange = f
	c.mu.Unlock()
}

// notify reports a topic on the UI goroutine. Never call it with mu held.
func (c *Controller) notify(topic string) {
	c.mu.Lock()
	f := c.onChange
	c.mu.Unlock()
	c.post(func() { f(topic) })
}

// Settings returns the current settings.
func (c *Controller) Settings() store.Settings {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settings
}

// SettingsProblem is why the saved settings could not be read, or nil.
func (c *Controller) SettingsProblem() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settingsErr
}

// saveSettings writes s and makes it current.
func (c *Controller) saveSettings(s store.Settings) error {
	if err := store.SaveSettings(c.settingsPath, s); err != nil {
		return err
	}
	c.mu.Lock()
	c.settings = s
	c.settingsErr = nil
	c.mu.Unlock()
	return nil
}

// AcceptAdvice saves the wizard's recommendation as the settings.
func (c *Controller) AcceptAdvice(a Advice) error {
	s := c.Settings()
	s.Config = a.Config
	s.Mode = a.Mode
	s.WizardDone = true
	return c.saveSettings(s)
}

// ApplySettings validates the panel, saves it and, when a model is loaded, reloads it with
// the new configuration. reloading says whether a reload started.
func (c *Controller) ApplySettings(f settingsForm) (reloading bool, err error) {
	s := c.Settings()
	cfg, err := f.config(s.Config)
	if err != nil {
		return false, err
	}
	s.Config = cfg
	s.Mode = f.Mode
	if err := c.saveSettings(s); err != nil {
		return false, err
	}
	c.mu.Lock()
	path, demo := c.modelPath, c.demo
	c.mu.Unlock()
	if path == "" {
		return false, nil
	}
	return true, c.load(path, demo)
}

// Inspect reads a model's card in the background and reports topicCard. A later part of
// a split model stands for the whole: its first part is inspected.
func (c *Controller) Inspect(path string) {
	path = library.FirstPart(path)
	c.mu.Lock()
	c.cardPath, c.cardInfo, c.cardErr = path, engine.ModelInfo{}, nil
	c.mu.Unlock()
	go func() {
		var info engine.ModelInfo
		var err error
		if _, statErr := os.Stat(path); statErr != nil {
			err = fmt.Errorf("%s: %w", path, errNoFile)
		} else {
			info, err = c.eng.Inspect(context.Background(), path)
		}
		c.mu.Lock()
		if c.cardPath == path {
			c.cardInfo, c.cardErr = info, err
		}
		c.mu.Unlock()
		c.notify(topicCard)
	}()
}

// Card is the picker's chosen model: its path, what Inspect said, or why it could not.
func (c *Controller) Card() (string, engine.ModelInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cardPath, c.cardInfo, c.cardErr
}

// Load opens a model with the saved configuration in the background, closing the one
// that is open. Progress and the outcome are reported on topicLoad.
func (c *Controller) Load(path string) error { return c.load(path, false) }

// LoadDemo makes the tiny synthetic demo model (once) and loads it.
func (c *Controller) LoadDemo() error {
	if c.makeDemo == nil {
		return errors.New("the demo model cannot be made by this build")
	}
	return c.load("", true)
}

func (c *Controller) load(path string, demo bool) error {
	c.StopGeneration()
	c.mu.Lock()
	if c.loading {
		c.mu.Unlock()
		return errors.New("a model is already loading; cancel it first")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.loading, c.loadCancel, c.loadErr, c.ready = true, cancel, nil, 0
	c.loadStart = c.now()
	c.meter = phaseMeter{}
	c.progress = c.meter.update("", 0, 0, c.loadStart)
	old := c.model
	c.model, c.modelPath, c.demo, c.chat.session = nil, "", false, nil
	cfg := c.settings.Config
	c.mu.Unlock()
	c.notify(topicLoad)

	go func() {
		defer cancel()
		if old != nil {
			if err := c.closeModel(old); err != nil {
				slog.Warn("closing model", "err", err)
			}
		}
		if demo {
			c.report("demo", 0, 0)
			p, err := c.makeDemo(ctx, c.demoDir, func(done, total int64) { c.report("demo", done, total) })
			if err != nil {
				c.finishLoad(nil, "", false, fmt.Errorf("making the demo model: %w", err))
				return
			}
			path = p
		}
		cfg.MaxContext = capContext(ctx, path, cfg.MaxContext)
		m, err := c.eng.Open(ctx, path, cfg, func(p engine.Progress) { c.report(p.Phase, p.Done, p.Total) })
		if err == nil && ctx.Err() != nil {
			m.Close()
			m, err = nil, ctx.Err()
		}
		c.finishLoad(m, path, demo, err)
	}()
	return nil
}

// report records one progress step and refreshes the screen at most ten times a second.
func (c *Controller) report(phase string, done, total int64) {
	now := c.now()
	c.mu.Lock()
	c.progress = c.meter.update(phase, done, total, now)
	due := now.Sub(c.lastNotify) >= 100*time.Millisecond
	if due {
		c.lastNotify = now
	}
	c.mu.Unlock()
	if due {
		c.notify(topicLoad)
	}
}

func (c *Controller) finishLoad(m Model, path string, demo bool, err error) {
	// Remember the model before the state says "loaded", so whoever waits for that sees
	// the recent list already saved.
	if err == nil && !demo {
		s := c.Settings()
		s.AddRecent(path)
		if serr := c.saveSettings(s); serr != nil {
			slog.Warn("saving recent models", "err", serr)
		}
	}
	c.mu.Lock()
	c.loading, c.loadCancel = false, nil
	c.loadErr = err
	if err == nil {
		c.model, c.modelPath, c.demo = m, path, demo
		c.ready = c.now().Sub(c.loadStart)
		c.chat.session = m.NewSession(c.sessionOptionsLocked())
		c.chat.err = ""
	}
	c.mu.Unlock()
	if err != nil {
		slog.Info("load failed", "path", path, "err", err)
	}
	c.notify(topicLoad)
	c.notify(topicChat)
}

// CancelLoad stops a load in progress.
func (c *Controller) CancelLoad() {
	c.mu.Lock()
	cancel := c.loadCancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// LoadState is the loading screen's view.
type LoadState struct {
	Loading  bool
	Progress loadProgress
	Err      error
	Ready    time.Duration // process of loading until the first token can be generated
	Loaded   bool
	Demo     bool
	Info     engine.ModelInfo
}

// LoadState reports where loading is.
func (c *Controller) LoadState() LoadState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := LoadState{Loading: c.loading, Progress: c.progress, Err: c.loadErr, Ready: c.ready, Loaded: c.model != nil, Demo: c.demo}
	if c.model != nil {
		st.Info = c.model.Info()
	}
	return st
}

// Tiers is the loaded model's tier snapshot; false when no model is loaded. It may be
// called from any goroutine.
func (c *Controller) Tiers() (engine.TierSnapshot, bool) {
	c.mu.Lock()
	m := c.model
	c.mu.Unlock()
	if m == nil {
		return engine.TierSnapshot{}, false
	}
	return m.Tiers(), true
}

// Close stops generation and loading and releases the model.
func (c *Controller) Close() {
	c.stopServer()
	c.StopGeneration()
	c.CancelLoad()
	c.mu.Lock()
	m := c.model
	c.model = nil
	c.mu.Unlock()
	if m != nil {
		m.Close()
	}
}

// capContext is the settings' context length for the model at path: the setting is the
// PC's (the wizard sized it from the memory, before any model was chosen), so a model that
// takes less gets its own limit instead of the refusal a --max-context above it gets.
func capContext(ctx context.Context, path string, maxContext int) int {
	if maxContext <= 0 {
		return maxContext
	}
	info, err := engine.Inspect(ctx, path)
	if err != nil || info.ContextLimit <= 0 || maxContext <= info.ContextLimit {
		return maxContext // Open reports a file it cannot read
	}
	slog.Info("context length capped at the model's limit", "setting", maxContext, "limit", info.ContextLimit)
	return info.ContextLimit
}
