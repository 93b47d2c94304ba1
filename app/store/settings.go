package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"strata/engine"
)

// maxRecent is how many recently opened models the picker lists.
const maxRecent = 8

// settingsVersion is the layout of settings.json this build writes. 2: adaptive swaps and
// the PCIe share became auto by default; files without a version saved 0, the old default,
// for both (migrate).
const settingsVersion = 2

// Settings is everything the settings panel and the wizard decide, saved as settings.json.
type Settings struct {
	Version      int           `json:"version"`
	Config       engine.Config `json:"config"`
	Mode         string        `json:"mode,omitempty"` // the wizard's recommended mode, as accepted
	WizardDone   bool          `json:"wizard_done"`
	RecentModels []string      `json:"recent_models,omitempty"`
	LastModel    string        `json:"last_model,omitempty"`
	Preset       string        `json:"preset,omitempty"` // sampling preset: precise, balanced, creative
	SystemPrompt string        `json:"system_prompt,omitempty"`
	// ContextFull is what a chat does when it reaches the context length: "stop" (the
	// default) or "drop-oldest" (engine.ContextPolicy).
	ContextFull string `json:"context_full,omitempty"`
	// ModelsDir is where the library downloads models ("" = the default folder, see
	// app/library.DefaultModelsDir).
	ModelsDir string `json:"models_dir,omitempty"`
	// LastUsed is when each model (by path) was last opened, for the library's list.
	LastUsed map[string]time.Time `json:"last_used,omitempty"`
	Server   Server               `json:"server"`
	// Remote is the last server connected to from the picker (its key included).
	Remote Remote `json:"remote,omitzero"`
}

// Server is the app's OpenAI-compatible server: it serves the loaded model on this PC
// (loopback only) while Enabled.
type Server struct {
	Enabled bool   `json:"enabled"`
	Port    int    `json:"port"`
	APIKey  string `json:"api_key,omitempty"`
}

// DefaultServerPort is the port the server switch offers first (strata serve's default).
const DefaultServerPort = 8080

// Remote is a server that holds a model, as "Connect to a server" last used it.
type Remote struct {
	URL    string `json:"url,omitempty"`
	APIKey string `json:"api_key,omitempty"`
	Model  string `json:"model,omitempty"`
}

// DefaultSettings is what a first run starts with.
func DefaultSettings() Settings {
	return Settings{Version: settingsVersion, Config: engine.DefaultConfig(), Preset: "balanced", Server: Server{Port: DefaultServerPort}}
}

// migrate brings settings read from a file of an older version to this one: the knobs whose
// default changed from 0 to auto, saved at the old default, take the new one. A PCIe share
// of 0 next to a pinned-memory cap stays: the wizard sets both under WSL2, where the GPU
// must not read RAM over PCIe.
func (s *Settings) migrate(fileVersion int) {
	if fileVersion < 2 {
		if s.Config.AdaptEvery == 0 {
			s.Config.AdaptEvery = engine.Auto
		}
		if s.Config.PCIeFrac == 0 && s.Config.PinnedBudgetMiB == 0 {
			s.Config.PCIeFrac = engine.Auto
		}
	}
	s.Version = settingsVersion
}

// SettingsPath is settings.json inside dir.
func SettingsPath(dir string) string { return filepath.Join(dir, "settings.json") }

// LoadSettings reads path. A missing file gives the defaults; a damaged one is moved aside
// (MoveAside) and gives the defaults and an error (ErrCorrupt) naming both files, so the app
// can say so and start. Fields absent from the file keep their default values. What a
// killed writer left (temporary files) is removed.
func LoadSettings(path string) (Settings, error) {
	removeStaleTemps(path)
	s := DefaultSettings()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("store: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		aside, merr := MoveAside(path, time.Now())
		if merr != nil {
			return DefaultSettings(), fmt.Errorf("store: %s: not a settings file (defaults used): %w; %w", path, err, merr)
		}
		return DefaultSettings(), fmt.Errorf("store: %s: not a settings file (%v): %w to %s; defaults used", path, err, ErrCorrupt, aside)
	}
	var file struct {
		Version int `json:"version"`
	}
	_ = json.Unmarshal(data, &file) // it parsed as Settings above; absent is version 0
	if file.Version > settingsVersion {
		return s, fmt.Errorf("store: %s is from a newer Strata (settings version %d, this one reads up to %d): its settings are used as far as this version knows them, and saving keeps only those", path, file.Version, settingsVersion)
	}
	s.migrate(file.Version)
	return s, nil
}

// SaveSettings validates the engine configuration and writes path atomically.
func SaveSettings(path string, s Settings) error {
	if err := s.Config.Validate(); err != nil {
		return fmt.Errorf("store: settings not saved: %w", err)
	}
	if s.Server.Port < 0 || s.Server.Port > 65535 {
		return fmt.Errorf("store: settings not saved: server port %d is out of range (0-65535)", s.Server.Port)
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("store: %s: %w", path, err)
	}
	return WriteFileAtomic(path, append(data, '\n'))
}

// AddRecent puts model first in the recent list, without duplicates, keeping maxRecent.
func (s *Settings) AddRecent(model string) {
	list := []string{model}
	for _, m := range s.RecentModels {
		if m != model && len(list) < maxRecent {
			list = append(list, m)
		}
	}
	s.RecentModels = list
	s.LastModel = model
	s.MarkUsed(model, time.Now())
}

// maxLastUsed bounds the last-use map; the oldest entries go first.
const maxLastUsed = 200

// MarkUsed records that model was opened at t.
func (s *Settings) MarkUsed(model string, t time.Time) {
	if s.LastUsed == nil {
		s.LastUsed = map[string]time.Time{}
	}
	s.LastUsed[model] = t.UTC().Round(time.Second)
	for len(s.LastUsed) > maxLastUsed {
		oldest := ""
		for m, u := range s.LastUsed {
			if oldest == "" || u.Before(s.LastUsed[oldest]) {
				oldest = m
			}
		}
		delete(s.LastUsed, oldest)
	}
}
