package gui

import (
	"fmt"
	"strconv"
	"strings"

	"strata/engine"
)

// Sampling presets the chat offers.
const (
	PresetPrecise  = "precise"
	PresetBalanced = "balanced"
	PresetCreative = "creative"
)

// presetNames lists the presets in the order the chat's selector shows them.
func presetNames() []string { return []string{PresetPrecise, PresetBalanced, PresetCreative} }

// preset returns the sampling settings of a named preset (balanced for an unknown name).
func preset(name string) engine.Sampling {
	switch name {
	case PresetPrecise:
		return engine.Sampling{Temperature: 0.2, TopK: 20, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.05}
	case PresetCreative:
		return engine.Sampling{Temperature: 1.0, TopK: 50, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1.1}
	}
	return engine.Sampling{Temperature: 0.7, TopK: 20, TopP: 0.8, RepeatPenalty: 1.05}
}

// advancedFields is the advanced section's text: one string per sampling field.
type advancedFields struct {
	Temperature, TopK, TopP, MinP, RepeatPenalty, MaxTokens, Seed string
}

func fieldsOf(s engine.Sampling) advancedFields {
	f := func(v float32) string { return strconv.FormatFloat(float64(v), 'g', 4, 32) }
	return advancedFields{
		Temperature:   f(s.Temperature),
		TopK:          strconv.Itoa(s.TopK),
		TopP:          f(s.TopP),
		MinP:          f(s.MinP),
		RepeatPenalty: f(s.RepeatPenalty),
		MaxTokens:     strconv.Itoa(s.MaxTokens),
		Seed:          strconv.FormatUint(s.Seed, 10),
	}
}

// parseSampling reads the advanced section, naming the field of the first bad value.
func parseSampling(a advancedFields) (engine.Sampling, error) {
	var s engine.Sampling
	float := func(name, v string, lo, hi float64, dst *float32) error {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 32)
		if err != nil || x < lo || x > hi {
			return fmt.Errorf("%s must be a number from %g to %g (got %q)", name, lo, hi, v)
		}
		*dst = float32(x)
		return nil
	}
	integer := func(name, v string, lo int, dst *int) error {
		x, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || x < lo {
			return fmt.Errorf("%s must be a whole number of at least %d (got %q)", name, lo, v)
		}
		*dst = x
		return nil
	}
	if err := float("Temperature", a.Temperature, 0, 5, &s.Temperature); err != nil {
		return s, err
	}
	if err := integer("Top-k", a.TopK, 0, &s.TopK); err != nil {
		return s, err
	}
	if err := float("Top-p", a.TopP, 0, 1, &s.TopP); err != nil {
		return s, err
	}
	if err := float("Min-p", a.MinP, 0, 1, &s.MinP); err != nil {
		return s, err
	}
	if err := float("Repeat penalty", a.RepeatPenalty, 0, 3, &s.RepeatPenalty); err != nil {
		return s, err
	}
	if err := integer("Max tokens", a.MaxTokens, 0, &s.MaxTokens); err != nil {
		return s, err
	}
	seed, err := strconv.ParseUint(strings.TrimSpace(a.Seed), 10, 64)
	if err != nil {
		return s, fmt.Errorf("seed must be a whole number of at least 0 (got %q)", a.Seed)
	}
	s.Seed = seed
	return s, nil
}
