package engine

import (
	"context"

	"strata/engine/gguf"
	"strata/engine/model"
	"strata/engine/quant"
)

// Inspect reads a model file's header and describes it without loading any weights.
func Inspect(ctx context.Context, path string) (ModelInfo, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return ModelInfo{}, err
	}
	defer f.Close()
	return describe(f)
}

// describe fills a ModelInfo from the header: sizes, parameter counts, the dominant type.
func describe(f *gguf.File) (ModelInfo, error) {
	h, err := model.ReadHparams(f)
	if err != nil {
		return ModelInfo{}, err
	}
	info := ModelInfo{
		Path: f.Path, Architecture: h.Arch, Layers: h.Layers, Experts: h.Experts,
		Heads: h.Heads, KVHeads: h.KVHeads, HeadDim: h.HeadDim,
		ExpertsUsed: h.ExpertsUsed, ContextLength: h.Context, Vocab: h.Vocab,
		ContextLimit: h.ContextLimit(),
	}
	info.RingLayers, info.RingKeep = h.RingLayers()
	info.RecurrentLayers, info.RecurrentBytes = h.RecurrentState()
	if info.RecurrentLayers > 0 {
		info.DeltaKeyDim, info.ConvKernel = h.SSM.KDim, h.SSM.ConvKernel
	}
	info.Name, _ = f.GetString("general.name")
	info.FileBytes = f.TotalSize() // every part of a split model
	bytesByType := map[quant.Type]int64{}
	var expertParams int64
	for _, t := range f.Tensors {
		n := t.Elements()
		info.TotalParams += n
		bytesByType[t.Type] += t.Size
		switch {
		case isExpertTensor(t.Name):
			info.ExpertBytes += t.Size
			expertParams += n
			if h.Experts > 0 {
				info.DecodeBytesPerToken += t.Size / int64(h.Experts) * int64(h.ExpertsUsed)
			}
		case t.Name == "token_embd.weight":
			info.NonExpertBytes += t.Size
			info.DecodeBytesPerToken += t.Size / int64(max(h.Vocab, 1))
		default:
			info.NonExpertBytes += t.Size
			info.DecodeBytesPerToken += t.Size
		}
	}
	info.ActiveParams = info.TotalParams - expertParams
	if h.Experts > 0 {
		info.ActiveParams += expertParams / int64(h.Experts) * int64(h.ExpertsUsed)
	}
	var best int64
	for t, b := range bytesByType {
		if b > best || (b == best && t < quantOf(info.Quantization)) {
			best, info.Quantization = b, t.String()
		}
	}
	return info, nil
}

func quantOf(name string) quant.Type {
	t, err := quant.ParseType(name)
	if err != nil {
		return 1 << 30
	}
	return t
}
