package experts_test

import (
	"fmt"
	"testing"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
	"strata/engine/model"
	"strata/engine/quant"
)

// allocDevice is the CPU stand-in device recording what each NewSlots and Place asks of
// it, rounded up to compute.SlotAlign as the GPU backend carves them from its region.
type allocDevice struct {
	experts.HostDevice
	bytes []int64
	what  []string
}

func (d *allocDevice) NewSlots(spec compute.WeightSpec, slots int) (compute.Weight, error) {
	rb, err := quant.RowBytes(spec.Type, spec.Cols)
	if err != nil {
		return nil, err
	}
	d.bytes = append(d.bytes, compute.SlotAligned(int64(rb*spec.Rows*slots)))
	d.what = append(d.what, fmt.Sprintf("slots %s x %d", spec.Name, slots))
	return d.HostDevice.NewSlots(spec, slots)
}

func (d *allocDevice) Place(spec compute.WeightSpec) (compute.Weight, error) {
	d.bytes = append(d.bytes, compute.SlotAligned(gpu.PlaceBytes(spec)))
	d.what = append(d.what, "place "+spec.Name)
	return d.HostDevice.Place(spec)
}

func (d *allocDevice) total() int64 {
	var n int64
	for _, b := range d.bytes {
		n += b
	}
	return n
}

// mixedLayers are expert specs of a quantisation mix, with data: each layer's own type
// (and so its own bytes per expert), two of them alike so that they share a ring.
func mixedLayers(t *testing.T, types []quant.Type, rows, cols, experts int, bias bool) ([][3]compute.WeightSpec, [][3]compute.WeightSpec) {
	t.Helper()
	mats := make([][3]compute.WeightSpec, len(types))
	biases := make([][3]compute.WeightSpec, len(types))
	for l, typ := range types {
		for m, name := range model.ExpertTensors(l) {
			r, c := rows, cols
			if m == 2 { // down: [rows, cols] the other way round
				r, c = cols, rows
			}
			rb, err := quant.RowBytes(typ, c)
			if err != nil {
				t.Fatal(err)
			}
			mats[l][m] = compute.WeightSpec{Name: name, Type: typ, Rows: r, Cols: c, Experts: experts, Data: make([]byte, rb*r*experts)}
			if bias {
				biases[l][m] = compute.WeightSpec{Name: fmt.Sprintf("blk.%d.ffn_%d_exps.bias", l, m), Type: quant.F32, Rows: 1, Cols: r, Experts: experts, Data: make([]byte, 4*r*experts)}
			}
		}
	}
	return mats, biases
}

// TestDeviceBytesMatchesAllocations: what DeviceBytes says the cache will take of its device
// is what Layer and UseFFN then ask of it, allocation by allocation rounded as the region
// carves them, for a quantisation mix (each layer's stacks in its own type, rings for the
// two shapes that stream), with and without expert biases.
func TestDeviceBytesMatchesAllocations(t *testing.T) {
	types := []quant.Type{quant.Q4_K, quant.Q8_0, quant.Q4_K, quant.Q6_K}
	const E, rows, cols, ring = 8, 768, 256, 3
	for _, bias := range []bool{false, true} {
		t.Run(fmt.Sprintf("bias %v", bias), func(t *testing.T) {
			mats, biases := mixedLayers(t, types, rows, cols, E, bias)
			s := experts.Shape{Layers: len(types), Experts: E}
			for l := range mats {
				sizes := [3]*int64{&s.GateBytes, &s.UpBytes, &s.DownBytes}
				for m := range 3 {
					*sizes[m] = max(*sizes[m], int64(len(mats[l][m].Data)/E))
				}
			}
			// Layer 0: 5 in VRAM, 3 cold; layer 1: all in VRAM (no ring); layer 2: 2 in VRAM
			// (the ring of layer 0's shape); layer 3: none in VRAM (a ring of its own).
			inVRAM := []int{5, E, 2, 0}
			tier := firstInVRAM(s, inVRAM)
			host := cpu.New(cpu.Options{Threads: 1})
			defer host.Close()
			dev := &allocDevice{HostDevice: experts.HostDevice{Backend: cpu.New(cpu.Options{Threads: 1})}}
			defer dev.Close()
			c, err := experts.NewCache(dev, host, experts.CacheConfig{Shape: s, Tier: tier, StreamSlots: ring, StreamMinTokens: 32})
			if err != nil {
				t.Fatal(err)
			}
			specs := make([]experts.LayerSpecs, len(types))
			for l := range mats {
				for m := range 3 {
					specs[l].Mats[m] = mats[l][m]
					specs[l].Mats[m].Data = nil
					if bias {
						specs[l].Bias[m] = biases[l][m]
						specs[l].Bias[m].Data = nil
					}
				}
			}
			want, err := c.DeviceBytes(specs, gpu.PlacedBytes)
			if err != nil {
				t.Fatal(err)
			}
			for l := range mats {
				le, err := c.Layer(l, mats[l][0], mats[l][1], mats[l][2])
				if err != nil {
					t.Fatal(err)
				}
				if bias {
					if err := le.(model.BiasedExperts).UseFFN(model.ExpertFFN{Bias: biases[l], Limit: 7, Alpha: 1.7}); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Four layers' stacks less layer 3's, and two rings, each of three matrices (and as
			// many bias stacks): the sum is not a formula over the widest shape.
			if n := 3 * (3 + 2); len(dev.bytes) != n*(1+btoi(bias)) {
				t.Errorf("%d allocations, want %d: %v", len(dev.bytes), n*(1+btoi(bias)), dev.what)
			}
			if got := dev.total(); got != want {
				t.Errorf("the cache asked for %d bytes, DeviceBytes said %d (%v)", got, want, dev.what)
			}
			var widest int64
			for _, n := range inVRAM {
				widest += int64(n) * s.BlobBytes()
			}
			if want >= widest+2*int64(ring)*s.BlobBytes() {
				t.Errorf("DeviceBytes %d: no less than the widest shape's %d, the mix is not counted per layer", want, widest+2*int64(ring)*s.BlobBytes())
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// firstInVRAM is a tier for every expert of s: layer l's first inVRAM[l] experts in VRAM,
// the rest cold.
func firstInVRAM(s experts.Shape, inVRAM []int) []experts.Tier {
	tier := make([]experts.Tier, s.Count())
	for l, n := range inVRAM {
		for e := range s.Experts {
			tier[s.Index(experts.ID{Layer: l, Expert: e})] = experts.TierCold
			if e < n {
				tier[s.Index(experts.ID{Layer: l, Expert: e})] = experts.TierVRAM
			}
		}
	}
	return tier
}
