package ignition

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_3"
)

func TestFileRoundTrip(t *testing.T) {
	small := []byte("hello\n")
	large := bytes.Repeat([]byte("kiln "), 2000)
	c := New()
	AddFile(&c, "/etc/small", 0o644, small)
	AddFile(&c, "/etc/large", 0o600, large)
	AddFile(&c, "/etc/small", 0o644, []byte("replaced\n"))
	raw, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _, err := v3_3.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed.Storage.Files) != 2 {
		t.Fatalf("files = %d, want 2 (replace must not duplicate)", len(parsed.Storage.Files))
	}
	for path, want := range map[string][]byte{"/etc/small": []byte("replaced\n"), "/etc/large": large} {
		got, ok, err := FileContents(parsed, path)
		if err != nil || !ok || !bytes.Equal(got, want) {
			t.Errorf("%s: ok=%v err=%v, %d bytes, want %d", path, ok, err, len(got), len(want))
		}
	}
	if f := parsed.Storage.Files[0]; f.Path != "/etc/large" || f.Contents.Compression == nil || *f.Contents.Compression != "gzip" {
		t.Errorf("large file not sorted first or not compressed: %+v", f.Node)
	}
}

func TestMarshalRejectsInvalid(t *testing.T) {
	c := New()
	AddFile(&c, "relative/path", 0o644, []byte("x"))
	_, err := Marshal(c)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), "absolute") {
		t.Errorf("error does not say what is wrong: %v", err)
	}
}

func TestPointerIsValidAndDeterministic(t *testing.T) {
	p := Pointer("https://api-int.demo.example.com:22623/config/worker", []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"))
	a, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Marshal(p)
	if !bytes.Equal(a, b) {
		t.Fatal("marshal is not deterministic")
	}
	if !strings.Contains(string(a), `"version":"3.3.0"`) {
		t.Errorf("not spec 3.3.0: %s", a)
	}
}

func TestFromButane(t *testing.T) {
	src := []byte(`variant: fcos
version: 1.4.0
systemd:
  units:
    - name: hello.service
      enabled: true
      contents: |
        [Service]
        ExecStart=/bin/true
        [Install]
        WantedBy=multi-user.target
`)
	c, err := FromButane("hello.bu", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Systemd.Units) != 1 || c.Systemd.Units[0].Name != "hello.service" || !*c.Systemd.Units[0].Enabled {
		t.Fatalf("units = %+v", c.Systemd.Units)
	}
	if _, err := FromButane("bad.bu", []byte("variant: fcos\nversion: 1.4.0\nbogus: 1\n")); err == nil {
		t.Fatal("unknown Butane key accepted")
	}
}
