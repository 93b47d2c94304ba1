package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/quant"
	"strata/engine/synth"
)

// regionDevice is the CPU stand-in for a GPU that records the region reserved and what
// each Place and NewSlots then asks of the device, rounded as the GPU backend carves them.
type regionDevice struct {
	experts.HostDevice
	reserved int64
	reserves int
	inHost   map[string]bool
	asked    []int64
	what     []string
}

func (d *regionDevice) ReserveRegion(n int64) error {
	d.reserved, d.reserves = n, d.reserves+1
	return nil
}

// hostRegionDevice is a regionDevice that can keep tensors in host memory, as the GPU can.
type hostRegionDevice struct{ *regionDevice }

func (d hostRegionDevice) PlaceInHost(name string) { d.inHost[name] = true }

func (d *regionDevice) Place(spec compute.WeightSpec) (compute.Weight, error) {
	if !d.inHost[spec.Name] {
		d.asked = append(d.asked, compute.SlotAligned(gpu.PlaceBytes(spec)))
		d.what = append(d.what, spec.Name)
	}
	return d.HostDevice.Place(spec)
}

func (d *regionDevice) NewSlots(spec compute.WeightSpec, slots int) (compute.Weight, error) {
	rb, err := quant.RowBytes(spec.Type, spec.Cols)
	if err != nil {
		return nil, err
	}
	d.asked = append(d.asked, compute.SlotAligned(int64(rb*spec.Rows*slots)))
	d.what = append(d.what, fmt.Sprintf("%s x %d slots", spec.Name, slots))
	return d.HostDevice.NewSlots(spec, slots)
}

func (d *regionDevice) total() int64 {
	var n int64
	for _, b := range d.asked {
		n += b
	}
	return n
}

// TestRegionHoldsWhatPlacementAsks: the region tiered placement reserves before it loads a
// model is exactly what the load then asks of the device (the weights, the VRAM slot stacks,
// the streaming ring and gpt-oss's bias rows, each rounded to compute.SlotAlign), for each
// architecture, with the token embeddings in host memory or not.
func TestRegionHoldsWhatPlacementAsks(t *testing.T) {
	for _, arch := range []string{"qwen3moe", "gpt-oss", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) {
			path := writeTinyPreset(t, arch)
			for _, inHost := range []bool{false, true} {
				var dev *regionDevice
				p, f, info, err := placeTiered(t, path, standInConfig(), func(c *cpu.Backend) experts.Device {
					dev = &regionDevice{HostDevice: experts.HostDevice{Backend: c}, inHost: map[string]bool{}}
					if inHost {
						return hostRegionDevice{dev}
					}
					return dev
				}, nil)
				if err != nil {
					t.Fatal(err)
				}
				p.close()
				f.Close()
				if inHost != (len(dev.inHost) > 0) {
					t.Fatalf("in host %v: tensors placed in host memory %v", inHost, dev.inHost)
				}
				slots, ring := 0, false
				for _, w := range dev.what {
					slots += strings.Count(w, " slots")
					ring = ring || strings.Contains(w, fmt.Sprintf("x %d slots", streamRingSlots(experts.Shape{Experts: info.Experts})))
				}
				if slots == 0 || !ring {
					t.Fatalf("in host %v: no slot stacks or no ring among %v", inHost, dev.what)
				}
				if dev.reserves != 1 || dev.reserved != dev.total() {
					t.Errorf("in host %v: reserved %d bytes (%d times), the load asked for %d in %d allocations: %v", inHost, dev.reserved, dev.reserves, dev.total(), len(dev.asked), dev.what)
				}
			}
		})
	}
}

// writeTinyPreset writes arch's tiny synth preset to a temporary GGUF file and returns its path.
func writeTinyPreset(t *testing.T, arch string) string {
	t.Helper()
	spec, err := synth.PresetFor(arch, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := synth.Write(context.Background(), path, spec, nil); err != nil {
		t.Fatal(err)
	}
	return path
}
