package library

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"strata/app/wizard"
	"strata/engine"
	"strata/engine/model"
)

//go:embed catalogue.json
var catalogueJSON []byte

// Entry is one model of the built-in catalogue (catalogue.json).
type Entry struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	Repo         string  `json:"repo"`
	Quant        string  `json:"quant"` // matched against the repository's files (Choose)
	Bytes        int64   `json:"bytes"` // approximate; the Hub's listing has the exact size
	Architecture string  `json:"architecture"`
	ParamsB      float64 `json:"params_b"`
	ActiveB      float64 `json:"active_b"`
	Layers       int     `json:"layers"`
	Experts      int     `json:"experts"`
	ExpertsUsed  int     `json:"experts_used"`
	Context      int     `json:"context"`
	ExpertShare  float64 `json:"expert_share"` // share of the bytes in routed experts
	KVPerToken   int64   `json:"kv_bytes_per_token"`
	Recurrent    int     `json:"recurrent_layers,omitempty"` // linear-attention layers (the hybrids)
	GoodAt       string  `json:"good_at"`
}

// Ref is the entry as `strata pull` takes it.
func (e Entry) Ref() string { return e.Repo + ":" + e.Quant }

// Catalogue reads the embedded catalogue, checking each entry.
func Catalogue() ([]Entry, error) {
	var c struct {
		Models []Entry `json:"models"`
	}
	if err := json.Unmarshal(catalogueJSON, &c); err != nil {
		return nil, fmt.Errorf("library: catalogue.json: %w", err)
	}
	for i, e := range c.Models {
		if err := ValidRepo(e.Repo); err != nil || e.ID == "" || e.Name == "" || e.Quant == "" || e.Bytes <= 0 ||
			e.Layers <= 0 || e.Experts <= 0 || e.ExpertsUsed <= 0 || e.ExpertsUsed > e.Experts || e.ExpertShare <= 0 || e.ExpertShare >= 1 || e.GoodAt == "" {
			return nil, fmt.Errorf("library: catalogue.json: model %d (%q) is incomplete or inconsistent", i, e.ID)
		}
	}
	return c.Models, nil
}

// WizardModel is the entry as the wizard's decision sees a model.
func (e Entry) WizardModel() wizard.Model {
	experts := int64(float64(e.Bytes) * e.ExpertShare)
	return wizard.Model{
		Name: e.Name, FileBytes: e.Bytes, ExpertBytes: experts, NonExpertBytes: e.Bytes - experts,
		Layers: e.Layers, Experts: e.Experts, ExpertsUsed: e.ExpertsUsed, ContextLength: e.Context,
		KVBytesPerToken: e.KVPerToken,
		GPULacks:        engine.GPULacks(engine.ModelInfo{Architecture: e.Architecture, Layers: e.Layers, RecurrentLayers: e.Recurrent}),
	}
}

// Speed classes of a verdict, from a rough estimate of tokens per second.
const (
	SpeedFast    = "fast"     // 15 tokens/s or more
	SpeedUsable  = "usable"   // 5 to 15
	SpeedSlow    = "slow"     // 1 to 5
	SpeedTooSlow = "too slow" // under 1: too big for this PC
)

// Verdict is what the catalogue says of a model on this PC: the wizard's mode, a rough
// speed class, and whether Strata runs its architecture yet.
type Verdict struct {
	Mode      wizard.Mode
	Words     string // "Runs all on the GPU", "Tiered: GPU, RAM and SSD", ...
	Speed     string
	TokensSec float64 // the rough estimate behind Speed
	TooBig    bool
	Supported bool   // Strata runs the architecture
	Reason    string // the wizard's first reason, or why it cannot run
}

// Rough bandwidths of the tiers for the speed class (bytes/s): what a token's experts are
// read at from each. They are deliberately plain: the class, not the number, is shown.
const (
	vramBytesPerSec    = 300e9
	ramBytesPerSec     = 20e9
	defaultDriveMBps   = 1500
	fastTokensPerSec   = 15
	usableTokensPerSec = 5
	slowTokensPerSec   = 1
)

// Judge gives the verdict for entry e on hw, from the wizard's recommendation.
func Judge(hw wizard.Hardware, e Entry) Verdict {
	m := e.WizardModel()
	r := wizard.Recommend(hw, m)
	v := Verdict{Mode: r.Mode, Supported: slices.Contains(model.Supported(), e.Architecture)}
	if len(r.Reasons) > 0 {
		v.Reason = r.Reasons[0]
	}
	switch r.Mode {
	case wizard.ModeAllGPU:
		v.Words = "Runs all on the GPU"
	case wizard.ModeResident:
		v.Words = "Tiered: GPU and RAM"
	case wizard.ModeTiered:
		v.Words = "Tiered: GPU, RAM and SSD"
	default:
		v.Words = "On the CPU"
	}
	v.TokensSec = estimateTokensPerSec(hw, m, r)
	switch {
	case v.TokensSec >= fastTokensPerSec:
		v.Speed = SpeedFast
	case v.TokensSec >= usableTokensPerSec:
		v.Speed = SpeedUsable
	case v.TokensSec >= slowTokensPerSec:
		v.Speed = SpeedSlow
	default:
		v.Speed, v.TooBig = SpeedTooSlow, true
		v.Words = "Too big for this PC"
	}
	if !v.Supported {
		v.Reason = fmt.Sprintf("Strata cannot run %s models yet (it runs %s); the download works, the model will not open.",
			e.Architecture, strings.Join(model.Supported(), ", "))
	}
	return v
}

// estimateTokensPerSec reads a token's weights from the tiers the plan puts them in,
// routing spread evenly over the experts (pessimistic: a profile puts the busy ones on the
// GPU).
func estimateTokensPerSec(hw wizard.Hardware, m wizard.Model, r wizard.Recommendation) float64 {
	b := r.Budget
	perToken := float64(m.ExpertBytes) * float64(m.ExpertsUsed) / float64(max(m.Experts, 1))
	held := b.GPUHeld()
	total := float64(max(b.TotalExperts, 1))
	gpuShare := min(1, float64(held)/total)
	rest := 1 - gpuShare
	ramShare := rest
	if rest > 0 && b.ComplementBytes > 0 && r.Mode == wizard.ModeTiered {
		ramShare = rest * min(1, float64(b.HostBudget)/float64(b.ComplementBytes))
	}
	if r.Mode == wizard.ModeCPUOnly && float64(m.ExpertBytes) > float64(max(b.HostBudget, 0)) {
		ramShare = min(1, float64(b.HostBudget)/float64(max(m.ExpertBytes, 1)))
	}
	ssdShare := max(0, 1-gpuShare-ramShare)
	drive := hw.DriveMBps
	if drive <= 0 {
		drive = defaultDriveMBps
	}
	dense := float64(m.NonExpertBytes) / vramBytesPerSec
	if r.Mode == wizard.ModeCPUOnly {
		dense = float64(m.NonExpertBytes) / ramBytesPerSec
	}
	secs := dense + perToken*(gpuShare/vramBytesPerSec+ramShare/ramBytesPerSec+ssdShare/(drive*1e6))
	if secs <= 0 {
		return 0
	}
	return 1 / secs
}
