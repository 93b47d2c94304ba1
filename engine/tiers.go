package engine

import (
	"math"
	"sync"

	"strata/engine/compute"
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

// Tiers returns a snapshot of where the experts are and how often they were hit. On the CPU
// backend every expert is read from the mapped model file.
func (m *Model) Tiers() TierSnapshot {
	s := m.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := TierSnapshot{
		Layers: s.layers, Experts: s.experts,
		Tier: make([][]Tier, s.layers), Hits: make([][]uint64, s.layers),
		BytesPerTier: map[Tier]int64{TierCPU: m.info.ExpertBytes},
		HitsPerTier:  map[Tier]uint64{},
		TokensPerSec: s.speed,
	}
	for l := range s.layers {
		snap.Tier[l] = make([]Tier, s.experts)
		snap.Hits[l] = append([]uint64(nil), s.hits[l*s.experts:(l+1)*s.experts]...)
		for e := range s.experts {
			snap.Tier[l][e] = TierCPU
			snap.HitsPerTier[TierCPU] += snap.Hits[l][e]
		}
	}
	snap.Memory = []MemoryUse{
		{Device: "ram", Kind: "weights", Bytes: m.info.NonExpertBytes},
		{Device: "ram", Kind: "experts", Bytes: m.info.ExpertBytes},
	}
	return snap
}
