package tls

import (
	"context"
	"testing"

	"github.com/kiln-project/kiln/graph"
)

func TestKeyAlgorithmFromEnv(t *testing.T) {
	tests := []struct {
		env     string
		want    Algorithm
		wantErr bool
	}{
		{"", ECDSAP256, false},
		{"ecdsa", ECDSAP256, false},
		{"ECDSA-P256", ECDSAP256, false},
		{"rsa", RSA2048, false},
		{" rsa-2048 ", RSA2048, false},
		{"ed25519", "", true},
		{"rsa-4096", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(KeyAlgorithmEnv, tt.env)
			var k KeyAlgorithm
			err := k.Generate(context.Background(), &fakeParents{})
			if tt.wantErr {
				if !graph.IsInputError(err) {
					t.Errorf("error %v, want an input error", err)
				}
				return
			}
			if err != nil || k.Algorithm != tt.want {
				t.Errorf("got %q, %v; want %q", k.Algorithm, err, tt.want)
			}
		})
	}
}

func TestNewKeyTypes(t *testing.T) {
	for _, alg := range []Algorithm{ECDSAP256, RSA2048} {
		key, err := alg.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		checkKeyType(t, key.Public(), alg)
	}
}
