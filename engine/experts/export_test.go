package experts

// EagerAdapt makes c's adaptive passes swap in any expert routed more than the one it
// replaces: the fixture models route too few tokens for the product's rule (adapt.go) to
// find a swap that pays, and the tests want the swaps' bookkeeping exercised.
func EagerAdapt(c *Cache) { c.pays = func(hin, hout float32) bool { return hin > hout } }

// PendMisses leaves wait as c's CPU misses still running, as a step that failed after a
// layer's misses started does.
func PendMisses(c *Cache, wait func()) { c.misses = wait }
