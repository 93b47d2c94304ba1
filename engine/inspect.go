package engine

import (
	"context"
	"fmt"
)

// Inspect reads a model file's header and describes it without loading any weights.
func Inspect(ctx context.Context, path string) (ModelInfo, error) {
	return ModelInfo{}, fmt.Errorf("engine: inspect %s: not built yet", path)
}
