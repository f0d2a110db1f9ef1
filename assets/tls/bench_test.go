package tls

import (
	"context"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

// BenchmarkGenerateAll generates every TLS asset (the Bundle and its 14 key
// pairs) from an empty --dir: through graph.Store, which generates
// independent assets in parallel, and one asset at a time for comparison.
// docs/pki.md records the numbers.
func BenchmarkGenerateAll(b *testing.B) {
	for _, alg := range []Algorithm{ECDSAP256, RSA2048} {
		b.Run(string(alg)+"/engine", func(b *testing.B) {
			b.Setenv(KeyAlgorithmEnv, string(alg))
			for b.Loop() {
				s, err := graph.Open(newDir(b, map[string][]byte{}))
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Fetch(context.Background(), &Bundle{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(alg)+"/serial", func(b *testing.B) {
			for b.Loop() {
				s := &miniStore{serial: true, given: []graph.Asset{&KeyAlgorithm{Algorithm: alg}, testInstallConfig("192.168.126.10")}}
				if _, _, err := s.run(context.Background(), &Bundle{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
