package cli

import (
	"context"
	"fmt"
)

func runRun(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("run: not built yet")
}
