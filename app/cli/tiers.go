package cli

import (
	"context"
	"errors"
)

// The expert-tier commands belong to the tier planner and the host tiers, which are not in
// this build yet; they say so instead of pretending.
var errTiersNotBuilt = errors.New("the expert tiers (profile, planner, experts.bin) are not in this build yet; `strata run`, `chat`, `eval` and `bench` work on the CPU and on one GPU")

func runPlan(context.Context, []string, IO) error    { return errTiersNotBuilt }
func runProfile(context.Context, []string, IO) error { return errTiersNotBuilt }
func runPack(context.Context, []string, IO) error    { return errTiersNotBuilt }
