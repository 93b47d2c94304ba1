package cli

import (
	"context"
	"errors"
)

func runProfile(context.Context, []string, IO) error {
	return errors.New("strata profile: not in this build yet")
}
