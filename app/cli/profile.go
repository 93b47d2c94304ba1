package cli

import (
	"context"
	"fmt"
)

func runProfile(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("profile: not built yet")
}
