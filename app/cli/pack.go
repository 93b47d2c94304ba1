package cli

import (
	"context"
	"errors"
)

func runPack(context.Context, []string, IO) error {
	return errors.New("strata pack: not in this build yet")
}
