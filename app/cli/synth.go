package cli

import (
	"context"
	"fmt"
)

func runSynth(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("synth: not built yet")
}
