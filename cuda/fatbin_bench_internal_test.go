package cuda

import "testing"

// BenchmarkEmbeddedFatbin times unzipping the embedded fatbin, which every backend pays
// when it opens.
func BenchmarkEmbeddedFatbin(b *testing.B) {
	for b.Loop() {
		if _, err := embeddedFatbin(); err != nil {
			b.Fatal(err)
		}
	}
}
