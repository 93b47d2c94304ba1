package cli

import (
	"context"
	"errors"
)

func runPlan(context.Context, []string, IO) error {
	return errors.New("strata plan: not in this build yet")
}
