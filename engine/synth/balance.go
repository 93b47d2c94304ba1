package synth

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"strata/engine/quant"
	"strata/engine/tokenizer"
)

// Balanced routers (Spec.HotQuarter). A synth's router input is almost a function of the
// token alone (the attention output is scaled down, see attnOutGain), and text repeats a
// few tokens a lot (a space, "e", "the"), so whatever experts those tokens pick get their
// share of every prompt: a router with no skew at all measures 45-46% in its hottest
// quarter on the profile's prompts (128 experts, 8 used), and the exponent the old
// --hot-quarter chose for 40% on independent tokens measured 49-51%. A trained router is
// balanced on the text it sees; so is this one: each layer's per-expert offsets (along the
// shared direction u) are solved so that the reference text's tokens, followed through
// the layers before (drift.go), load the experts as a Zipf law whose hottest quarter takes
// the asked share.

// balanceIterations is how many offset updates solveOffsets makes: the loads settle
// within about a hundred, the rest anneal the step.
const balanceIterations = 150

// balance is what every layer's router is balanced on: the reference text's distinct
// tokens, the drift the layers before it add to them (drift.go), and the wanted share of
// the picks per popularity rank.
type balance struct {
	embeddings [][]float32 // each distinct token's embedding
	count      []float64   // each token's occurrences in the reference text
	share      float64     // the hottest quarter's share wanted
	used       int
	workers    int // goroutines that route the tokens
	driftState
}

// PopularityExponent is the exponent s of the popularity (rank+1)^-s over experts experts
// whose hottest quarter holds share of the total: what Spec.HotQuarter balances the
// routers to. A share at or below a quarter (flat) gives 0.
func PopularityExponent(share float64, experts int) (float64, error) {
	if experts < 4 {
		return 0, fmt.Errorf("synth: a hottest quarter of %d experts is not defined", experts)
	}
	if !(share < 1) { // NaN too
		return 0, fmt.Errorf("synth: a hottest-quarter share of %g: want below 1", share)
	}
	if share <= float64(experts/4)/float64(experts) {
		return 0, nil
	}
	lo, hi := 0.0, 1.0
	for zipfQuarter(hi, experts) < share {
		if hi > 64 {
			return 0, fmt.Errorf("synth: no exponent up to 64 gives the hottest quarter %g", share)
		}
		lo, hi = hi, 2*hi
	}
	for range 50 {
		mid := (lo + hi) / 2
		if zipfQuarter(mid, experts) < share {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, nil
}

// zipfPopularity is each rank's share under the exponent s.
func zipfPopularity(s float64, experts int) []float64 {
	p := make([]float64, experts)
	var sum float64
	for r := range p {
		p[r] = math.Pow(float64(r+1), -s)
		sum += p[r]
	}
	for r := range p {
		p[r] /= sum
	}
	return p
}

// zipfQuarter is the share of the hottest quarter of the ranks under the exponent s.
func zipfQuarter(s float64, experts int) float64 {
	var hot float64
	for _, v := range zipfPopularity(s, experts)[:experts/4] {
		hot += v
	}
	return hot
}

// newBalance tokenises the reference text as the engine will (each text a user turn of
// the chat template) and takes its tokens' embeddings as written.
func (g *generator) newBalance(v vocabulary) (*balance, error) {
	s := g.spec
	if len(s.Reference) == 0 {
		return nil, errors.New("synth: a hot-quarter balance needs reference text")
	}
	counts, err := referenceCounts(s, v)
	if err != nil {
		return nil, err
	}
	ids := make([]int, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rows, err := g.embeddingRows(ids)
	if err != nil {
		return nil, err
	}
	b := &balance{embeddings: rows, share: s.HotQuarter, used: s.ExpertsUsed, workers: g.workers}
	for _, e := range rows {
		b.streams = append(b.streams, slices.Clone(e))
	}
	for _, id := range ids {
		b.count = append(b.count, float64(counts[id]))
	}
	return b, nil
}

// referenceCounts counts the tokens of s.Reference under v, each text rendered as a user
// turn with the generation prompt, as `strata profile` feeds its prompts.
func referenceCounts(s Spec, v vocabulary) (map[int]int, error) {
	tok, err := tokenizer.FromGGUF(newVocabMetadata(s, v))
	if err != nil {
		return nil, fmt.Errorf("synth: reference tokenizer: %w", err)
	}
	tmpl, _ := tokenizer.TemplateFor(s.Arch, tok.ChatTemplate())
	counts := make(map[int]int)
	for i, text := range s.Reference {
		msgs := []tokenizer.ChatMessage{{Role: "user", Content: text}}
		opts := tokenizer.RenderOptions{AddGenerationPrompt: true, BOS: tok.BOSText(), EOS: tok.EOSText(), Now: referenceDate}
		prompt, err := tokenizer.RenderChat(tmpl, msgs, opts)
		if err != nil {
			return nil, fmt.Errorf("synth: reference text %d: %w", i+1, err)
		}
		for _, id := range tok.Encode(prompt, true) {
			counts[id]++
		}
	}
	if len(counts) == 0 {
		return nil, errors.New("synth: the reference text has no tokens")
	}
	return counts, nil
}

// referenceDate is the date the reference prompts are rendered on (gpt-oss's Harmony
// template writes it): a fixed one, so that a seed gives the same file on every day.
func referenceDate() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// embeddingRows returns the rows ids of token_embd as the file holds them (quantised,
// pooled), drawn unit by unit as writeTensor draws them.
func (g *generator) embeddingRows(ids []int) ([][]float32, error) {
	t, ok := g.tensorByName("token_embd.weight")
	if !ok {
		return nil, errors.New("synth: no token_embd.weight to balance the routers on")
	}
	rowBytes, err := quant.RowBytes(t.typ, t.rowLen())
	if err != nil {
		return nil, err
	}
	rows := make([][]float32, len(ids))
	unitBuf := make([]byte, t.unitRows*rowBytes)
	unit := -1
	for k, id := range ids { // ids are sorted: each unit is drawn once
		if u := id / t.unitRows; u != unit {
			unit = u
			if err := g.fillUnit(t, u, unitBuf); err != nil {
				return nil, fmt.Errorf("synth: %s unit %d: %w", t.name, u, err)
			}
		}
		off := (id - unit*t.unitRows) * rowBytes
		rows[k] = make([]float32, t.rowLen())
		if err := quant.Dequantize(t.typ, unitBuf[off:off+rowBytes], rows[k]); err != nil {
			return nil, fmt.Errorf("synth: %s row %d: %w", t.name, id, err)
		}
	}
	return rows, nil
}

func rmsNormalize(x []float32, eps float64) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+eps))
	for i := range x {
		x[i] *= inv
	}
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// drawBalancedRouter draws a router's rows as draw does under Zipf skew, but with each
// expert's coefficient along u solved by the balance instead of set from its rank; then
// it follows the drift through the layer.
func (g *generator) drawBalancedRouter(r *rand.PCG, t tensorPlan, first, n int, dst []byte, rowBytes int) error {
	if first != 0 || n != g.spec.Experts {
		return fmt.Errorf("synth: %s: a balanced router is drawn whole, not rows %d..%d", t.name, first, first+n)
	}
	rows := make([][]float32, n)
	for e := range rows {
		rows[e] = make([]float32, t.rowLen())
		fillNormal(r, rows[e], orthogonalSigma(t.sigma))
		projectOut(rows[e], g.dir)
	}
	if err := g.balanceRouter(t, rows); err != nil {
		return fmt.Errorf("synth: %s: %w", t.name, err)
	}
	for e, row := range rows {
		if err := quant.Quantize(t.typ, row, dst[e*rowBytes:(e+1)*rowBytes]); err != nil {
			return fmt.Errorf("synth: %s: %w", t.name, err)
		}
	}
	return nil
}

// balanceRouter adds to each of router t's rows its coefficient along u, balanced on the
// reference tokens' stream at that layer, and moves the drift past the layer.
func (g *generator) balanceRouter(t tensorPlan, rows [][]float32) error {
	b := g.bal
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.layer != b.next {
		return fmt.Errorf("balancing layer %d before layer %d", t.layer, b.next)
	}
	attn, err := g.attentionDrift(t.layer)
	if err != nil {
		return err
	}
	b.addToStreams(attn)
	norm, err := g.routerNorm(t)
	if err != nil {
		return err
	}
	inputs := b.streamInputs(norm, g.spec.RMSEps)
	coef, err := b.offsets(rows, inputs, g.dir, g.zipfRanks(t.layer))
	if err != nil {
		return err
	}
	for e, row := range rows {
		for j := range row {
			row[j] += float32(coef[e]) * g.dir[j]
		}
	}
	if err := g.addExperts(t.layer, rows, inputs); err != nil {
		return err
	}
	b.next = t.layer + 1
	return nil
}

// routerNorm returns the weights of the RMSNorm in front of router t: the norm tensor the
// plan puts just before it in every architecture. Its 10% spread per channel turns part of
// the shared direction into a popularity of each expert's own (balanced without it, layer
// 0 of a synth asked for 40% measured 46%; with it, 42%), so the balance sees the
// router's input through it.
func (g *generator) routerNorm(t tensorPlan) ([]float32, error) {
	i := slices.IndexFunc(g.tensors, func(p tensorPlan) bool { return p.name == t.name })
	if i < 1 || g.tensors[i-1].kind != kindNorm || g.tensors[i-1].rowLen() != t.rowLen() {
		return nil, fmt.Errorf("no norm of width %d in front of %s", t.rowLen(), t.name)
	}
	return g.readVector(g.tensors[i-1].name)
}

// offsets returns each expert's coefficient along u for a router whose rows (orthogonal to
// u) are rows, whose reference inputs are inputs, and whose popularity ranks are ranks:
// the coefficients with which the hottest quarter of the reference tokens' picks comes
// closest to b.share. The loads a balance reaches miss its target a little (a heavy token
// cannot be split), and the profile ranks the experts after the fact, which turns those
// misses into a larger hottest quarter (4-5 points at 0.3, 2 at 0.4); so each retry aims
// the target's hottest quarter lower by what the last one overshot, and the best is kept.
func (b *balance) offsets(rows, inputs [][]float32, u []float32, ranks []int) ([]float64, error) {
	noise, along := routerLogits(rows, inputs, u)
	flat := float64(len(rows)/4) / float64(len(rows))
	aim := b.share
	var best []float64
	bestMiss := math.Inf(1)
	for range balanceRetries {
		exp, err := PopularityExponent(max(aim, flat), len(rows))
		if err != nil {
			return nil, err
		}
		coef := b.solve(noise, along, ranks, zipfPopularity(exp, len(rows)))
		got := b.hotQuarter(noise, along, coef)
		if miss := math.Abs(got - b.share); miss < bestMiss {
			best, bestMiss = coef, miss
		}
		if bestMiss < balanceTolerance || aim <= flat && got > b.share {
			break
		}
		aim = min(aim-(got-b.share), 0.95)
	}
	return best, nil
}

// How often offsets retries, and the miss of the share it stops at.
const (
	balanceRetries   = 4
	balanceTolerance = 0.005
)

// routerLogits returns each input's logits through the rows and its component along u.
func routerLogits(rows, inputs [][]float32, u []float32) ([][]float64, []float64) {
	noise := make([][]float64, len(inputs)) // the token-dependent logits
	along := make([]float64, len(inputs))
	for t, x := range inputs {
		along[t] = dot(x, u)
		noise[t] = make([]float64, len(rows))
		for e, w := range rows {
			noise[t][e] = dot(w, x)
		}
	}
	return noise, along
}

// solve returns the coefficients along u with which the reference tokens' picks (logits
// noise, components along) come closest to target, a share per popularity rank.
func (b *balance) solve(noise [][]float64, along []float64, ranks []int, target []float64) []float64 {
	var picks float64
	for _, c := range b.count {
		picks += c * float64(b.used)
	}
	want := make([]float64, len(ranks))
	for e, r := range ranks {
		want[e] = target[r] * picks
	}
	jn, ja, jc := jittered(noise, along, b.count)
	coef, miss := solveOffsets(jn, ja, jc, want, b.used, b.workers)
	slog.Debug("synth: balanced router", "misrouted", miss)
	return coef
}

// hotQuarter is the share of the reference tokens' picks (logits noise, components along,
// coefficients coef) that the hottest quarter of the experts takes, ranked after the fact
// as strata profile ranks them.
func (b *balance) hotQuarter(noise [][]float64, along, coef []float64) float64 {
	loads := make([]float64, len(coef))
	routeLoads(noise, along, b.count, coef, b.used, b.workers, loads)
	slices.SortFunc(loads, func(x, y float64) int { return cmp.Compare(y, x) })
	var hot, all float64
	for i, l := range loads {
		all += l
		if i < len(loads)/4 {
			hot += l
		}
	}
	return hot / all
}

// Jitter. Solved on the exact logits, the balance settles with a heavy token (a space is
// 8% of the text) exactly between two experts, so the rounding of the engine's quantised
// activations decides where it goes, layer after layer: a q8_0 synth asked for 30% drifted
// from 34% at layer 0 to 41% at layer 23, its f32 twin stayed at 33-35%. Solving on copies
// of each token whose logits are shaken by jitterSpread leaves the tokens off the edges.
const (
	jitterCopies = 4
	jitterSpread = 0.1 * routerGain
)

// jittered returns jitterCopies copies of each token's logits, shaken, and their
// along and counts (each copy a share of the token's).
func jittered(noise [][]float64, along, count []float64) ([][]float64, []float64, []float64) {
	r := stream(0, "balance.jitter", 0)
	var jn [][]float64
	var ja, jc []float64
	z := make([]float32, len(noise[0]))
	for t, row := range noise {
		for range jitterCopies {
			fillNormal(r, z, jitterSpread)
			cp := slices.Clone(row)
			for e := range cp {
				cp[e] += float64(z[e])
			}
			jn = append(jn, cp)
			ja = append(ja, along[t])
			jc = append(jc, count[t]/jitterCopies)
		}
	}
	return jn, ja, jc
}

// solveOffsets finds coefficients c (logit c[e]·along[t] + noise[t][e]) whose top-used
// loads, tokens weighted by count, come closest to want: multiplicative steps on the
// load ratio, annealed, keeping the best seen. It also returns that best's misplaced share
// of the picks.
func solveOffsets(noise [][]float64, along, count, want []float64, used, workers int) ([]float64, float64) {
	experts := len(want)
	var scale, picks float64 // the mean along, and all picks
	for t := range along {
		scale += along[t] / float64(len(along))
	}
	for _, w := range want {
		picks += w
	}
	coef := make([]float64, experts)
	best, bestMiss := slices.Clone(coef), math.Inf(1)
	floor := 0.05 * picks / float64(experts) // keeps an unpicked expert's step finite
	step := 1.0
	decay := math.Pow(0.01, 1/float64(balanceIterations))
	loads := make([]float64, experts)
	for range balanceIterations {
		routeLoads(noise, along, count, coef, used, workers, loads)
		var miss float64
		for e := range loads {
			miss += math.Abs(loads[e] - want[e])
		}
		if miss < bestMiss {
			bestMiss = miss
			copy(best, coef)
		}
		for e := range coef {
			coef[e] += step * math.Log((want[e]+floor)/(loads[e]+floor)) / scale
		}
		step *= decay
	}
	return best, bestMiss / (2 * picks)
}

// routeLoads sets loads to each expert's picks: every token's top used logits, weighted by
// its count; the tokens are split among workers. The counts (quarters of whole numbers)
// add up exactly in any order, so the file does not depend on the number of workers.
func routeLoads(noise [][]float64, along, count, coef []float64, used, workers int, loads []float64) {
	chunks := min(workers, len(noise))
	part := make([][]float64, chunks)
	_ = parallelFor(workers, chunks, func(c int) error {
		part[c] = make([]float64, len(coef))
		logits := make([]float64, len(coef))
		top := make([]int, 0, used)
		for t := c * len(noise) / chunks; t < (c+1)*len(noise)/chunks; t++ {
			for e := range logits {
				logits[e] = coef[e]*along[t] + noise[t][e]
			}
			for _, e := range topK(logits, used, top) {
				part[c][e] += count[t]
			}
		}
		return nil
	})
	clear(loads)
	for _, p := range part {
		for e, v := range p {
			loads[e] += v
		}
	}
}

// topK returns the indices of the k largest logits, largest first, in top's storage.
func topK(logits []float64, k int, top []int) []int {
	top = top[:0]
	for e, l := range logits {
		if len(top) == k && l <= logits[top[k-1]] {
			continue
		}
		i := len(top)
		if i == k {
			i-- // the last one drops out
		} else {
			top = append(top, e)
		}
		for ; i > 0 && logits[top[i-1]] < l; i-- {
			top[i] = top[i-1]
		}
		top[i] = e
	}
	return top
}

// vocabMetadata is the tokenizer part of the metadata addMetadata writes, for building the
// engine's tokenizer before the file exists.
type vocabMetadata map[string]any

func newVocabMetadata(s Spec, v vocabulary) vocabMetadata {
	types := make([]int64, len(v.types))
	for i, t := range v.types {
		types[i] = int64(t)
	}
	md := vocabMetadata{
		"tokenizer.ggml.model":            "gpt2",
		"tokenizer.ggml.pre":              preTokenizer(s),
		"tokenizer.ggml.tokens":           v.tokens,
		"tokenizer.ggml.token_type":       types,
		"tokenizer.ggml.merges":           v.merges,
		"tokenizer.ggml.eos_token_id":     uint64(v.eos),
		"tokenizer.ggml.padding_token_id": uint64(v.pad),
		"tokenizer.ggml.bos_token_id":     uint64(v.bos),
		"tokenizer.ggml.add_bos_token":    false,
	}
	if hasChatTemplate(s) {
		md["tokenizer.chat_template"] = chatTemplate
	}
	return md
}

func getAs[T any](md vocabMetadata, key string) (T, error) {
	v, ok := md[key].(T)
	if !ok {
		return v, fmt.Errorf("synth: no %T metadata %s", v, key)
	}
	return v, nil
}

func (md vocabMetadata) GetString(key string) (string, error)    { return getAs[string](md, key) }
func (md vocabMetadata) GetStrings(key string) ([]string, error) { return getAs[[]string](md, key) }
func (md vocabMetadata) GetInts(key string) ([]int64, error)     { return getAs[[]int64](md, key) }
func (md vocabMetadata) GetUint(key string) (uint64, error)      { return getAs[uint64](md, key) }
func (md vocabMetadata) GetBool(key string) (bool, error)        { return getAs[bool](md, key) }
