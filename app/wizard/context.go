package wizard

import (
	"fmt"

	"strata/engine"
)

// Context and KV type rules. Each is a judgement, kept here so they can be read and argued
// with in one place.
const (
	// longContext is where a context is long enough for long documents and agent sessions:
	// below it, int8's small error is worth a longer context; at or above it, f16 stays.
	longContext = 32768
	// kvShareOfRAM: on the CPU the KV cache may take this share of the RAM Strata may use
	// (a quarter, as the engine's default context takes a quarter of the available RAM).
	kvShareOfRAM = 4
)

// kvPerTokenInt8 is the int8 cache of one token: a byte a value and a float32 scale per 32.
func kvPerTokenInt8(m Model) int64 {
	if m.KVInt8BytesPerToken > 0 {
		return m.KVInt8BytesPerToken
	}
	return kvPerToken(m) * 9 / 16
}

// contextLadder are the contexts the CPU mode tries, longest first: the model's limit, then
// powers of two below it down to minContext (or the limit alone when it is shorter).
func contextLadder(limit int) []int {
	out := []int{limit}
	for c := 1 << 20; c >= minContext; c /= 2 {
		if c < limit {
			out = append(out, c)
		}
	}
	return out
}

// cpuContext is what the CPU-only mode gives the session: the context, the KV type, the
// cache's bytes and why, in words.
type cpuContext struct {
	tokens int
	kvType string
	bytes  int64
	reason string
}

// chooseCPUContext picks the longest context whose cache fits in the room kept for it (a
// quarter of the RAM Strata may use, and no more than the whole model leaves when it fits in
// RAM, so the cache never pushes it out), at f16, or at int8 when f16 would stop short of a
// long context and int8 reaches further.
func chooseCPUContext(m Model, hostBudget, modelBytes int64) cpuContext {
	room, roomWords := hostBudget/kvShareOfRAM, fmt.Sprintf("a quarter of the %s of RAM Strata may use", gibStr(hostBudget))
	if modelBytes <= hostBudget && hostBudget-modelBytes < room {
		room, roomWords = hostBudget-modelBytes, fmt.Sprintf("what the %s of RAM Strata may use leaves beside the whole model", gibStr(hostBudget))
	}
	longest := func(perToken int64) int {
		for _, c := range contextLadder(m.ContextLimit) {
			if int64(c)*perToken <= room {
				return c
			}
		}
		return 0
	}
	f16, int8 := longest(kvPerToken(m)), longest(kvPerTokenInt8(m))
	limitWords := func(c int) string {
		if c == m.ContextLimit {
			return ", the model's limit,"
		}
		return ""
	}
	switch {
	case f16 == 0 && int8 == 0:
		c := min(minContext, m.ContextLimit)
		return cpuContext{c, "f16", int64(c) * kvPerToken(m), fmt.Sprintf("Context: %d tokens with the f16 KV cache (%s), the least Strata plans for: %s (%s) holds less; free RAM for longer chats.",
			c, gibStr(int64(c)*kvPerToken(m)), roomWords, gibStr(max(room, 0)))}
	case int8 > f16 && f16 < longContext:
		bytes := int64(int8) * kvPerTokenInt8(m)
		short := "no context worth having"
		if f16 > 0 {
			short = fmt.Sprintf("only %d tokens", f16)
		}
		return cpuContext{int8, "int8", bytes, fmt.Sprintf("Context: %d tokens%s with the int8 KV cache (%s): with f16 %s would fit in the %s kept for it (%s); int8 keeps keys and values in 8 bits with a scale per 32, nearly halving the cache for a small error.",
			int8, limitWords(int8), gibStr(bytes), short, gibStr(room), roomWords)}
	}
	bytes := int64(f16) * kvPerToken(m)
	why := fmt.Sprintf("Context: %d tokens%s with the f16 KV cache (%s), within the %s kept for it (%s)", f16, limitWords(f16), gibStr(bytes), gibStr(room), roomWords)
	if int8 > f16 {
		why += fmt.Sprintf("; the int8 KV cache (settings) would allow %d tokens", int8)
	}
	return cpuContext{f16, "f16", bytes, why + "."}
}

// gpuContextWords says what the GPU modes' context costs: its cache sits in VRAM beside the
// expert slots, so a longer one takes slots.
func gpuContextWords(b Budget) string {
	s := fmt.Sprintf("Context: %d tokens with the f16 KV cache in VRAM (%s)", b.Context, gibStr(b.KVBytes))
	if b.BytesPerExpert > 0 && b.Context > 0 {
		s += fmt.Sprintf(": every %d tokens more would take about %d expert slots from the GPU", b.Context, b.KVBytes/b.BytesPerExpert)
	}
	if !engine.GPUInt8KV {
		s += "; the int8 KV cache runs on the CPU backend only for now"
	}
	return s + "."
}
