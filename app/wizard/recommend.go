package wizard

import (
	"fmt"
	"math"
	"sort"

	"strata/engine"
	"strata/platform"
)

// Mode is where the experts live.
type Mode string

// The modes, from fastest to slowest.
const (
	ModeAllGPU   Mode = "all-gpu"  // every weight fits in VRAM (of the main GPU and helpers)
	ModeResident Mode = "resident" // the experts the GPUs do not hold are copied into one RAM arena
	ModeTiered   Mode = "tiered"   // they do not fit in RAM: VRAM, then pinned RAM, then the SSD
	ModeCPUOnly  Mode = "cpu-only" // no usable NVIDIA GPU
)

// Sizes.
const (
	kib = int64(1) << 10
	mib = kib << 10
	gib = mib << 10
)

// Sizing rules. Each is a judgement, kept here so they can be read and argued with in one place.
const (
	displayVRAMReserve  = 1 * gib   // the desktop, a browser and a video player on the card that drives a screen
	headlessVRAMReserve = 256 * mib // a card with no screen only needs the driver's slack
	freeVRAMMargin      = 256 * mib // apps already on the card may grow a little
	mainGPUOverhead     = 768 * mib // CUDA context, kernels, activations and prefill scratch on the main GPU
	helperGPUOverhead   = 512 * mib // CUDA context and staging buffers on a helper GPU
	minHelperBudget     = 1 * gib   // a helper GPU with less room than this for experts is not worth the traffic
	defaultContext      = 8192      // the context of a model that does not say its own
	minContext          = 2048
	kvPerLayerEstimate  = 2 * kib // f16 K and V of 4 KV heads of 128 per token and layer
	wslStaging          = 256 * mib
	slowLoadSeconds     = 60 // warn when the first load takes longer than this
	// Strata's CUDA kernels are built for compute capability 7.5 (Turing) and newer.
	minComputeMajor, minComputeMinor = 7, 5
)

// Budget holds the numbers behind a recommendation.
type Budget struct {
	MainGPU         int    `json:"main_gpu"`           // NVML index of the GPU that runs the model; -1 on the CPU
	VRAMReserve     int64  `json:"vram_reserve_bytes"` // left free on the main GPU for the desktop and other apps
	VRAMBudget      int64  `json:"vram_budget_bytes"`  // what Strata may take of the main GPU
	NonExpertBytes  int64  `json:"non_expert_bytes"`
	KVBytes         int64  `json:"kv_bytes"`       // KV cache for Context tokens
	KVType          string `json:"kv_type"`        // f16 or int8 (Config.KVType)
	OverheadBytes   int64  `json:"overhead_bytes"` // CUDA context, activations, scratch
	Context         int    `json:"context"`        // tokens the plan reserves KV cache for
	BytesPerExpert  int64  `json:"bytes_per_expert"`
	TotalExperts    int    `json:"total_experts"`      // layers x experts
	ExpertSlots     int    `json:"expert_slots"`       // experts the main GPU holds
	HelperGPUs      []int  `json:"helper_gpus"`        // NVML indices of the helper GPUs, in Config's device1, device2 order
	HelperSlots     []int  `json:"helper_slots"`       // experts each helper holds
	ComplementBytes int64  `json:"complement_bytes"`   // experts no GPU holds
	HostReserve     int64  `json:"host_reserve_bytes"` // RAM left for the rest of the PC
	HostBudget      int64  `json:"host_budget_bytes"`  // RAM Strata may use for experts
	PinnedTier      int64  `json:"pinned_tier_bytes"`  // tiered: the page-locked part of HostBudget
}

// GPUHeld is how many experts the GPUs hold under the recommended Config: the main GPU's
// slots and the helpers'.
func (b Budget) GPUHeld() int {
	held := b.ExpertSlots
	for _, s := range b.HelperSlots {
		held += s
	}
	return held
}

// Recommendation is the decision: the mode, the engine configuration that carries it out, and
// why.
type Recommendation struct {
	Mode   Mode          `json:"mode"`
	WSL2   bool          `json:"wsl2"` // the WSL2 adjustments apply
	Config engine.Config `json:"config"`
	Budget Budget        `json:"budget"`
	// Reasons say in plain words what was chosen and why; the first is one sentence that
	// stands on its own.
	Reasons  []string `json:"reasons"`
	Warnings []string `json:"warnings"`
	// WSL2Adjustments say in plain words what Config does differently under WSL2 (the
	// pinned budget, the PCIe share) and what the engine does there by itself (GPU contexts
	// first).
	WSL2Adjustments []string `json:"wsl2_adjustments,omitempty"`
}

// Recommend decides how to run model m on machine hw. It is a pure function: the same
// inputs always give the same answer.
func Recommend(hw Hardware, m Model) Recommendation {
	r := Recommendation{Config: engine.DefaultConfig(), WSL2: hw.WSL2}
	m, notes := normalize(m)
	r.Warnings = append(r.Warnings, notes...)

	b := &r.Budget
	b.MainGPU = -1
	b.NonExpertBytes = m.NonExpertBytes
	if m.Layers > 0 && m.Experts > 0 && m.ExpertBytes > 0 {
		b.TotalExperts = m.Layers * m.Experts
		b.BytesPerExpert = (m.ExpertBytes + int64(b.TotalExperts) - 1) / int64(b.TotalExperts)
	}
	b.HostReserve = hostReserve(hw.RAMTotal)
	avail := availableRAM(hw)
	b.HostBudget = max(0, avail-b.HostReserve)
	r.Config.HostReserveGiB = gibs(b.HostReserve)

	main, cc, why := placeMain(hw, m, b)
	if main != nil && m.GPULacks != "" {
		main, why = nil, m.GPULacks
	}
	if main == nil {
		recommendCPU(&r, hw, m, why)
		return r
	}
	placeHelpers(hw, b, main.Index)
	held := b.GPUHeld()
	if b.TotalExperts > 0 {
		b.ComplementBytes = m.ExpertBytes * int64(b.TotalExperts-held) / int64(b.TotalExperts)
	}

	c := &r.Config
	c.Backend = "cuda"
	c.ExpertCache = b.ExpertSlots
	if len(b.HelperSlots) > 0 {
		c.ExpertCacheDevice1 = b.HelperSlots[0]
	}
	if len(b.HelperSlots) > 1 {
		c.ExpertCacheDevice2 = b.HelperSlots[1]
	}
	c.VRAMReserveMiB = int(b.VRAMReserve / mib)
	c.MaxContext, c.KVType = b.Context, b.KVType

	gpuWords := describeGPUs(b, main)
	switch {
	case b.ComplementBytes == 0:
		r.Mode = ModeAllGPU
		r.Reasons = append(r.Reasons, fmt.Sprintf("All on the GPU: the whole model (%s) fits in %s, so nothing waits on RAM or the drive.",
			gibStr(m.NonExpertBytes+m.ExpertBytes), gpuWords))
	case b.ComplementBytes <= b.HostBudget:
		// Resident even where RAM would hold every expert in the file's pages: the page-locked
		// arena holds only the experts the GPU does not, and the GPU reads a share of them over
		// PCIe. On the H200, a balanced 30b-a3b synth decoded at 95-97 tok/s from the pinned arena
		// against 77-93 from the file's pages (cuda/BENCH.md, session 19).
		r.Mode = ModeResident
		recommendResident(&r, held, gpuWords, "")
	case slowDrive(hw.Drive) && b.ComplementBytes <= avail-minHostReserve(b.HostReserve):
		// Cold reads from a SATA SSD or a hard disk are far slower than RAM: give the PC less
		// spare RAM rather than read experts from the drive.
		b.HostReserve = minHostReserve(b.HostReserve)
		b.HostBudget = avail - b.HostReserve
		c.HostReserveGiB = gibs(b.HostReserve)
		r.Mode = ModeResident
		recommendResident(&r, held, gpuWords, fmt.Sprintf(" once the RAM kept for other programs is cut to %s, because the model's drive is slow", gibStr(b.HostReserve)))
		r.Warnings = append(r.Warnings, fmt.Sprintf("Only %s of RAM is left for other programs while the model is loaded: the model's drive (%s) is too slow to read experts from while answering.",
			gibStr(b.HostReserve), driveWords(hw)))
	default:
		r.Mode = ModeTiered
		recommendTiered(&r, hw, held, gpuWords)
	}
	r.Reasons = append(r.Reasons, vramWords(hw, b, main), gpuContextWords(*b, cc.reason))
	if r.Mode != ModeAllGPU {
		r.Reasons = append(r.Reasons, ramWords(hw, *b))
	}
	if hw.WSL2 {
		applyWSL2(&r, hw)
	}
	r.Warnings = append(r.Warnings, loadTimeWarning(hw, m)...)
	r.Warnings = append(r.Warnings, wslDriveWarning(hw)...)
	return r
}

// normalize fills what can be inferred and says what could not.
func normalize(m Model) (Model, []string) {
	var notes []string
	m.FileBytes, m.ExpertBytes, m.NonExpertBytes = max(0, m.FileBytes), max(0, m.ExpertBytes), max(0, m.NonExpertBytes)
	m.KVBytesPerToken = max(0, m.KVBytesPerToken)
	if m.ExpertBytes == 0 && m.NonExpertBytes == 0 {
		m.NonExpertBytes = m.FileBytes
		notes = append(notes, "The model's expert sizes are unknown, so it is planned as if every weight were needed for every token.")
	}
	if m.ExpertBytes > 0 && (m.Layers <= 0 || m.Experts <= 0) {
		m.NonExpertBytes += m.ExpertBytes
		m.ExpertBytes = 0
		notes = append(notes, "The model's expert count is unknown, so its experts are planned like ordinary weights.")
	}
	if m.ContextLength <= 0 {
		m.ContextLength = defaultContext
	}
	m.ContextLimit = max(m.ContextLimit, m.ContextLength)
	m.KVInt8BytesPerToken = max(0, m.KVInt8BytesPerToken)
	return m, notes
}

func availableRAM(hw Hardware) int64 {
	if hw.RAMAvailable > 0 {
		if hw.RAMTotal > 0 {
			return min(hw.RAMAvailable, hw.RAMTotal)
		}
		return hw.RAMAvailable
	}
	return hw.RAMTotal * 8 / 10
}

// hostReserve is the RAM kept for the rest of the PC: 8 GiB, less on small machines.
func hostReserve(total int64) int64 {
	switch {
	case total < 20*gib:
		return 3 * gib
	case total < 40*gib:
		return 6 * gib
	}
	return 8 * gib
}

// minHostReserve is the least the PC is left when the alternative is a slow drive.
func minHostReserve(reserve int64) int64 { return max(2*gib, reserve/2) }

// vramReserve is what Strata leaves free on a card.
func vramReserve(g GPU) int64 {
	if g.Display {
		return displayVRAMReserve
	}
	return headlessVRAMReserve
}

// vramBudget is what Strata may take of a card: its size less the reserve, and no more than is
// free now (less a margin).
func vramBudget(g GPU) int64 {
	b := g.VRAMTotal - vramReserve(g)
	if g.VRAMFree > 0 {
		b = min(b, g.VRAMFree-freeVRAMMargin)
	}
	return max(0, b)
}

func kvPerToken(m Model) int64 {
	if m.KVBytesPerToken > 0 {
		return m.KVBytesPerToken
	}
	return int64(m.Layers) * kvPerLayerEstimate
}

// placeMain picks the card with the largest budget, its context and KV type
// (chooseGPUContext) and sizes its expert cache. It returns nil and why when no card can run
// the model.
func placeMain(hw Hardware, m Model, b *Budget) (*GPU, contextChoice, string) {
	if len(hw.GPUs) == 0 {
		return nil, contextChoice{}, "no NVIDIA GPU was found"
	}
	best := -1
	for i, g := range hw.GPUs {
		if usable(g) && (best < 0 || vramBudget(g) > vramBudget(hw.GPUs[best])) {
			best = i
		}
	}
	if best < 0 {
		g := hw.GPUs[0]
		return nil, contextChoice{}, fmt.Sprintf("the %s is too old for Strata's GPU code (compute capability %d.%d; %d.%d or newer is needed)",
			g.Name, g.ComputeMajor, g.ComputeMinor, minComputeMajor, minComputeMinor)
	}
	g := &hw.GPUs[best]
	budget := vramBudget(*g)
	room := budget - m.NonExpertBytes - mainGPUOverhead // for the KV cache and the expert slots
	cc, ok := chooseGPUContext(m, room)
	if !ok {
		need := m.NonExpertBytes + int64(min(minContext, m.ContextLimit))*kvPerTokenInt8(m) + mainGPUOverhead
		return nil, cc, fmt.Sprintf("the largest GPU, %s, has %s for Strata, less than the %s its non-expert weights, KV cache and working memory need",
			g.Name, gibStr(budget), gibStr(need))
	}
	b.MainGPU, b.VRAMReserve, b.VRAMBudget = g.Index, vramReserve(*g), budget
	b.Context, b.KVBytes, b.KVType, b.OverheadBytes = cc.tokens, cc.bytes, cc.kvType, mainGPUOverhead
	if b.TotalExperts > 0 {
		b.ExpertSlots = int(min(int64(b.TotalExperts), (room-cc.bytes)/b.BytesPerExpert))
	}
	return g, cc, ""
}

// usable says whether Strata's kernels run on a card; an unknown capability is given the
// benefit of the doubt (the engine checks again when it creates the context).
func usable(g GPU) bool {
	if g.ComputeMajor == 0 {
		return true
	}
	return g.ComputeMajor > minComputeMajor || g.ComputeMajor == minComputeMajor && g.ComputeMinor >= minComputeMinor
}

// placeHelpers gives up to two other cards the experts the main GPU cannot hold, largest
// budget first.
func placeHelpers(hw Hardware, b *Budget, mainIndex int) {
	left := b.TotalExperts - b.ExpertSlots
	if left <= 0 || b.BytesPerExpert == 0 {
		return
	}
	var others []GPU
	for _, g := range hw.GPUs {
		if g.Index != mainIndex && usable(g) {
			others = append(others, g)
		}
	}
	sort.SliceStable(others, func(i, j int) bool { return vramBudget(others[i]) > vramBudget(others[j]) })
	for _, g := range others {
		if len(b.HelperSlots) == 2 || left == 0 {
			break
		}
		room := vramBudget(g) - helperGPUOverhead
		if room < minHelperBudget {
			continue
		}
		slots := int(min(int64(left), room/b.BytesPerExpert))
		b.HelperGPUs = append(b.HelperGPUs, g.Index)
		b.HelperSlots = append(b.HelperSlots, slots)
		left -= slots
	}
}

func recommendResident(r *Recommendation, held int, gpuWords, because string) {
	b := &r.Budget
	r.Config.ResidentExperts = true
	r.Config.ResidentBudgetGiB = gibs(b.HostBudget)
	how := "; the GPU reads a share of them over PCIe while the processor computes the rest"
	if r.WSL2 {
		how = "" // applyWSL2 turns the PCIe reads off
	}
	r.Reasons = append(r.Reasons, fmt.Sprintf("Resident: %s holds the %d most-used of %d experts, and the other %s fit in the %s of RAM Strata may use%s, so they are copied into RAM once and never read from the drive again%s.",
		gpuWords, held, b.TotalExperts, gibStr(b.ComplementBytes), gibStr(b.HostBudget), because, how))
}

func recommendTiered(r *Recommendation, hw Hardware, held int, gpuWords string) {
	b := &r.Budget
	r.Config.TieredExperts = true
	pinned := b.HostBudget
	if hw.WSL2 && hw.PinnedBudget > 0 {
		pinned = min(pinned, max(0, hw.PinnedBudget-wslStaging))
	}
	b.PinnedTier = pinned
	r.Config.HostBudgetGiB = gibs(pinned)
	cold := b.ComplementBytes - pinned
	r.Reasons = append(r.Reasons, fmt.Sprintf("Tiered: %s holds the %d most-used of %d experts, but the other %s do not fit in the %s of RAM Strata may use, so the next most-used go to RAM and the rarest %s are read from the drive when asked for.",
		gpuWords, held, b.TotalExperts, gibStr(b.ComplementBytes), gibStr(b.HostBudget), gibStr(cold)))
	switch {
	case slowDrive(hw.Drive):
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s of experts will be read from a slow drive (%s) while answering: expect slow replies. Moving the model to an NVMe SSD or adding RAM helps most.",
			gibStr(cold), driveWords(hw)))
	case hw.Drive == platform.DriveUnknown || hw.Drive == "":
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s of experts will be read from the drive while answering, and its speed is unknown: an NVMe SSD is needed for good speed.", gibStr(cold)))
	}
}

func recommendCPU(r *Recommendation, hw Hardware, m Model, why string) {
	b := &r.Budget
	r.Mode = ModeCPUOnly
	r.Config.Backend = "cpu"
	r.Config.ExpertCache = 0
	size := m.NonExpertBytes + m.ExpertBytes
	cc := chooseCPUContext(m, b.HostBudget, size)
	b.Context, b.KVBytes, b.KVType = cc.tokens, cc.bytes, cc.kvType
	r.Config.MaxContext, r.Config.KVType = cc.tokens, cc.kvType
	fits := size+b.KVBytes <= b.HostBudget
	where := "it fits in RAM"
	if !fits {
		where = "it does not fit in RAM, so part of it is read from the drive"
	}
	r.Reasons = append(r.Reasons, fmt.Sprintf("CPU only: %s, so the whole model (%s) runs on the processor and %s.", why, gibStr(size), where))
	r.Reasons = append(r.Reasons, ramWords(hw, *b), cc.reason)
	if !fits {
		w := fmt.Sprintf("The model (%s) is larger than the %s of RAM Strata may use: the rest is read from the drive for every token, which is slow", gibStr(size), gibStr(b.HostBudget))
		if slowDrive(hw.Drive) {
			w += fmt.Sprintf(", and this drive (%s) is slower still", driveWords(hw))
		}
		r.Warnings = append(r.Warnings, w+".")
	}
	if hw.WSL2 {
		r.Reasons = append(r.Reasons, "Under WSL2 no GPU adjustments are needed: nothing runs on the GPU.")
	}
	r.Warnings = append(r.Warnings, loadTimeWarning(hw, m)...)
	r.Warnings = append(r.Warnings, wslDriveWarning(hw)...)
}

// applyWSL2 sets the engine.Config fields WSL2 needs: the pinned budget the driver grants
// (the engine counts every page-locked allocation against it and falls back, with a log
// line, where one does not fit) and no PCIe reads of experts.
func applyWSL2(r *Recommendation, hw Hardware) {
	budget := hw.PinnedBudget
	if budget <= 0 {
		budget = platform.WSLPinnedBudgetBytes
	}
	r.Config.PinnedBudgetMiB = int(budget >> 20)
	r.Config.PCIeFrac = 0 // the GPU can only read pinned RAM over PCIe, and there is almost none
	r.WSL2Adjustments = []string{
		fmt.Sprintf("pinned RAM capped at %d MiB (--pinned-budget-mib %d): the driver grants all of WSL2 about %s; staging buffers shrink and the pinned expert tier stays in plain RAM when they do not fit", r.Config.PinnedBudgetMiB, r.Config.PinnedBudgetMiB, gibStr(budget)),
		"the GPU does not read experts from RAM over PCIe (--pcie-frac 0)",
		"every GPU context, the main card's and the helpers', is created before any weight, buffer or pinned memory (the engine always starts in this order)",
	}
	if len(r.Budget.HelperSlots) > 0 {
		r.WSL2Adjustments = append(r.WSL2Adjustments, "the helper GPUs' staging buffers and result rows count against the same cap: they shrink first, and their results come back a few tokens at a time if they must")
	}
	r.Reasons = append(r.Reasons, fmt.Sprintf("Running under WSL2, where the NVIDIA driver lets the whole VM pin only about %s of RAM: GPU contexts are created first, large pinned buffers are avoided, and the GPU does not read RAM directly.",
		gibStr(budget)))
	if r.Mode == ModeTiered {
		r.Warnings = append(r.Warnings, fmt.Sprintf("Under WSL2 the pinned RAM tier is limited to %s; the other experts come from the page cache or the drive. Running Strata on Windows directly avoids this limit.",
			gibStr(r.Budget.PinnedTier)))
	}
}

// wslDriveWarning: under WSL2 a Windows drive (/mnt/c) is reached through the 9p protocol,
// which reads large files several times slower than the Linux filesystem.
func wslDriveWarning(hw Hardware) []string {
	if !hw.WSL2 || hw.DriveFS != "9p" {
		return nil
	}
	return []string{"The model is on a Windows drive seen through WSL2 (/mnt/...), which reads slowly: copy it into the Linux filesystem (for example your home folder) for faster loads and cold reads."}
}

func loadTimeWarning(hw Hardware, m Model) []string {
	if hw.DriveMBps <= 0 || m.FileBytes <= 0 {
		return nil
	}
	secs := float64(m.FileBytes) / 1e6 / hw.DriveMBps
	if secs <= slowLoadSeconds {
		return nil
	}
	return []string{fmt.Sprintf("The first load reads %s from a drive that reads %.0f MB/s: about %.0f minutes.", gibStr(m.FileBytes), hw.DriveMBps, math.Ceil(secs/60))}
}

func slowDrive(c platform.DriveClass) bool {
	return c == platform.DriveSATASSD || c == platform.DriveSlow
}

func driveWords(hw Hardware) string {
	name := map[platform.DriveClass]string{platform.DriveSATASSD: "a SATA SSD", platform.DriveSlow: "a hard disk or similar", platform.DriveNVMe: "an NVMe SSD"}[hw.Drive]
	if name == "" {
		name = "speed unknown"
	}
	if hw.DriveMBps > 0 {
		return fmt.Sprintf("%s, %.0f MB/s", name, hw.DriveMBps)
	}
	return name
}

func describeGPUs(b *Budget, main *GPU) string {
	s := "the " + main.Name
	switch len(b.HelperGPUs) {
	case 0:
		return s
	case 1:
		return s + " with one helper GPU"
	}
	return fmt.Sprintf("%s with %d helper GPUs", s, len(b.HelperGPUs))
}

func vramWords(hw Hardware, b *Budget, main *GPU) string {
	s := fmt.Sprintf("VRAM: Strata takes %s of the %s's %s (GPU %d), keeping %s free for %s, for %s of non-expert weights, %s of KV cache for %d tokens, %s of working memory and %d expert slots of %s.",
		gibStr(b.VRAMBudget), main.Name, gibStr(main.VRAMTotal), main.Index, gibStr(b.VRAMReserve), map[bool]string{true: "the desktop", false: "other apps"}[main.Display],
		gibStr(b.NonExpertBytes), gibStr(b.KVBytes), b.Context, gibStr(b.OverheadBytes), b.ExpertSlots, mibStr(b.BytesPerExpert))
	for i, idx := range b.HelperGPUs {
		for _, g := range hw.GPUs {
			if g.Index == idx {
				s += fmt.Sprintf(" Helper GPU %d, the %s (GPU %d), has room for %d more experts (%s): it computes them itself and sends back only their results.", i+1, g.Name, g.Index, b.HelperSlots[i], gibStr(int64(b.HelperSlots[i])*b.BytesPerExpert))
			}
		}
	}
	return s
}

func ramWords(hw Hardware, b Budget) string {
	return fmt.Sprintf("RAM: %s in all, %s available; %s is kept for the rest of the PC, leaving %s for Strata.",
		gibStr(hw.RAMTotal), gibStr(availableRAM(hw)), gibStr(b.HostReserve), gibStr(b.HostBudget))
}

// gibs converts bytes to the GiB knobs, rounded down to a tenth so a budget is never exceeded.
func gibs(n int64) float64 { return math.Floor(float64(n)/float64(gib)*10) / 10 }

// gibStr writes a size for people: GiB with one decimal, MiB below 1 GiB.
func gibStr(n int64) string {
	if n > -gib && n < gib {
		return fmt.Sprintf("%d MiB", n/mib)
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/float64(gib))
}

func mibStr(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/float64(mib)) }
