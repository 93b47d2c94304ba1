package engine

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"strata/engine/compute"
	"strata/engine/compute/gpu"
	"strata/engine/experts"
)

// routeStats counts how often each expert is routed; it is the model's compute observer and
// feeds the tier map. Safe for concurrent readers.
type routeStats struct {
	mu      sync.Mutex
	layers  int
	experts int
	hits    []uint64 // [layer*experts + expert]
	weight  []float64
	speed   float64
}

func newRouteStats(layers, experts int) *routeStats {
	return &routeStats{layers: layers, experts: experts, hits: make([]uint64, layers*experts), weight: make([]float64, layers*experts)}
}

// Routes implements model.Observer.
func (s *routeStats) Routes(layer int, r compute.Routes) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range r.IDs {
		s.hits[layer*s.experts+int(e)]++
		s.weight[layer*s.experts+int(e)] += float64(r.Weights[i])
	}
}

func (s *routeStats) setSpeed(tps float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tps > 0 && !math.IsInf(tps, 0) {
		s.speed = tps
	}
}

// Tiers returns a snapshot of where the experts are and how often they were hit. Without
// tiers every expert is read by the backend that holds the whole model (TierCPU on the CPU,
// TierVRAM on a GPU).
func (m *Model) Tiers() TierSnapshot {
	s := m.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := TierSnapshot{
		Layers: s.layers, Experts: s.experts,
		Tier: make([][]Tier, s.layers), Hits: make([][]uint64, s.layers),
		BytesPerTier: map[Tier]int64{}, HitsPerTier: map[Tier]uint64{},
		TokensPerSec: s.speed,
	}
	whole := TierCPU
	if _, ok := m.place.backend.(*gpu.Backend); ok {
		whole = TierVRAM
	}
	var tiers []experts.Tier
	blob := m.info.ExpertBytes / int64(max(s.layers*s.experts, 1))
	if c := m.place.cache; c != nil {
		cs := c.Snapshot()
		tiers = cs.Tier
		st := cs.Stats
		snap.Swaps = st.Swaps
		snap.DecodeHitsPerTier = map[Tier]uint64{}
		for t, n := range st.Routed {
			snap.HitsPerTier[Tier(t)] = n
		}
		for t, n := range st.Decode {
			snap.DecodeHitsPerTier[Tier(t)] = n
		}
		snap.Cache = &CacheActivity{
			VRAMSlots: st.DeviceSlots, PinnedSlots: st.PinnedSlots, PCIeReads: st.PCIe, PCIeShare: st.PCIeShare, Streamed: st.Streamed, ColdReads: st.ColdReads, OverlappedRounds: st.Overlapped,
			FillBytes: st.FillBytes, FillTime: st.FillTime,
			WaitRoutes: st.WaitRoutes, CPUMisses: st.CPUMisses, Uploads: st.Uploads,
			DecodeTokens: st.DecodeSteps, DecodeWaitRoutes: st.DecodeHost.WaitRoutes, DecodeCPUMisses: st.DecodeHost.CPUMisses, DecodeUploads: st.DecodeHost.Uploads,
			DecodeMissesLag: st.DecodeHost.MissesLag, DecodeAfterMisses: st.DecodeHost.AfterMisses,
			HelperSlots: st.HelperSlots, Helpers: st.Helpers, HelperResults: st.HelperResults,
		}
		pl := m.place
		if pl.arena != nil {
			snap.Cache.ArenaBytes, snap.Cache.ArenaFill = pl.fill.Bytes, pl.fill.Duration
			snap.Cache.ArenaUnbuffered, snap.Cache.ArenaLocked = pl.fill.Unbuffered, pl.fill.Locked
			snap.Cache.ArenaFromPack, snap.Cache.ArenaUnmapped = pl.pack != nil, pl.fill.Unmapped
			snap.Cache.ArenaNotPinned = pl.arenaNotPinned
		}
		snap.Cache.PinnedBudget, snap.Cache.PinnedUsed = pl.pins.limit, pl.pins.used
		snap.Cache.Notes = slices.Clone(pl.notes)
		snap.Cache.Verify = slices.Clone(pl.verify)
	}
	for l := range s.layers {
		snap.Tier[l] = make([]Tier, s.experts)
		snap.Hits[l] = append([]uint64(nil), s.hits[l*s.experts:(l+1)*s.experts]...)
		for e := range s.experts {
			t := whole
			if tiers != nil {
				t = Tier(tiers[l*s.experts+e])
			}
			snap.Tier[l][e] = t
			snap.BytesPerTier[t] += blob
			if tiers == nil {
				snap.HitsPerTier[t] += snap.Hits[l][e]
			}
		}
	}
	dev := "ram"
	if whole == TierVRAM {
		dev = "vram"
	}
	snap.Memory = []MemoryUse{{Device: dev, Kind: "weights", Bytes: m.info.NonExpertBytes - m.place.embdInHost}}
	if m.place.embdInHost > 0 {
		snap.Memory = append(snap.Memory, MemoryUse{Device: "ram", Kind: "token embeddings", Bytes: m.place.embdInHost})
	}
	if tiers == nil {
		snap.Memory = append(snap.Memory, MemoryUse{Device: dev, Kind: "experts", Bytes: m.info.ExpertBytes})
	} else {
		pinned := "pinned"
		if m.place.arenaNotPinned != "" {
			pinned = "not pinned" // the pinned budget could not hold the arena
		}
		snap.Memory = append(snap.Memory,
			MemoryUse{Device: "vram", Kind: "expert cache", Bytes: snap.BytesPerTier[TierVRAM]},
			MemoryUse{Device: "ram", Kind: pinned, Bytes: snap.BytesPerTier[TierPinned]})
		if c := snap.Cache; c != nil {
			for h, n := range c.HelperSlots {
				if n > 0 {
					snap.Memory = append(snap.Memory, MemoryUse{Device: fmt.Sprintf("helper gpu %d", h+1), Kind: "helper experts", Bytes: int64(n) * blob})
				}
			}
		}
	}
	kvb := kvBytes(m.info, m.cfg.MaxContext, kvType(m.cfg))
	snap.Memory = append(snap.Memory, MemoryUse{Device: dev, Kind: "kv cache", Bytes: kvb})
	if m.info.RecurrentBytes > 0 {
		snap.Memory = append(snap.Memory, MemoryUse{Device: dev, Kind: "recurrent state", Bytes: m.info.RecurrentBytes})
	}
	return snap
}
