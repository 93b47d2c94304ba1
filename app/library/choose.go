package library

import (
	"fmt"
	"path"
	"strings"
)

// ParseRef splits REPO[:FILE] (the form `strata pull` takes) into the repository and the
// file or quantisation asked for ("" when none). A catalogue id (gpt-oss-20b) stands for
// its entry's repository and quantisation.
func ParseRef(ref string) (repo, file string, err error) {
	ref = strings.TrimSpace(ref)
	if !strings.Contains(ref, "/") {
		if entries, cerr := Catalogue(); cerr == nil {
			for _, e := range entries {
				if strings.EqualFold(e.ID, ref) {
					return e.Repo, e.Quant, nil
				}
			}
		}
	}
	repo, file, _ = strings.Cut(ref, ":")
	if err := ValidRepo(repo); err != nil {
		return "", "", fmt.Errorf("%w (or one of the catalogue's models: %s)", err, catalogueIDs())
	}
	return repo, file, nil
}

// catalogueIDs lists the catalogue's ids for messages.
func catalogueIDs() string {
	entries, err := Catalogue()
	if err != nil {
		return "none"
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	return strings.Join(ids, ", ")
}

// Choose picks the model a REPO[:FILE] reference means among a repository's GGUF models:
// the only one when file is ""; else the one with that file (any part of a split model) or
// whose name contains file, case aside (a quantisation such as Q4_K_M). A reference that
// fits none or several says which there are.
func Choose(repo string, models []GGUFModel, file string) (GGUFModel, error) {
	if len(models) == 0 {
		return GGUFModel{}, fmt.Errorf("%s has no GGUF model file (Strata runs GGUF files; look for a repository whose name ends in -GGUF)", repo)
	}
	if file == "" {
		if len(models) == 1 {
			return models[0], nil
		}
		return GGUFModel{}, fmt.Errorf("%s has %d GGUF models; name one as %s:FILE or %s:QUANT:\n%s", repo, len(models), repo, repo, listModels(models))
	}
	for _, m := range models {
		for _, p := range m.Parts {
			if p.Path == file || path.Base(p.Path) == file {
				return m, nil
			}
		}
	}
	var hits []GGUFModel
	for _, m := range models {
		if strings.Contains(strings.ToLower(m.Name), strings.ToLower(file)) {
			hits = append(hits, m)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return GGUFModel{}, fmt.Errorf("%s has no GGUF model matching %q; it has:\n%s", repo, file, listModels(models))
	}
	return GGUFModel{}, fmt.Errorf("%q matches %d models of %s; name the file:\n%s", file, len(hits), repo, listModels(hits))
}

func listModels(models []GGUFModel) string {
	var b strings.Builder
	for _, m := range models {
		fmt.Fprintf(&b, "  %s  %s", m.Name, HumanBytes(m.Size()))
		if len(m.Parts) > 1 {
			fmt.Fprintf(&b, " in %d parts", len(m.Parts))
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
