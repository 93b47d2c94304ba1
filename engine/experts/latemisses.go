package experts

import (
	"log/slog"
	"time"

	"strata/engine/compute"
)

// A tiered decode layer used to run in this order on the host: wait for the routes, queue
// the VRAM hits, compute the CPU's misses, upload them, then queue the next layer's
// attention, whose ops a GPU holds back as a graph until the next routes are read. The
// device idled through that queuing and the graph's launch. With AsyncMisses the misses run
// on the host pool while the host's goroutine goes on: the device's stream queues the add
// of their sum at once and holds it until the pool says the rows are ready (the add reads
// them in page-locked memory, with no copy into VRAM between), and the next layer's
// attention is launched behind it before the host waits for the misses.

// lateWriter is a device whose stream can wait for rows the host fills later (the GPU
// backend's LateRows and AddLate, on a driver with stream waits). Ready must be called
// for every LateRows, whatever else fails, or the device's stream waits forever.
type lateWriter interface {
	LateRows(n int) (*compute.LateRows, error)
	AddLate(dst compute.Buf, r *compute.LateRows) error
}

// missesAhead says whether layer l's CPU misses of an n-token call may run beside the
// host's queuing of what follows. Only decode steps, whose misses take a fraction of a
// millisecond; not a step's last layer, so that the step's errors and the adaptive swaps
// after it see every miss done; and not with helpers, whose results wait on the host too.
func (c *Cache) missesAhead(l, n int, onHelpers bool) bool {
	if !c.cfg.AsyncMisses || c.lateRefused || n != 1 || onHelpers || l == c.sh.Layers-1 {
		return false
	}
	_, ok := c.dev.(lateWriter)
	return ok
}

// startMisses hands the device rows for layer L's misses, starts computing them into those
// rows on the host pool (x is in hostXs, from readX), and returns the rows for addLate;
// nil, having started nothing, when the device has no rows to give.
func (c *Cache) startMisses(L *layerCache, pinCPU, cold []entry, n, H int) *compute.LateRows {
	rows, err := c.dev.(lateWriter).LateRows(n * H)
	if err != nil {
		// A driver without stream waits refuses every time: finish the misses first from
		// now on, as without AsyncMisses.
		c.lateRefused = true
		slog.Warn("experts: CPU misses are computed before the next layer is queued", "err", err)
		return nil
	}
	// On a worker of the host pool, not a goroutine of its own: the pool's workers spin
	// between a step's products and hold the scheduler's Ps, where a new goroutine would
	// wait for one until the host blocks.
	routesAt := c.routesAt
	c.misses = c.host.Pool().Go(func() {
		t0 := time.Now()
		func() {
			defer rows.Ready() // whatever happens: the stream waits for it
			c.hostMisses(L, rows.Rows, pinCPU, cold, n, H)
		}()
		c.readyAt = time.Now()
		took, lag := c.readyAt.Sub(t0), t0.Sub(routesAt)
		c.mu.Lock() // after Ready: a holder of c.mu may be waiting for the stream
		c.addHost(n, func(h *HostTime) { h.CPUMisses += took; h.MissesLag += lag })
		c.mu.Unlock()
	})
	return rows
}

// addLate queues the late add of the misses' sum into dst, then starts the device on what
// is queued. Where the device refuses the late add, the sum is uploaded and added once the
// misses are done.
func (c *Cache) addLate(dst compute.Buf, rows *compute.LateRows, n, H int) {
	t0 := time.Now()
	if err := c.dev.(lateWriter).AddLate(dst, rows); err != nil {
		// A stream that cannot wait for the host (a driver may lack the waits on host
		// memory): upload the sum once the misses are done, and finish them first from
		// now on.
		c.lateRefused = true
		slog.Warn("experts: CPU misses are computed before the next layer is queued", "err", err)
		c.waitMisses()
		c.dev.Write(c.devOut, rows.Rows)
		c.dev.Add(dst, c.devOut, n*H)
	}
	c.dev.Flush()
	up := time.Since(t0)
	c.mu.Lock()
	c.addHost(n, func(h *HostTime) { h.Uploads += up })
	c.mu.Unlock()
}

// waitMisses waits for the misses started by the last startMisses, if they still run,
// joining the pool's work on them. Before that it starts the device on what the host has
// queued since (the next layer's attention, held for a graph), so that it runs as soon as
// the misses land.
func (c *Cache) waitMisses() {
	if c.misses == nil {
		return
	}
	c.dev.Flush()
	c.misses()
	c.misses = nil
}

// FinishMisses waits for CPU misses still running. A step that failed after a layer's
// misses started leaves them running, and the device's stream waiting for them: the owner
// calls it before it closes the device or the host pool.
func (c *Cache) FinishMisses() { c.waitMisses() }
