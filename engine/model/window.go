package model

// ringBatch is the most tokens one pass adds when sliding-window layers keep only their
// window: such a layer holds window+ringBatch-1 positions, so every token of the batch still
// finds its window's keys. Longer batches run as several passes (Forward).
const ringBatch = 512

// KVKeep is, per KV layer, how many positions a cache of ctx positions keeps (0: all; see
// compute.KVSpec.Keep), or nil when every layer keeps everything. Only models whose every
// layer is an attention layer slide, so KV layer l is model layer l.
func (h Hparams) KVKeep(ctx int) []int {
	var keep []int
	for l := range h.Layers {
		if w := h.Window(l); w > 0 && w+ringBatch-1 < ctx {
			if keep == nil {
				keep = make([]int, h.Layers)
			}
			keep[l] = w + ringBatch - 1
		}
	}
	return keep
}

// RingLayers is how many layers slide and the positions each keeps (see KVKeep) in a cache
// longer than that; a long context costs memory on the other layers only.
func (h Hparams) RingLayers() (layers, keep int) {
	for l := range h.Layers {
		if w := h.Window(l); w > 0 {
			layers, keep = layers+1, w+ringBatch-1
		}
	}
	return layers, keep
}
