package experts

import (
	"fmt"

	"strata/engine/compute"
	"strata/engine/model"
)

// layerFFN is one layer's ExpertFFN placed for each stack its experts run on: the file's
// stacks are indexed by expert id, the pinned slot stack by slot, so each gets its biases in
// its own order.
type layerFFN struct {
	file, pinned *compute.ExpertFFN
}

// UseFFN gives layer l's experts biases and the clamped SwiGLU. The biases of the pinned
// experts are copied into slot order (a few KB per expert); the VRAM cache, the PCIe reads
// and the streaming ring do not carry them yet, so a layer with any of those refuses.
func (c *Cache) UseFFN(l int, ffn model.ExpertFFN) error {
	if l < 0 || l >= c.sh.Layers || c.lays[l] == nil {
		return fmt.Errorf("experts: expert biases for layer %d, which is not placed", l)
	}
	L := c.lays[l]
	if L.vram[0] != nil || L.pinDev[0] != nil || L.helper[0][0] != nil || L.helper[1][0] != nil || c.cfg.StreamSlots > 0 {
		return fmt.Errorf("experts: layer %d: the GPU expert cache does not run expert biases (gpt-oss) yet; keep the experts on the CPU", l)
	}
	file := &compute.ExpertFFN{Limit: ffn.Limit, Alpha: ffn.Alpha}
	pinned := &compute.ExpertFFN{Limit: ffn.Limit, Alpha: ffn.Alpha}
	var slots []int // expert of each pinned slot
	for e := range c.sh.Experts {
		if c.tier[c.sh.Index(ID{l, e})] == TierPinned {
			slots = append(slots, e)
		}
	}
	for m, s := range ffn.Bias {
		if s.Data == nil {
			continue
		}
		if s.Rows != 1 || s.Experts != c.sh.Experts || s.ExpertStride != 0 {
			return fmt.Errorf("experts: bias %q is %d x %d x %d, want one row for each of %d experts", s.Name, s.Experts, s.Rows, s.Cols, c.sh.Experts)
		}
		w, err := c.host.Place(s)
		if err != nil {
			return err
		}
		*biasOf(file, m) = w
		if len(slots) == 0 {
			continue
		}
		per := len(s.Data) / s.Experts
		ps := s
		ps.Name, ps.Experts, ps.Data = s.Name+" (pinned slots)", len(slots), make([]byte, 0, len(slots)*per)
		for _, e := range slots {
			ps.Data = append(ps.Data, s.Data[e*per:(e+1)*per]...)
		}
		if w, err = c.host.Place(ps); err != nil {
			return err
		}
		*biasOf(pinned, m) = w
	}
	L.ffn = layerFFN{file: file, pinned: pinned}
	return nil
}

func biasOf(f *compute.ExpertFFN, m int) *compute.Weight {
	return [3]*compute.Weight{&f.GateBias, &f.UpBias, &f.DownBias}[m]
}

// UseFFN gives the layer's experts biases and the clamped SwiGLU (see Cache.UseFFN).
func (le *layerExperts) UseFFN(ffn model.ExpertFFN) error { return le.c.UseFFN(le.l, ffn) }
