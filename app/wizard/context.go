package wizard

import "fmt"

// Context and KV type rules. Each is a judgement, kept here so they can be read and argued
// with in one place.
const (
	// longContext is where a context is long enough for long documents and agent sessions:
	// below it, int8's small error is worth a longer context; at or above it, f16 stays.
	longContext = 32768
	// kvShareOfRAM: on the CPU the KV cache may take this share of the RAM Strata may use
	// (a quarter, as the engine's default context takes a quarter of the available RAM).
	kvShareOfRAM = 4
	// kvShareOfVRAM: on the GPU the KV cache may take this share of the VRAM beside the
	// non-expert weights; the rest is expert slots (chooseGPUContext says why a quarter).
	kvShareOfVRAM = 4
)

// kvPerTokenInt8 is the int8 cache of one token: a byte a value and a float32 scale per 32.
func kvPerTokenInt8(m Model) int64 {
	if m.KVInt8BytesPerToken > 0 {
		return m.KVInt8BytesPerToken
	}
	return kvPerToken(m) * 9 / 16
}

// contextLadder are the contexts the modes try, longest first: the model's limit, then
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

// contextChoice is what a mode gives the session: the context, the KV type, the cache's bytes
// and why, in words.
type contextChoice struct {
	tokens int
	kvType string
	bytes  int64
	reason string
}

// chooseContext picks the longest context of the ladder whose cache fits in room, at f16, or
// at int8 when f16 would stop short of a long context and int8 reaches further. roomWords says
// where room comes from and where says where the cache lives (" in VRAM" or ""). It reports
// false when not even the shortest context fits at int8.
func chooseContext(m Model, room int64, roomWords, where string) (contextChoice, bool) {
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
		return contextChoice{}, false
	case int8 > f16 && f16 < longContext:
		bytes := int64(int8) * kvPerTokenInt8(m)
		short := "no context worth having"
		if f16 > 0 {
			short = fmt.Sprintf("only %d tokens", f16)
		}
		return contextChoice{int8, "int8", bytes, fmt.Sprintf("Context: %d tokens%s with the int8 KV cache%s (%s): with f16 %s would fit in the %s kept for it (%s); int8 keeps keys and values in 8 bits with a scale per 32, nearly halving the cache for a small error",
			int8, limitWords(int8), where, gibStr(bytes), short, gibStr(room), roomWords)}, true
	}
	bytes := int64(f16) * kvPerToken(m)
	why := fmt.Sprintf("Context: %d tokens%s with the f16 KV cache%s (%s), within the %s kept for it (%s)", f16, limitWords(f16), where, gibStr(bytes), gibStr(room), roomWords)
	if int8 > f16 {
		why += fmt.Sprintf("; the int8 KV cache (settings) would allow %d tokens", int8)
	}
	return contextChoice{f16, "f16", bytes, why}, true
}

// chooseCPUContext picks the CPU-only mode's context: the cache gets a quarter of the RAM
// Strata may use, and no more than the whole model leaves when it fits in RAM, so the cache
// never pushes it out. When not even the shortest context fits, it takes that one anyway and
// says so.
func chooseCPUContext(m Model, hostBudget, modelBytes int64) contextChoice {
	room, roomWords := hostBudget/kvShareOfRAM, fmt.Sprintf("a quarter of the %s of RAM Strata may use", gibStr(hostBudget))
	if modelBytes <= hostBudget && hostBudget-modelBytes < room {
		room, roomWords = hostBudget-modelBytes, fmt.Sprintf("what the %s of RAM Strata may use leaves beside the whole model", gibStr(hostBudget))
	}
	if cc, ok := chooseContext(m, room, roomWords, ""); ok {
		cc.reason += "."
		return cc
	}
	c := min(minContext, m.ContextLimit)
	return contextChoice{c, "f16", int64(c) * kvPerToken(m), fmt.Sprintf("Context: %d tokens with the f16 KV cache (%s), the least Strata plans for: %s (%s) holds less; free RAM for longer chats.",
		c, gibStr(int64(c)*kvPerToken(m)), roomWords, gibStr(max(room, 0)))}
}

// chooseGPUContext picks the GPU modes' context from room, the VRAM left beside the
// non-expert weights and the working memory, which the cache shares with the expert slots:
// every MiB of cache is expert slots lost, and each lost slot is a miss served from RAM or the
// drive. So the cache gets a quarter of room (three quarters stay slots, and a 12 GB card
// still reaches 32k tokens of a 30B-A3B's cache at int8), or all that is left beside the whole
// model when every expert fits anyway; a model that fits whole keeps every expert when what it
// leaves holds a long context. When not even the shortest context fits in that share,
// the shortest one that fits in the whole room is taken; false when none does.
func chooseGPUContext(m Model, room int64) (contextChoice, bool) {
	spare, spareWords := room-m.ExpertBytes, "what the card has left beside the whole model and its working memory"
	if spare >= 0 {
		// Every expert fits: a long context in what they leave costs no slot at all.
		if cc, ok := chooseContext(m, spare, spareWords, " in VRAM"); ok && cc.tokens >= min(longContext, m.ContextLimit) {
			return cc, true
		}
	}
	share, words := room/kvShareOfVRAM, fmt.Sprintf("a quarter of the %s the card has beside the non-expert weights and working memory, as the rest holds expert slots", gibStr(room))
	if spare > share {
		share, words = spare, spareWords
	}
	if cc, ok := chooseContext(m, share, words, " in VRAM"); ok {
		return cc, true
	}
	c := min(minContext, m.ContextLimit)
	for _, t := range []struct {
		kv       string
		perToken int64
	}{{"f16", kvPerToken(m)}, {"int8", kvPerTokenInt8(m)}} {
		if bytes := int64(c) * t.perToken; bytes <= room {
			return contextChoice{c, t.kv, bytes, fmt.Sprintf("Context: %d tokens with the %s KV cache in VRAM (%s), the least Strata plans for: %s (%s) holds less, so the cache takes expert slots",
				c, t.kv, gibStr(bytes), words, gibStr(max(share, 0)))}, true
		}
	}
	return contextChoice{}, false
}

// gpuContextWords says what the GPU modes' context costs: its cache sits in VRAM beside the
// expert slots, so when not every expert fits it takes slots.
func gpuContextWords(b Budget, reason string) string {
	if b.BytesPerExpert > 0 && b.KVBytes > 0 && b.ExpertSlots < b.TotalExperts {
		reason += fmt.Sprintf("; it costs about %d expert slots", b.KVBytes/b.BytesPerExpert)
	}
	return reason + "."
}
