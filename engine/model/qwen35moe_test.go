package model_test

import "testing"

// TestQwen35MoeFloatPathMatchesTransformers: every variant, prompt and position of
// qwen35moe-tiny on the float path (Gated DeltaNet chunked for the prompt, recurrent for the
// decode steps), router ids and weights, greedy tokens, and the f16 cache.
func TestQwen35MoeFloatPathMatchesTransformers(t *testing.T) {
	floatPathMatches(t, "qwen35moe-tiny")
}

// TestQwen35Moe8BitActivations: the integer path under the fixture's 8-bit rule.
func TestQwen35Moe8BitActivations(t *testing.T) {
	int8PathMatches(t, "qwen35moe-tiny")
}

// TestQwen35MoeDeterministicAndIncremental: repeated runs are bit-identical, and a prompt
// token by token (the recurrent rule) equals one batch (the chunked rule).
func TestQwen35MoeDeterministicAndIncremental(t *testing.T) {
	deterministicAndIncremental(t, "qwen35moe-tiny")
}
