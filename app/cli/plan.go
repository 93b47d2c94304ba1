package cli

import (
	"context"
	"fmt"
)

func runPlan(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("plan: not built yet")
}
