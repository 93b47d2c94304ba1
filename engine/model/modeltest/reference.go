package modeltest

import (
	"testing"

	"strata/engine/fixtures"
)

// Reference is a model folder's reference.json (fixtures.Reference): variants, prompts,
// array files, margins and tolerances.
type Reference = fixtures.Reference

// LoadReference reads dir/reference.json.
func LoadReference(t testing.TB, dir string) Reference {
	t.Helper()
	return *fixtures.ReadReference(t, dir)
}
