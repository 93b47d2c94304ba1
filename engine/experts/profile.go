package experts

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"

	"strata/engine/gguf"
)

// ProfileVersion is the version of the profile file format this build reads and writes.
const ProfileVersion = 1

// maxProfileBytes bounds what LoadProfile reads: the largest MoE models have a few tens of
// thousands of experts, a few MiB of JSON. Anything much larger is not a profile.
const maxProfileBytes = 64 << 20

// Profile is a model's routing frequencies: per layer and expert, how often the router chose
// it and the summed router weight it got. The planner ranks experts by it.
type Profile struct {
	Version int    `json:"version"`
	Key     string `json:"key"` // ModelKey of the model it was recorded on
	Layers  int    `json:"layers"`
	Experts int    `json:"experts"`
	Tokens  uint64 `json:"tokens"` // tokens the counts come from
	// Count is the times each expert was routed, [layer*Experts + expert].
	Count []uint64 `json:"count"`
	// Weight is the summed router weight of each expert, same layout.
	Weight []float64 `json:"weight"`
}

// NewProfile is an empty profile for a model with key and shape s.
func NewProfile(key string, s Shape) *Profile {
	n := max(s.Layers, 0) * max(s.Experts, 0)
	return &Profile{
		Version: ProfileVersion, Key: key, Layers: max(s.Layers, 0), Experts: max(s.Experts, 0),
		Count: make([]uint64, n), Weight: make([]float64, n),
	}
}

// Observe records the routing of one layer for any number of tokens: ids[i] was chosen with
// router weight weights[i]. Ids outside the model and a layer outside it are skipped (the
// router never makes them; a bad caller must not corrupt other experts' counts). Observe does
// not advance Tokens: the caller knows how many tokens a batch held.
func (p *Profile) Observe(layer int, ids []int32, weights []float32) {
	if layer < 0 || layer >= p.Layers {
		return
	}
	for i, id := range ids {
		if id < 0 || int(id) >= p.Experts {
			continue
		}
		j := layer*p.Experts + int(id)
		p.Count[j]++
		if i < len(weights) && !math.IsNaN(float64(weights[i])) && !math.IsInf(float64(weights[i]), 0) {
			p.Weight[j] += float64(weights[i])
		}
	}
}

// Add sums o's counts into p. Both must come from the same model (key and shape).
func (p *Profile) Add(o *Profile) error {
	if o == nil {
		return errors.New("experts: profile add: nil profile")
	}
	if o.Key != p.Key {
		return fmt.Errorf("experts: profile add: model key %q differs from %q: the profiles are of different models", o.Key, p.Key)
	}
	if o.Layers != p.Layers || o.Experts != p.Experts || len(o.Count) != len(p.Count) || len(o.Weight) != len(p.Weight) {
		return fmt.Errorf("experts: profile add: shape %d layers x %d experts differs from %d x %d", o.Layers, o.Experts, p.Layers, p.Experts)
	}
	for i := range p.Count {
		p.Count[i] += o.Count[i]
		p.Weight[i] += o.Weight[i]
	}
	p.Tokens += o.Tokens
	return nil
}

// Clone is a deep copy.
func (p *Profile) Clone() *Profile {
	c := *p
	c.Count = slices.Clone(p.Count)
	c.Weight = slices.Clone(p.Weight)
	return &c
}

// Rank orders every expert of every layer hottest first: by count, then by summed weight,
// then in the neutral order (expert 0 of every layer, then expert 1 of every layer, ...).
// Without observations it is the neutral order, which gives each layer an equal share of any
// number of slots.
func (p *Profile) Rank() []ID {
	ids := NeutralRank(Shape{Layers: p.Layers, Experts: p.Experts})
	if len(p.Count) != p.Layers*p.Experts || len(p.Weight) != len(p.Count) {
		return ids // a malformed profile (LoadProfile refuses these) ranks nothing
	}
	slices.SortStableFunc(ids, func(a, b ID) int {
		i, j := a.Layer*p.Experts+a.Expert, b.Layer*p.Experts+b.Expert
		if c := cmp.Compare(p.Count[j], p.Count[i]); c != 0 {
			return c
		}
		return cmp.Compare(p.Weight[j], p.Weight[i])
	})
	return ids
}

// NeutralRank is the order used without a profile: expert 0 of every layer, then expert 1
// of every layer, and so on.
func NeutralRank(s Shape) []ID {
	ids := make([]ID, 0, max(s.Layers, 0)*max(s.Experts, 0))
	for e := range max(s.Experts, 0) {
		for l := range max(s.Layers, 0) {
			ids = append(ids, ID{Layer: l, Expert: e})
		}
	}
	return ids
}

// ModelKey identifies a model by its tensor index: a hex SHA-256 (first 16 bytes) of every
// tensor's name, type, shape and offset, in file order. Metadata edits keep the key; any
// change to the weights' layout changes it.
func ModelKey(f *gguf.File) string {
	h := sha256.New()
	var buf bytes.Buffer
	num := func(v int64) { _ = binary.Write(&buf, binary.LittleEndian, v) }
	num(int64(len(f.Tensors)))
	for _, t := range f.Tensors {
		num(int64(len(t.Name)))
		buf.WriteString(t.Name)
		num(int64(t.Type))
		num(int64(len(t.Ne)))
		for _, d := range t.Ne {
			num(d)
		}
		num(t.Offset)
		num(t.Size)
		if t.Part != 0 { // a split model's tensors are placed by part too (single files keep their keys)
			num(int64(t.Part))
		}
		h.Write(buf.Bytes())
		buf.Reset()
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// LoadProfile reads a profile file and checks its version and sizes.
func LoadProfile(path string) (*Profile, error) {
	data, err := readLimited(path, maxProfileBytes)
	if err != nil {
		return nil, fmt.Errorf("experts: profile %s: %w", path, err)
	}
	var p Profile
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("experts: profile %s: not a profile file (truncated or corrupt): %w", path, err)
	}
	if p.Version != ProfileVersion {
		return nil, fmt.Errorf("experts: profile %s: version %d, this build reads version %d; record it again with strata profile", path, p.Version, ProfileVersion)
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("experts: profile %s: %w", path, err)
	}
	return &p, nil
}

// check validates the sizes and values a loaded profile claims.
func (p *Profile) check() error {
	if p.Key == "" {
		return errors.New("no model key")
	}
	if p.Layers <= 0 || p.Experts <= 0 || p.Layers > 1<<16 || p.Experts > 1<<20 {
		return fmt.Errorf("shape %d layers x %d experts is not a model's", p.Layers, p.Experts)
	}
	n := p.Layers * p.Experts
	if len(p.Count) != n || len(p.Weight) != n {
		return fmt.Errorf("%d counts and %d weights for %d layers x %d experts (want %d each)", len(p.Count), len(p.Weight), p.Layers, p.Experts, n)
	}
	for i, w := range p.Weight {
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("weight of layer %d expert %d is %g", i/p.Experts, i%p.Experts, w)
		}
	}
	return nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%d bytes is too large for a profile (limit %d)", st.Size(), limit)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, err
	}
	return data, nil
}

// Save writes the profile atomically (a temporary file renamed over path), creating the
// folder.
func (p *Profile) Save(path string) error {
	if err := p.check(); err != nil {
		return fmt.Errorf("experts: save profile %s: %w", path, err)
	}
	q := *p
	q.Version = ProfileVersion
	data, err := json.Marshal(&q)
	if err != nil {
		return fmt.Errorf("experts: save profile %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("experts: save profile %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("experts: save profile %s: %w", path, err)
	}
	_, werr := tmp.Write(append(data, '\n'))
	merr := tmp.Chmod(0o644) // CreateTemp makes it private; a profile is not a secret
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, merr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("experts: save profile %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("experts: save profile %s: %w", path, err)
	}
	return nil
}

// ProfilePaths lists where a model's profile is looked for and saved, in order: next to the
// model (<model>.strata-profile), then the user cache folder (strata/profiles/<key>.profile).
func ProfilePaths(modelPath, key string) []string {
	paths := []string{modelPath + ".strata-profile"}
	if dir, err := os.UserCacheDir(); err == nil && key != "" {
		paths = append(paths, filepath.Join(dir, "strata", "profiles", key+".profile"))
	}
	return paths
}

// FindProfile loads the first profile in ProfilePaths whose key matches and says where it
// was. It returns (nil, "", nil) when there is none. When none matches but some file was
// there and could not be used (corrupt, another version, another model's), the error says
// why; callers treat that as a warning, since a stale profile must not stop a model opening.
func FindProfile(modelPath, key string) (*Profile, string, error) {
	var errs []error
	for _, path := range ProfilePaths(modelPath, key) {
		p, err := LoadProfile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			errs = append(errs, err)
		case p.Key != key:
			errs = append(errs, fmt.Errorf("experts: profile %s: recorded on another model (key %s, this model %s)", path, p.Key, key))
		default:
			return p, path, nil
		}
	}
	return nil, "", errors.Join(errs...)
}

// SaveProfile saves p in the first place of ProfilePaths that can be written and returns it.
func SaveProfile(p *Profile, modelPath string) (string, error) {
	var errs []error
	for _, path := range ProfilePaths(modelPath, p.Key) {
		err := p.Save(path)
		if err == nil {
			return path, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("experts: no place to save the profile of %s: %w", modelPath, errors.Join(errs...))
}
