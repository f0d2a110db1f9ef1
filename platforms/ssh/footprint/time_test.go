package footprint

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/platforms/shellquote"
)

// timeHost is a host for time.sh: fake systemctl and chronyc on PATH
// (systemctl knows the units in units, logs its calls and, on restart,
// touches the timesyncd flag; chronyc reports the clock synchronised
// from its syncAfter'th call on), the record in rec.
type timeHost struct {
	dir, rec, log string
}

func newTimeHost(t *testing.T, units []string, active string, syncAfter int) timeHost {
	t.Helper()
	dir := t.TempDir()
	h := timeHost{dir: dir, rec: filepath.Join(dir, "rec"), log: filepath.Join(dir, "log")}
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{bin, h.rec} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("systemctl", `echo "systemctl $*" >>`+h.log+`
case "$1" in
cat) case " `+strings.Join(units, " ")+` " in *" ${2%.service} "*) exit 0 ;; esac; exit 1 ;;
is-active) [ "$2" = --quiet ] && exit 0; echo `+active+`; [ `+active+` = active ] ;;
restart) mkdir -p `+dir+`/run && : >`+dir+`/run/synchronized ;;
esac
exit 0
`)
	write("chronyc", `n=$(cat `+dir+`/calls 2>/dev/null || echo 0); n=$((n + 1)); echo $n >`+dir+`/calls
case "$*" in
*tracking*) if [ $n -ge `+strconv.Itoa(syncAfter)+` ]; then echo 'C0A80001,192.0.2.1,3,1.0,0,0,0,0,0,0,0,0,0,Normal'; else echo '00000000,,0,0,0,0,0,0,0,0,0,0,0,Not synchronised'; fi ;;
*sources*) echo "^? 192.0.2.1 unreachable" ;;
esac
`)
	if err := os.WriteFile(filepath.Join(h.rec, "recorded"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// run runs TimeScript(servers) on h with its files under h.dir, waiting at
// most wait seconds.
func (h timeHost) run(t *testing.T, servers []string, wait string) (string, error) {
	t.Helper()
	s := TimeScript(servers)
	for from, to := range map[string]string{
		"rec=" + shellquote.Quote(RecordDir):                                  "rec=" + h.rec,
		"chrony_file=" + shellquote.Quote(ChronySourcesFile):                  "chrony_file=" + h.dir + "/etc/chrony/sources.d/kiln.sources",
		"timesyncd_file=" + shellquote.Quote(TimesyncdDropIn):                 "timesyncd_file=" + h.dir + "/etc/timesyncd.conf.d/kiln.conf",
		"timesyncd_flag=" + shellquote.Quote(TimesyncdFlag):                   "timesyncd_flag=" + h.dir + "/run/synchronized",
		"wait=" + shellquote.Quote(strconv.Itoa(int(TimeSyncWait.Seconds()))): "wait=" + wait,
	} {
		if !strings.Contains(s, from+"\n") {
			t.Fatalf("TimeScript sets no %s", from)
		}
		s = strings.Replace(s, from+"\n", to+"\n", 1)
	}
	cmd := exec.Command("/bin/sh", "-c", s)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(h.dir, "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (h timeHost) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTimeScriptChrony: chrony, stopped before, gets every server in its
// sources file, is enabled and restarted, and the script returns once
// chronyc says the clock is synchronised; the record says what to give
// back.
func TestTimeScriptChrony(t *testing.T) {
	h := newTimeHost(t, []string{"chrony", "systemd-timesyncd"}, "inactive", 3)
	out, err := h.run(t, []string{"192.0.2.1", "ntp.example.com"}, "120")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got, want := h.read(t, "etc/chrony/sources.d/kiln.sources"), "server 192.0.2.1 iburst prefer\nserver ntp.example.com iburst prefer\n"; got != want {
		t.Errorf("sources file %q, want %q", got, want)
	}
	if got := h.read(t, "rec/time-client") + h.read(t, "rec/time-active"); got != "chrony\ninactive\n" {
		t.Errorf("record %q", got)
	}
	if log := h.read(t, "log"); !strings.Contains(log, "systemctl enable --quiet chrony.service\nsystemctl restart chrony.service\n") {
		t.Errorf("systemctl calls:\n%s", log)
	}
	if !strings.Contains(out, "time: chrony synchronised with 192.0.2.1 ntp.example.com after 2s") {
		t.Errorf("output %q", out)
	}
	// Run again (a resumed install): the record keeps what the host had.
	if out, err := h.run(t, []string{"192.0.2.1"}, "120"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := h.read(t, "rec/time-active"); got != "inactive\n" {
		t.Errorf("a second run changed the record: %q", got)
	}
}

// TestTimeScriptTimesyncd: without chrony, systemd-timesyncd gets a
// drop-in that replaces its server list, and the script waits for the flag
// file it writes after the restart.
func TestTimeScriptTimesyncd(t *testing.T) {
	h := newTimeHost(t, []string{"systemd-timesyncd"}, "active", 1)
	out, err := h.run(t, []string{"192.0.2.1", "192.0.2.2"}, "120")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got, want := h.read(t, "etc/timesyncd.conf.d/kiln.conf"), "[Time]\nNTP=\nNTP=192.0.2.1 192.0.2.2\n"; got != want {
		t.Errorf("drop-in %q, want %q", got, want)
	}
	if got := h.read(t, "rec/time-client") + h.read(t, "rec/time-active"); got != "systemd-timesyncd\nactive\n" {
		t.Errorf("record %q", got)
	}
}

// TestTimeScriptFails: a host without a client, and one whose clock does
// not synchronise in time, fail with what is wrong.
func TestTimeScriptFails(t *testing.T) {
	h := newTimeHost(t, nil, "inactive", 1)
	out, err := h.run(t, []string{"192.0.2.1"}, "120")
	if err == nil || !strings.Contains(out, "none of chrony chronyd systemd-timesyncd is installed") {
		t.Errorf("no client: %v\n%s", err, out)
	}
	h = newTimeHost(t, []string{"chrony"}, "active", 99)
	out, err = h.run(t, []string{"192.0.2.1"}, "1")
	if err == nil || !strings.Contains(out, "chrony did not synchronise the clock with 192.0.2.1 in 1s") || !strings.Contains(out, "192.0.2.1 unreachable") {
		t.Errorf("no answer: %v\n%s", err, out)
	}
}
