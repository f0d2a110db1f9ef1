package platforms

import (
	"reflect"
	"testing"
)

func TestParseFailedUnits(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want []string
	}{
		{"", nil},
		{"\n", nil},
		{"a.service loaded failed failed A\nb.mount loaded failed failed B", []string{"a.service", "b.mount"}},
		{"● c.service loaded failed failed C\n", []string{"c.service"}},
	} {
		if got := ParseFailedUnits([]byte(tt.out)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseFailedUnits(%q) = %q, want %q", tt.out, got, tt.want)
		}
	}
}
