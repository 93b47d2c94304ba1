package gui

import "time"

// phaseMeter turns the engine's progress reports into what the loading screen shows:
// the fraction of the current phase and its speed in MB/s.
type phaseMeter struct {
	phase      string
	start      time.Time
	startBytes int64
	last       loadProgress
	done       []phaseDone
}

// phaseDone is a finished phase: how long it took and how fast it went.
type phaseDone struct {
	Phase string
	Took  time.Duration
	MBps  float64
}

// loadProgress is the loading screen's view of one moment of Open.
type loadProgress struct {
	Phase    string
	Fraction float64 // 0..1 of this phase; -1 when the total is unknown
	MBps     float64 // bytes per second in this phase, in MB (10^6)
	Done     int64
	Total    int64
	Finished []phaseDone // the phases before this one
}

// update takes one report from the engine at time now.
func (m *phaseMeter) update(phase string, done, total int64, now time.Time) loadProgress {
	if phase != m.phase {
		if m.phase != "" {
			m.done = append(m.done, phaseDone{Phase: m.phase, Took: now.Sub(m.start), MBps: m.last.MBps})
		}
		m.phase, m.start, m.startBytes = phase, now, done
	}
	p := loadProgress{Phase: phase, Done: done, Total: total, Fraction: -1, Finished: append([]phaseDone(nil), m.done...)}
	if total > 0 {
		p.Fraction = min(1, max(0, float64(done)/float64(total)))
	}
	if el := now.Sub(m.start).Seconds(); el > 0.05 && done > m.startBytes {
		p.MBps = float64(done-m.startBytes) / el / 1e6
	}
	m.last = p
	return p
}

// phaseLabel says what a phase is doing in plain words.
func phaseLabel(phase string) string {
	switch phase {
	case "":
		return "Starting…"
	case "demo":
		return "Making the demo model"
	case "mapping":
		return "Mapping the model file"
	case "weights":
		return "Placing the weights"
	case "vram-fill":
		return "Filling the GPU expert cache"
	case "ram-copy":
		return "Copying experts into RAM"
	case "ready":
		return "Ready"
	}
	return phase
}
