package nodeimage

import (
	"errors"
	"testing"
)

func TestDetectMirror(t *testing.T) {
	tests := []struct {
		root    string
		want    string
		wantErr error
	}{
		// deb822 file as on Debian 12; a *.sources.disabled file and an
		// Enabled: no stanza are skipped.
		{root: "testdata/apt-deb822", want: "http://deb.debian.org/debian"},
		// one-line style with options and a trailing slash; deb-src and
		// other suites are skipped.
		{root: "testdata/apt-list", want: "http://mirror.example/debian"},
		{root: "testdata/apt-none", wantErr: errNoMirror},
		{root: "testdata/does-not-exist", wantErr: errNoMirror},
	}
	for _, tt := range tests {
		t.Run(tt.root, func(t *testing.T) {
			got, err := detectMirror(tt.root, "bookworm")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("mirror %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMirrorFromDeb822Continuation(t *testing.T) {
	text := "Types: deb deb-src\nURIs:\n http://a.example/debian\n http://b.example/debian\nSuites: bookworm\n"
	if got := mirrorFromDeb822(text, "bookworm"); got != "http://a.example/debian" {
		t.Errorf("got %q", got)
	}
}
