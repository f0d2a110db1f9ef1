package bootstraptoken

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/tls"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// tokenRE is the format kube-apiserver's bootstrap token authenticator
// accepts (k8s.io/cluster-bootstrap/token/api BootstrapTokenPattern).
var tokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

func TestGenerate(t *testing.T) {
	seen := map[string]bool{}
	for range 5 {
		var tok BootstrapToken
		start := time.Now()
		if err := tok.Generate(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		if !tokenRE.MatchString(tok.Token()) {
			t.Errorf("token %q does not match %s", tok.Token(), tokenRE)
		}
		if seen[tok.TokenID] {
			t.Errorf("token ID %s generated twice", tok.TokenID)
		}
		seen[tok.TokenID] = true
		if d := tok.Expiration.Sub(start); d < tls.BootstrapValidity-time.Second || d > tls.BootstrapValidity+time.Minute {
			t.Errorf("expires %s after generation, want %s", d, tls.BootstrapValidity)
		}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			if out := fmt.Sprintf(verb, &tok); strings.Contains(out, tok.TokenSecret) {
				t.Errorf("%s prints the secret: %s", verb, out)
			}
		}
	}
}

func TestSecretGolden(t *testing.T) {
	tok := &BootstrapToken{
		TokenID:     "abcdef",
		TokenSecret: "0123456789abcdef",
		Expiration:  time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	got, err := yaml.Marshal(tok.Secret())
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "secret.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Secret differs from %s (go test -update to accept):\n%s", golden, got)
	}
}

func TestNewAndParse(t *testing.T) {
	exp := time.Now().Add(15 * time.Minute)
	a, err := New(exp)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(exp)
	if a.TokenID == b.TokenID || a.TokenSecret == b.TokenSecret {
		t.Error("two new tokens share an ID or a secret")
	}
	p, err := Parse(a.Token(), exp)
	if err != nil || p.Token() != a.Token() || !p.Expiration.Equal(a.Expiration) {
		t.Errorf("Parse(%s) = %v, %v", a, p, err)
	}
	for _, bad := range []string{"", "abcdef", "abcdef.0123456789abcde", "ABCDEF.0123456789abcdef", "abcdef.0123456789abcdef.x"} {
		if _, err := Parse(bad, exp); err == nil {
			t.Errorf("Parse(%q) accepted a malformed token", bad)
		}
	}
}
