// Package experts decides where each routed expert of a MoE model lives and runs: the routing
// profile, the tier planner, the VRAM expert cache with its CPU misses, the host tiers and
// experts.bin. It hands the arithmetic to the compute backends and knows no GUI.
package experts

import "fmt"

// ID names one expert of one layer.
type ID struct{ Layer, Expert int }

func (id ID) String() string { return fmt.Sprintf("layer %d expert %d", id.Layer, id.Expert) }

// Tier is where an expert lives, fastest first. The values match engine.Tier.
type Tier uint8

const (
	TierVRAM   Tier = iota // a slot of the main GPU's expert cache
	TierHelper             // a slot on a helper GPU
	TierPinned             // page-locked host RAM
	TierCold               // the model file (GGUF in place or experts.bin), through the page cache
	TierCPU                // no GPU: everything on the CPU from the mapped file
)

func (t Tier) String() string {
	switch t {
	case TierVRAM:
		return "vram"
	case TierHelper:
		return "helper"
	case TierPinned:
		return "pinned"
	case TierCold:
		return "cold"
	case TierCPU:
		return "cpu"
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// Shape is what the tier code needs to know of a model's experts.
type Shape struct {
	Layers, Experts int
	// Bytes of one expert's gate, up and down matrices as stored in the file; a blob is
	// their sum.
	GateBytes, UpBytes, DownBytes int64
}

// BlobBytes is the size of one expert's three matrices.
func (s Shape) BlobBytes() int64 { return s.GateBytes + s.UpBytes + s.DownBytes }

// Count is the number of experts over all layers.
func (s Shape) Count() int { return s.Layers * s.Experts }

// Index is the flat position of id in per-expert arrays ([layer*Experts + expert]).
func (s Shape) Index(id ID) int { return id.Layer*s.Experts + id.Expert }
