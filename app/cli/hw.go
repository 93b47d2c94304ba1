package cli

import (
	"context"
	"fmt"
)

func runHW(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("hw: not built yet")
}
