package cli

import (
	"context"
	"fmt"
)

func runTokenize(ctx context.Context, args []string, io IO) error {
	return fmt.Errorf("tokenize: not built yet")
}
