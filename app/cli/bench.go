package cli

import (
	"context"
	"fmt"
)

func runBench(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("bench: not built yet")
}
