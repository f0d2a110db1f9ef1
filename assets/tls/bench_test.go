package tls

import (
	"context"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

// BenchmarkGenerateAll generates every TLS asset (the Bundle target): 13 key
// pairs, in parallel as the engine does and one at a time for comparison.
// docs/pki.md records the numbers.
func BenchmarkGenerateAll(b *testing.B) {
	for _, alg := range []Algorithm{ECDSAP256, RSA2048} {
		for _, mode := range []struct {
			name   string
			serial bool
		}{{"parallel", false}, {"serial", true}} {
			b.Run(string(alg)+"/"+mode.name, func(b *testing.B) {
				for b.Loop() {
					s := &miniStore{serial: mode.serial, given: []graph.Asset{&KeyAlgorithm{Algorithm: alg}, testInstallConfig("192.168.126.10")}}
					if _, _, err := s.run(context.Background(), &Bundle{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
