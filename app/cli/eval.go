package cli

import (
	"context"
	"fmt"
)

func runEval(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("eval: not built yet")
}
