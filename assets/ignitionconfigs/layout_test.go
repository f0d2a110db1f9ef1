package ignitionconfigs_test

import (
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	butanefs "github.com/kiln-project/kiln/data/butane"
	"github.com/kiln-project/kiln/ignition/nodelayout"
)

// TestButaneTakesLayoutFromNodelayout fails when a Butane template spells
// out a path or port of the node layout instead of reading it from
// {{ .Layout }}, or when nodelayout.Values leaves a field unset (a template
// would render it empty).
func TestButaneTakesLayoutFromNodelayout(t *testing.T) {
	layout := reflect.ValueOf(nodelayout.Values())
	names, err := fs.Glob(butanefs.FS, "*.bu")
	if err != nil || len(names) == 0 {
		t.Fatalf("no Butane templates: %v", err)
	}
	for i := range layout.NumField() {
		field, value := layout.Type().Field(i).Name, layout.Field(i)
		if value.IsZero() {
			t.Errorf("nodelayout.Values() leaves %s unset", field)
			continue
		}
		literal := fmt.Sprint(value.Interface())
		for _, name := range names {
			src, err := fs.ReadFile(butanefs.FS, name)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), literal) {
				t.Errorf("data/butane/%s spells out %s (%s); use {{ .Layout.%s }}", name, field, literal, field)
			}
		}
	}
}
