package graph_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-project/kiln/graph"
	"github.com/kiln-project/kiln/graph/installdir"
)

// D2: one lock per --dir; the second kiln is told who holds it.
func TestLockDirIsExclusiveAndNamesTheHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	l, err := graph.LockDir(dir, "kiln create cluster")
	if err != nil {
		t.Fatal(err)
	}
	_, err = graph.LockDir(dir, "kiln create manifests")
	var busy *graph.BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("second LockDir: %v, want a BusyError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(msg, "kiln create cluster") {
		t.Errorf("message %q does not name the holder's pid and command", msg)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the --dir LockDir created is left after Unlock: %v", err)
	}
	l, err = graph.LockDir(dir, "kiln create manifests")
	if err != nil {
		t.Fatalf("LockDir after Unlock: %v", err)
	}
	l.Unlock()
}

// A killed holder never leaves a stale lock: the kernel drops it.
func TestLockOfKilledHolderIsFree(t *testing.T) {
	if dir := os.Getenv("KILN_TEST_LOCK_HOLDER"); dir != "" {
		l, err := graph.LockDir(dir, "kiln create cluster")
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("locked\n")
		for { // until killed; l must stay reachable, its finalizer would unlock
			time.Sleep(time.Second)
			runtime.KeepAlive(l)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockOfKilledHolderIsFree$")
	cmd.Env = append(os.Environ(), "KILN_TEST_LOCK_HOLDER="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		cmd.Process.Kill()
		t.Fatalf("holder said %q", line)
	}
	_, err = graph.LockDir(dir, "kiln destroy cluster")
	if err == nil {
		t.Fatal("LockDir succeeded while another process holds the lock")
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("while held: %v, want the holder's pid %d", err, cmd.Process.Pid)
	}
	cmd.Process.Kill() // SIGKILL: no clean-up runs
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, installdir.Lock)); err != nil {
		t.Fatalf("the killed holder's lock file is gone (%v): the test proves nothing", err)
	}
	l, err := graph.LockDir(dir, "kiln destroy cluster")
	if err != nil {
		t.Fatalf("lock of a killed holder: %v", err)
	}
	l.Unlock()
}
