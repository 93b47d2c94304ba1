package cli

import (
	"context"
	"fmt"
)

func runChat(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("chat: not built yet")
}
