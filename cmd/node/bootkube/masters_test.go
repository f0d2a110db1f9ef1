package bootkube

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sirupsen/logrus/hooks/test"
)

func TestMastersRecordRoundTrip(t *testing.T) {
	done := filepath.Join(t.TempDir(), "bootkube.done")
	log, _ := test.NewNullLogger()
	if ms, err := loadMasters(done, log); ms != nil || err != nil {
		t.Fatalf("loadMasters without a record = %v, %v; want nil, nil", ms, err)
	}
	want := []master{{Name: "m-0", IP: "10.66.0.11"}, {Name: "m-1", IP: "10.66.0.12"}}
	if err := saveMasters(done, want); err != nil {
		t.Fatal(err)
	}
	got, err := loadMasters(done, log)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("loadMasters = %v, %v; want %v", got, err, want)
	}
}

// A record torn by a crash in the middle of its write must not stop every
// later run: it is dropped, and the run grows etcd again.
func TestTornMastersRecordIsDropped(t *testing.T) {
	for _, torn := range []string{"", `[{"name":"m-0","ip":"10.66.`, "null", "[]"} {
		done := filepath.Join(t.TempDir(), "bootkube.done")
		if err := os.WriteFile(mastersFile(done), []byte(torn), 0o644); err != nil {
			t.Fatal(err)
		}
		log, hook := test.NewNullLogger()
		ms, err := loadMasters(done, log)
		if ms != nil || err != nil {
			t.Errorf("loadMasters of %q = %v, %v; want nil, nil", torn, ms, err)
		}
		if _, err := os.Stat(mastersFile(done)); !os.IsNotExist(err) {
			t.Errorf("the torn record %q was kept: %v", torn, err)
		}
		if len(hook.Entries) != 1 {
			t.Errorf("torn record %q: %d log entries, want one warning", torn, len(hook.Entries))
		}
	}
}
