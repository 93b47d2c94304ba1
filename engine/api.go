// Package engine is Strata's inference engine behind one small API: Open a GGUF model,
// start a Session, Chat with it (tokens stream through a callback), and read a Tiers
// snapshot for the tier map. The GUI, the CLI and any future server are thin callers of it;
// the engine knows nothing of them.
package engine

import (
	"fmt"
	"time"

	"strata/engine/experts"
)

// Progress reports a slow phase of Open (and of reloads): what is happening and how far.
type Progress struct {
	Phase string // "mapping", "weights", "vram-fill", "ram-copy", "ready"
	Done  int64  // bytes (or steps) done
	Total int64  // bytes (or steps) in all; 0 when unknown
}

// ModelInfo is what the model picker's card shows.
type ModelInfo struct {
	Path         string
	Name         string
	Architecture string
	FileBytes    int64
	Quantization string // dominant weight type, e.g. "Q4_K"
	TotalParams  int64
	ActiveParams int64 // per token: non-expert weights plus the routed experts
	Layers       int
	Heads        int
	KVHeads      int
	HeadDim      int
	// RingLayers are sliding-window layers whose KV cache holds only RingKeep positions
	// whatever the context (gpt-oss: half of them).
	RingLayers, RingKeep int
	// RecurrentLayers (Gated DeltaNet: qwen35moe, qwen3next) hold no KV cache but a state of
	// fixed size: RecurrentBytes per session, its checkpoints included.
	RecurrentLayers int
	RecurrentBytes  int64
	Experts         int
	ExpertsUsed     int
	ContextLength   int // the model's trained context
	// ContextLimit is the most context the model takes (--max-context above it is refused):
	// ContextLength, or with YaRN configured in the file its factor x original context.
	ContextLimit   int
	Vocab          int
	ExpertBytes    int64 // all routed-expert weights
	NonExpertBytes int64 // everything else
	// DecodeBytesPerToken is the weight bytes one decoded token reads: every non-expert
	// matrix, one embedding row and the routed experts' share.
	DecodeBytesPerToken int64
	// DeltaKeyDim and ConvKernel are the Gated DeltaNet layers' key head size and conv taps
	// (0 without such layers), which the GPU kernels bound.
	DeltaKeyDim, ConvKernel int
}

// Role of a chat message.
type Role string

// Chat roles, as chat templates name them.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool" // a tool's result, answering an assistant's ToolCall
)

// Message is one turn of a conversation.
type Message struct {
	Role     Role
	Content  string
	Thinking string // the reasoning part of an assistant turn, kept apart from Content
	// ToolCalls are the functions an assistant turn called; ToolName names the function
	// whose result a RoleTool message holds. Templates without tools ignore both.
	ToolCalls []ToolCall
	ToolName  string
}

// ToolCall is one function call of an assistant turn.
type ToolCall struct {
	Name      string
	Arguments string // a JSON object
}

// Sampling controls how the next token is chosen. Zero Temperature is greedy.
type Sampling struct {
	Temperature   float32
	TopK          int     // 0 = off
	TopP          float32 // 0 or 1 = off
	MinP          float32 // 0 = off
	RepeatPenalty float32 // 0 or 1 = off
	RepeatLastN   int     // window for the penalty; 0 = 64
	Seed          uint64
	MaxTokens     int  // 0 = until end of turn or the context is full
	IgnoreEOS     bool // keep generating past end-of-turn tokens (benchmarks)
}

// SessionOptions configure one conversation's state.
type SessionOptions struct {
	// EnableThinking is passed to templates that understand it (Qwen3). Nil = template default.
	EnableThinking *bool
	// ContextPolicy is what Chat does with a conversation that no longer fits the context.
	ContextPolicy ContextPolicy
}

// ContextPolicy is what Chat does when the conversation reaches the context length. Every
// caller (the app, strata chat, the server) shares it through SessionOptions.
type ContextPolicy string

const (
	// ContextStop (the default) refuses the turn with ErrContextFull: the user starts a new
	// chat or shortens this one.
	ContextStop ContextPolicy = "stop"
	// ContextDropOldest leaves the oldest turns out of what the model sees, keeping the
	// system prompt and the newest message, until the conversation fits with room for an
	// answer; Result.Dropped says how many.
	ContextDropOldest ContextPolicy = "drop-oldest"
)

// ParseContextPolicy reads a policy as the flag and the settings file write it ("" is stop).
func ParseContextPolicy(s string) (ContextPolicy, error) {
	switch p := ContextPolicy(s); p {
	case "", ContextStop:
		return ContextStop, nil
	case ContextDropOldest:
		return p, nil
	}
	return "", &ConfigError{Flag: "context-full", Msg: fmt.Sprintf("%q is not one of stop, drop-oldest", s)}
}

// Token is one generated token as it streams out.
type Token struct {
	ID       int
	Text     string // whole UTF-8 characters only; may be empty while a character is incomplete
	Thinking bool   // part of the model's reasoning, not of the answer
}

// Timings of one generation.
type Timings struct {
	PromptTokens    int // prompt tokens computed by this call
	CachedTokens    int // prompt tokens reused from the session's cache (not in PromptTokens)
	GeneratedTokens int
	Prefill         time.Duration
	Decode          time.Duration
}

// PrefillTokensPerSec is prompt tokens per second of prefill.
func (t Timings) PrefillTokensPerSec() float64 {
	if t.Prefill <= 0 {
		return 0
	}
	return float64(t.PromptTokens) / t.Prefill.Seconds()
}

// DecodeTokensPerSec is generated tokens per second after the first.
func (t Timings) DecodeTokensPerSec() float64 {
	if t.Decode <= 0 || t.GeneratedTokens < 2 {
		return 0
	}
	return float64(t.GeneratedTokens-1) / t.Decode.Seconds()
}

// StopReason says why generation ended.
type StopReason string

// Why a generation stopped.
const (
	StopEndOfTurn StopReason = "end_of_turn"
	StopMaxTokens StopReason = "max_tokens"
	StopContext   StopReason = "context_full"
	StopCancelled StopReason = "cancelled"
)

// Result of one Chat or Generate call.
type Result struct {
	Tokens   []int
	Text     string // the answer
	Thinking string // the reasoning part, if the model produced one
	Stop     StopReason
	Timings  Timings
	// Dropped is how many of the oldest messages Chat left out to fit the context
	// (ContextDropOldest); the caller tells the user.
	Dropped int
	// Steps is where each decoded token's time went, with STRATA_STEP_TIMING=1 set when
	// the model was opened (nil otherwise).
	Steps []StepTiming
}

// StepTiming is where one decoded token's time went: the engine's parts, and on a GPU
// the backend's view of the forward pass (zero on the CPU).
type StepTiming struct {
	Forward time.Duration // the forward pass, the logits' download included
	Sample  time.Duration // choosing the token from the logits
	Emit    time.Duration // detokenising, the caller's callback and the bookkeeping
	// Record: host time queuing the step's ops before the last launch; Launch: host time
	// in graph launches; GPU: device time of the launched work; GPUSpan: from the first
	// launch's start on the device to the logits on the host; Read: host time waiting for
	// the device and downloading.
	Record, Launch, GPU, GPUSpan, Read time.Duration
	Segments, Graphs, Ops              int // segments run, of them graphs, ops queued
}

// Tier is where one routed expert lives.
type Tier uint8

// Tiers from fastest to slowest.
const (
	TierVRAM   Tier = iota // a slot of the main GPU's expert cache
	TierHelper             // a slot on a helper GPU
	TierPinned             // page-locked host RAM
	TierCold               // the model file on the SSD
	TierCPU                // everything on the CPU: the expert is read from mapped RAM
)

func (t Tier) String() string { return experts.Tier(t).String() }

// TierSnapshot is the tier map's picture of the model's memory at one moment.
type TierSnapshot struct {
	Layers, Experts int
	Tier            [][]Tier   // [layer][expert]
	Hits            [][]uint64 // routing count since load, [layer][expert]
	BytesPerTier    map[Tier]int64
	HitsPerTier     map[Tier]uint64
	Swaps           uint64
	TokensPerSec    float64 // decode speed of the generation being written, else of the last one
	Memory          []MemoryUse
	// DecodeHitsPerTier counts single-token steps only (HitsPerTier includes prompts).
	DecodeHitsPerTier map[Tier]uint64
	Cache             *CacheActivity // nil unless the experts are tiered
}

// CacheActivity is what the expert cache did since load: its size, how many misses the GPU
// read over PCIe or had streamed in, and where the host's time went.
type CacheActivity struct {
	VRAMSlots, PinnedSlots int
	PCIeReads, Streamed    uint64
	PCIeShare              float64 // the share of pinned misses the GPU reads over PCIe now (tuned with --pcie-frac auto)
	ColdReads              uint64  // streamed cold experts read around the page cache
	OverlappedRounds       uint64  // rounds of streamed experts copied beside the GPU's kernels (uploads then count queueing only)
	FillBytes              int64
	FillTime               time.Duration
	WaitRoutes             time.Duration // waiting for each layer's routing result
	CPUMisses              time.Duration // computing misses on the CPU pool
	Uploads                time.Duration // streaming experts and miss results to the GPU
	// The same three for single-token steps only, over DecodeTokens of them.
	DecodeTokens                                     uint64
	DecodeWaitRoutes, DecodeCPUMisses, DecodeUploads time.Duration
	// Decode steps with late misses: from a layer's routes on the host to its misses
	// starting, and from the misses done to the next layer's routes on the host.
	DecodeMissesLag, DecodeAfterMisses time.Duration
	HelperSlots                        [2]int        // expert slots on helper GPUs 1 and 2
	Helpers                            time.Duration // sending inputs to the helpers and their results back
	HelperResults                      time.Duration // of that, waiting for the results and bringing them back

	// The RAM arena of the pinned (tiered) or resident experts.
	ArenaBytes      int64
	ArenaFill       time.Duration
	ArenaUnbuffered bool // filled with unbuffered reads (else through the page cache)
	ArenaLocked     bool // page-locked (registered with the GPU, or locked by the OS)
	ArenaFromPack   bool // read from experts.bin rather than the GGUF
	ArenaUnmapped   bool // filled before the model file was mapped (no page-cache copy)
	// ArenaNotPinned says why the pinned expert tier stayed in plain RAM ("" when the
	// pinned budget held it): the tier map and bench show it as "not pinned".
	ArenaNotPinned string
	// PinnedBudget and PinnedUsed are the page-locked host memory cap (0: none) and what
	// Open counted against it.
	PinnedBudget, PinnedUsed int64

	Notes  []string // what the tiers could not do as planned
	Verify []string // checksums of the VRAM slots and the arena, with --verify
}

// MemoryUse is one bar segment of the tier map: what uses how much of which memory.
type MemoryUse struct {
	Device string // "vram", "ram", "helper gpu 1", "helper gpu 2"
	Kind   string // "weights", "expert cache", "kv cache", "recurrent state", "pinned", "not pinned" (the
	// pinned tier in plain RAM: the pinned budget could not hold it), "helper experts",
	// "token embeddings" (the table in pinned RAM, tiered on a GPU), "other"
	Bytes int64
}
