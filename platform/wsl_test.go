package platform

import "testing"

func TestDetectWSL(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for _, tc := range []struct {
		name      string
		osrelease string
		env       map[string]string
		dxg       bool
		wsl2      bool
		evidence  int
	}{
		{"native linux", "6.8.0-45-generic", nil, false, false, 0},
		{"wsl2 stock kernel", "5.15.153.1-microsoft-standard-WSL2\n", map[string]string{"WSL_DISTRO_NAME": "Ubuntu", "WSL_INTEROP": "/run/WSL/1_interop"}, true, true, 4},
		{"wsl2 without /dev/dxg yet", "5.15.153.1-microsoft-standard-WSL2", nil, false, true, 1},
		{"wsl2 custom kernel", "6.6.36-custom", map[string]string{"WSL_DISTRO_NAME": "Debian"}, true, true, 2},
		{"wsl1", "4.4.0-19041-Microsoft", map[string]string{"WSL_DISTRO_NAME": "Ubuntu"}, false, false, 2},
		{"dxg alone is not WSL", "6.8.0-45-generic", nil, true, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := detectWSL(tc.osrelease, env(tc.env), tc.dxg)
			if w.WSL2 != tc.wsl2 || len(w.Evidence) != tc.evidence {
				t.Fatalf("got %+v, want wsl2=%v with %d pieces of evidence", w, tc.wsl2, tc.evidence)
			}
			if want := map[bool]int64{true: WSLPinnedBudgetBytes}[tc.wsl2]; w.PinnedBudgetBytes != want {
				t.Errorf("pinned budget %d, want %d", w.PinnedBudgetBytes, want)
			}
		})
	}
}
