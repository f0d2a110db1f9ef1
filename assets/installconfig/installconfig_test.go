package installconfig

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

func TestGenerateWithoutInputSaysHowToCreateOne(t *testing.T) {
	for name, ctx := range map[string]context.Context{
		"no input":    context.Background(),
		"empty stdin": WithInput(context.Background(), Input{In: strings.NewReader("  \n")}),
	} {
		t.Run(name, func(t *testing.T) {
			err := (&InstallConfig{}).Generate(ctx, nil)
			if !graph.IsInputError(err) || !strings.Contains(err.Error(), "kiln create install-config") {
				t.Errorf("err = %v, want an input error saying how to create one", err)
			}
		})
	}
}

func TestGenerateReadsPipedYAML(t *testing.T) {
	data, err := os.ReadFile("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := &InstallConfig{}
	ctx := WithInput(context.Background(), Input{In: strings.NewReader(string(data))})
	if err := a.Generate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if a.Config.MasterReplicas() != DefaultControlPlaneReplicas || a.File.Path != installdir.InstallConfig || a.File.Mode != 0o600 {
		t.Errorf("asset = %+v, file %s %o", a.Config, a.File.Path, a.File.Mode)
	}
	if !strings.Contains(string(a.File.Data), "networkType: KilnBridge") {
		t.Errorf("defaults not written back:\n%s", a.File.Data)
	}
}

func TestGenerateRejectsInvalidPipedYAML(t *testing.T) {
	ctx := WithInput(context.Background(), Input{In: strings.NewReader("apiVersion: v0\nmetadata: {name: dev}\nbaseDomain: example.com\nplatform: {none: {}}\n")})
	err := (&InstallConfig{}).Generate(ctx, nil)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errs) != 1 || ve.Errs[0].Field != "apiVersion" {
		t.Errorf("err = %v, want one apiVersion error", err)
	}
}

// Piped YAML is read no further than MaxInstallConfigSize: an endless
// stream is refused as bad input, not read until memory runs out.
func TestGenerateBoundsPipedYAML(t *testing.T) {
	endless := io.MultiReader(strings.NewReader("apiVersion: kiln.dev/v1\n# "), spaces{})
	err := (&InstallConfig{}).Generate(WithInput(context.Background(), Input{In: endless}), nil)
	var se *graph.SizeError
	if !graph.IsInputError(err) || !errors.As(err, &se) ||
		*se != (graph.SizeError{Path: "standard input", Input: graph.InstallConfigInput, Size: graph.MaxInstallConfigSize + 1, Limit: graph.MaxInstallConfigSize, Unsized: true}) {
		t.Errorf("err = %v, want a SizeError for standard input", err)
	}
}

// spaces is an endless stream of spaces.
type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

func TestSurvey(t *testing.T) {
	home := t.TempDir()
	key := sshKey(t)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519.pub"), []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Wrong answers are asked again; Enter takes the default.
	answers := strings.Join([]string{
		"aws",          // not a platform
		"",             // default: local
		"Example..com", // not a domain
		"example.com",
		"Dev",  // not a label
		"dev",  // cluster name
		"9",    // no such key
		"",     // default: key 1
		"nope", // pull secret: not JSON
		`{"auths":{}}`,
	}, "\n") + "\n"
	var out strings.Builder
	a := &InstallConfig{}
	ctx := WithInput(context.Background(), Input{In: strings.NewReader(answers), Out: &out, Terminal: true, HomeDir: home})
	if err := a.Generate(ctx, nil); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	c := a.Config
	if c.PlatformName() != "local" || c.BaseDomain != "example.com" || c.Metadata.Name != "dev" ||
		c.SSHKey != key || c.PullSecret != `{"auths":{}}` {
		t.Errorf("config = %+v", c)
	}
	if n := strings.Count(out.String(), "✗"); n != 5 {
		t.Errorf("%d answers rejected, want 5:\n%s", n, out.String())
	}
	if strings.Contains(out.String(), "nope") || strings.Contains(out.String(), `{"auths":{}}`) {
		t.Error("the pull secret was printed")
	}
}

func TestSurveyEndsOnEOF(t *testing.T) {
	ctx := WithInput(context.Background(), Input{In: strings.NewReader("none\n"), Out: &strings.Builder{}, Terminal: true})
	err := (&InstallConfig{}).Generate(ctx, nil)
	if !graph.IsInputError(err) || !strings.Contains(err.Error(), "Base domain") {
		t.Errorf("err = %v, want an input error naming the unanswered question", err)
	}
}

// fetcher serves files from a map.
type fetcher map[string]string

func (f fetcher) FetchByName(p string) (*graph.File, error) {
	d, ok := f[p]
	if !ok {
		return nil, os.ErrNotExist
	}
	return &graph.File{Path: p, Data: []byte(d)}, nil
}

func (f fetcher) FetchByPattern(string) ([]*graph.File, error) { return nil, nil }

func (f fetcher) Names(string) ([]string, error) { return nil, nil }

func TestLoad(t *testing.T) {
	data, _ := os.ReadFile("testdata/minimal.yaml")
	a := &InstallConfig{}
	if found, err := a.Load(fetcher{}); found || err != nil {
		t.Errorf("Load without a file = %v, %v", found, err)
	}
	if found, err := a.Load(fetcher{installdir.InstallConfig: string(data)}); !found || err != nil || a.Config.Metadata.Name != "dev" {
		t.Errorf("Load = %v, %v", found, err)
	}
	if _, err := a.Load(fetcher{installdir.InstallConfig: "bogus: 1\n"}); !graph.IsInputError(err) {
		t.Errorf("Load of a bad file = %v, want an input error", err)
	}
}

func TestRedacted(t *testing.T) {
	c := defaulted(t)
	c.PullSecret = `{"auths":{"x":{"auth":"c2VjcmV0"}}}`
	c.Proxy = nil
	r := Redacted(c)
	if r.PullSecret != "REDACTED" || c.PullSecret == "REDACTED" {
		t.Errorf("redacted %q, original %q", r.PullSecret, c.PullSecret)
	}
}

func TestLoadReportsParseAndValidationErrorsTogether(t *testing.T) {
	a := &InstallConfig{}
	_, err := a.Load(fetcher{installdir.InstallConfig: "apiVersion: x\nfoo: 1\nmetadata: {name: 12}\n"})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a ValidationError", err)
	}
	want := []fieldErr{
		{field.ErrorTypeForbidden, "foo"}, {field.ErrorTypeTypeInvalid, "metadata.name"},
		{field.ErrorTypeNotSupported, "apiVersion"}, {field.ErrorTypeRequired, "baseDomain"}, {field.ErrorTypeRequired, "platform"},
	}
	if got := asData(ve.Errs); !slices.Equal(got, want) {
		t.Errorf("errors = %v\nwant %v", got, want)
	}
}

// The install-config is resolved once, when it is set and when it is
// restored from the state file; a restored value that does not resolve (a
// release this kiln does not pin) is no error of the state, only of
// Resolved.
func TestResolvedOnceWhenSetAndRestored(t *testing.T) {
	data, err := os.ReadFile("testdata/defaults.golden.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseDefaulted(data)
	if err != nil {
		t.Fatal(err)
	}
	restored := &InstallConfig{Config: c}
	if err := restored.CheckState(); err != nil {
		t.Fatal(err)
	}
	res, err := restored.Resolved()
	if err != nil || res.Release.Kubernetes != c.KubernetesVersion || !res.MachineNetwork.IsValid() || res.Timeouts.Install == 0 {
		t.Errorf("Resolved = %+v, %v", res, err)
	}
	c.KubernetesVersion = "v1.20.0"
	old := &InstallConfig{Config: c}
	if err := old.CheckState(); err != nil {
		t.Errorf("CheckState of an unpinned release = %v, want nil", err)
	}
	if _, err := old.Resolved(); err == nil || !strings.Contains(err.Error(), "kubernetesVersion") {
		t.Errorf("Resolved of an unpinned release = %v, want an error naming kubernetesVersion", err)
	}
}
