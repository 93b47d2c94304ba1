package experts

import (
	"fmt"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
)

// HostDevice runs the expert cache without a GPU: the CPU backend stands in for the device
// and its "device" stacks are host memory. With it the resident mode works on a machine with
// no NVIDIA card (every expert read into the RAM arena at start and computed there), and the
// tests drive every decision of the cache on any machine.
type HostDevice struct{ *cpu.Backend }

// NewSlots allocates slots experts in host memory.
func (d HostDevice) NewSlots(spec compute.WeightSpec, slots int) (compute.Weight, error) {
	per := len(spec.Data) / max(spec.Experts, 1)
	if spec.ExpertStride != 0 {
		return nil, fmt.Errorf("experts: %s: slots of a strided tensor", spec.Name)
	}
	spec.Data, spec.Experts = make([]byte, per*slots), slots
	return d.Place(spec)
}

// WriteSlots copies matrices into slots.
func (d HostDevice) WriteSlots(w compute.Weight, writes []compute.SlotWrite) error {
	cw, ok := w.(*cpu.Weight)
	if !ok {
		return fmt.Errorf("experts: write slots: %T is not a host weight", w)
	}
	for _, s := range writes {
		if s.Slot < 0 || s.Slot >= cw.Experts() || len(s.Data) != len(cw.ExpertBytes(0)) {
			return fmt.Errorf("experts: %s: write of %d bytes to slot %d of %d", cw.Name(), len(s.Data), s.Slot, cw.Experts())
		}
		if err := cw.SetExpert(s.Slot, s.Data); err != nil {
			return fmt.Errorf("experts: %w", err)
		}
	}
	return nil
}

// HostRoutes has nothing to do: the routes are on the host.
func (HostDevice) HostRoutes(*compute.Routes) {}

// RegisterHost has nothing to do: the CPU reads host memory as it is.
func (HostDevice) RegisterHost([]byte) error { return nil }

// HostStack views the experts where they are.
func (d HostDevice) HostStack(spec compute.WeightSpec) (compute.Weight, error) { return d.Place(spec) }

// ReadSlot copies one expert's matrix out of a stack.
func (HostDevice) ReadSlot(w compute.Weight, slot int) ([]byte, error) {
	cw, ok := w.(*cpu.Weight)
	if !ok || slot < 0 || slot >= w.Experts() {
		return nil, fmt.Errorf("experts: read slot %d of %v", slot, w)
	}
	return append([]byte(nil), cw.ExpertBytes(slot)...), nil
}

// Flush has nothing to start: the CPU ran the work already.
func (HostDevice) Flush() {}
