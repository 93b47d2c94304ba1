package cli

import (
	"context"
	"fmt"
)

func runPack(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("pack: not built yet")
}
