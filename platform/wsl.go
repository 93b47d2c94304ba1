package platform

import "strings"

// WSLPinnedBudgetBytes is about how much page-locked host memory the GPU driver grants all of
// a WSL2 VM together: pinning more fails or silently falls back to pageable copies.
const WSLPinnedBudgetBytes = 1 << 30

// WSL says whether Strata runs inside WSL2 and what that implies for the GPU.
type WSL struct {
	WSL2     bool     `json:"wsl2"`
	Evidence []string `json:"evidence,omitempty"` // what gave it away
	// PinnedBudgetBytes is the driver's page-locked host memory budget under WSL2 (0 outside
	// it: limited only by RAM).
	PinnedBudgetBytes int64  `json:"pinned_budget_bytes,omitempty"`
	Reason            string `json:"reason,omitempty"`
}

// detectWSL decides from the kernel's release string, the environment and whether /dev/dxg
// (the GPU paravirtualisation device) exists. WSL1 also says "Microsoft" in its kernel name
// but has no GPU device and no WSL2 kernel, so it is not reported as WSL2.
func detectWSL(osrelease string, getenv func(string) string, dxg bool) WSL {
	var w WSL
	rel := strings.ToLower(osrelease)
	kernel := strings.Contains(rel, "microsoft")
	if kernel {
		w.Evidence = append(w.Evidence, "kernel release "+strings.TrimSpace(osrelease))
	}
	env := false
	for _, k := range []string{"WSL_DISTRO_NAME", "WSL_INTEROP"} {
		if getenv(k) != "" {
			env = true
			w.Evidence = append(w.Evidence, k+" is set")
		}
	}
	if dxg {
		w.Evidence = append(w.Evidence, "/dev/dxg exists")
	}
	w.WSL2 = (kernel || env) && (dxg || strings.Contains(rel, "wsl2") || strings.Contains(rel, "microsoft-standard"))
	if w.WSL2 {
		w.PinnedBudgetBytes = WSLPinnedBudgetBytes
	}
	return w
}

// DetectWSL says whether this process runs inside WSL2, without probing anything else of the
// host (Probe also finds the GPUs, which takes longer).
func DetectWSL() WSL { return probeWSL() }
