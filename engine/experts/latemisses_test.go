package experts_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"strata/engine/compute"
	"strata/engine/compute/cpu"
	"strata/engine/experts"
)

// lateDevice is HostDevice with the GPU backend's late adds: AddLate's add is held until
// the device's next op or Flush, which first waits for the rows' Ready and then adds what
// they hold then, as the GPU's stream does at its wait. It counts the rows handed out,
// made ready and added.
type lateDevice struct {
	experts.HostDevice
	pending *lateAdd
	last    lateAdd // the rows handed out last
	early   int     // Writes of those rows before their Ready
	refuse  bool    // LateRows fails, as on a driver without stream waits
	// refuseAdd: AddLate fails, as a driver without waits on host memory would.
	refuseAdd bool
	asked     int // LateRows calls
	handed    int
	adds      int
	readies   atomic.Int64 // Ready runs on the cache's goroutine
}

type lateAdd struct {
	dst   compute.Buf
	rows  []float32
	ready chan struct{}
}

func (d *lateDevice) LateRows(n int) (*compute.LateRows, error) {
	d.asked++
	if d.refuse {
		return nil, errors.New("late device: no stream waits")
	}
	if d.pending != nil {
		return nil, errors.New("late device: new rows before the last late add ran")
	}
	d.handed++
	ready := make(chan struct{})
	rows := make([]float32, n)
	d.last = lateAdd{rows: rows, ready: ready}
	var once sync.Once
	return &compute.LateRows{
		Rows: rows,
		Ready: func() {
			if d.refuseAdd {
				time.Sleep(5 * time.Millisecond) // a slow host: an upload that does not wait for Ready comes first
			}
			once.Do(func() { d.readies.Add(1); close(ready) })
		},
		Dev: ready,
	}, nil
}

func (d *lateDevice) AddLate(dst compute.Buf, r *compute.LateRows) error {
	if d.refuseAdd {
		return errors.New("late device: no waits on host memory")
	}
	d.adds++
	d.pending = &lateAdd{dst: dst, rows: r.Rows, ready: r.Dev.(chan struct{})}
	return nil
}

// reach is the stream arriving at the held add: it waits for Ready, then adds what the rows
// hold then.
func (d *lateDevice) reach() {
	if p := d.pending; p != nil {
		d.pending = nil
		<-p.ready
		rows := d.HostDevice.NewBuf(len(p.rows))
		d.HostDevice.Write(rows, p.rows)
		d.HostDevice.Add(p.dst, rows, len(p.rows))
	}
}

// Flush starts the stream on what is queued: the held add runs before any op after it.
func (d *lateDevice) Flush() {
	d.reach()
	d.HostDevice.Flush()
}

func (d *lateDevice) Add(dst, x compute.Buf, n int) {
	d.reach()
	d.HostDevice.Add(dst, x, n)
}

func (d *lateDevice) Read(src compute.Buf, dst []float32) {
	d.reach()
	d.HostDevice.Read(src, dst)
}

func (d *lateDevice) Write(dst compute.Buf, src []float32) {
	d.reach()
	if len(src) > 0 && len(d.last.rows) > 0 && &src[0] == &d.last.rows[0] {
		select {
		case <-d.last.ready:
		default:
			d.early++ // the rows uploaded before the host made them ready
		}
	}
	d.HostDevice.Write(dst, src)
}

func (d *lateDevice) MoE(dst, x compute.Buf, gate, up, down compute.Weight, ffn *compute.ExpertFFN, r *compute.Routes) {
	d.reach()
	d.HostDevice.MoE(dst, x, gate, up, down, ffn, r)
}

func (d *lateDevice) WriteSlots(w compute.Weight, writes []compute.SlotWrite) error {
	d.reach()
	return d.HostDevice.WriteSlots(w, writes)
}

// deviceFor is the stand-in device a case runs on: the late device for the asyncMisses
// cases, else lapStandIn's (dev, or the lap device for the lap cases, returned too for
// checkLap). No case sets both asyncMisses and lap.
func deviceFor(t testing.TB, dev experts.HostDevice, tc tierCase, a *experts.Arena) (experts.Device, *lapDevice) {
	if tc.asyncMisses {
		return &lateDevice{HostDevice: dev, refuse: tc.lateRefused, refuseAdd: tc.lateAddRefused}, nil
	}
	return lapStandIn(t, tc, dev, a)
}

// lateCases are tier cases with AsyncMisses on the late device: pinned and cold misses,
// cold only, a PCIe share beside them, and adaptive swaps (which rewrite the arena the
// misses read).
func lateCases() []tierCase {
	return []tierCase{
		{name: "misses ahead: some + pinned", vram: 0.3, pin: 0.3, asyncMisses: true},
		{name: "misses ahead: cold only", vram: 0.4, asyncMisses: true},
		{name: "misses ahead: resident, all pinned", pin: 1, asyncMisses: true},
		{name: "misses ahead: some + pinned + pcie", vram: 0.3, pin: 0.4, pcie: 0.5, asyncMisses: true},
		{name: "misses ahead: adaptive swaps", vram: 0.3, pin: 0.2, adapt: 2, asyncMisses: true},
		{name: "misses ahead refused by the device", vram: 0.3, pin: 0.3, asyncMisses: true, lateRefused: true},
		{name: "misses ahead, the late add refused", vram: 0.3, pin: 0.3, asyncMisses: true, lateAddRefused: true},
	}
}

// checkLate checks what a case's decode steps did with the late rows: every row handed out
// was written and made ready, and a case with decode misses on the CPU used them; a device
// that refuses them, or their add, is asked once, and the misses are computed before the
// next layer from then on (the refused add's sum uploaded once they are done).
func checkLate(t *testing.T, tc tierCase, dev experts.Device, st experts.CacheStats) {
	t.Helper()
	d, ok := dev.(*lateDevice)
	if lag, after := st.DecodeHost.MissesLag, st.DecodeHost.AfterMisses; !ok || d.handed == 0 {
		if lag != 0 || after != 0 {
			t.Errorf("no late misses, yet %v from routes to misses and %v from misses to the next routes", lag, after)
		}
	} else if lag <= 0 || after <= 0 {
		t.Errorf("%d late misses, yet %v from routes to misses and %v from misses to the next routes", d.handed, lag, after)
	}
	if !ok {
		return
	}
	if tc.lateRefused {
		if d.asked != 1 || d.handed != 0 {
			t.Errorf("a device refusing late rows was asked %d times, handed out %d; want asked once", d.asked, d.handed)
		}
		return
	}
	if tc.lateAddRefused {
		if r := int(d.readies.Load()); d.handed != 1 || r != 1 || d.adds != 0 || d.early != 0 {
			t.Errorf("a device refusing late adds handed out %d rows (%d made ready, %d added late, %d uploaded before ready); want one, made ready, uploaded after", d.handed, r, d.adds, d.early)
		}
		return
	}
	if r := int(d.readies.Load()); d.adds != d.handed || r != d.handed || d.pending != nil {
		t.Errorf("late rows: %d handed out, %d added, %d made ready, one pending: %v", d.handed, d.adds, r, d.pending != nil)
	}
	cpuMisses := st.Decode[experts.TierCold] + st.Decode[experts.TierPinned] - st.PCIe
	if cpuMisses > 0 && d.handed == 0 {
		t.Errorf("%d decode misses on the CPU, none computed ahead", cpuMisses)
	}
	t.Logf("late rows: %d handed out for %d decode misses on the CPU", d.handed, cpuMisses)
}

// TestFinishMissesWaits: misses left running by a failed step are waited for, once, by
// FinishMisses (the engine calls it before it closes the device).
func TestFinishMissesWaits(t *testing.T) {
	sh := experts.Shape{Layers: 2, Experts: 4}
	tiers := make([]experts.Tier, sh.Count())
	dev := &lateDevice{HostDevice: experts.HostDevice{Backend: cpu.New(cpu.Options{Threads: 1})}}
	host := cpu.New(cpu.Options{Threads: 1})
	t.Cleanup(func() { dev.Close(); host.Close() })
	c, err := experts.NewCache(dev, host, experts.CacheConfig{Shape: sh, Tier: tiers, AsyncMisses: true})
	if err != nil {
		t.Fatal(err)
	}
	waits := 0
	experts.PendMisses(c, func() { waits++ })
	c.FinishMisses()
	c.FinishMisses()
	if waits != 1 {
		t.Errorf("misses left running waited for %d times, want once", waits)
	}
}
