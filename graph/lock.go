package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/graph/installdir"
)

// Holder is what a kiln holding the lock of --dir writes into the lock file.
type Holder struct {
	// PID is the holder's process ID.
	PID int `json:"pid"`
	// PIDNamespace tells two processes with the same PID in different PID
	// namespaces (containers sharing --dir) apart.
	PIDNamespace string `json:"pidNamespace,omitempty"`
	// Command is the holder's command line, e.g. "kiln create cluster".
	Command string `json:"command"`
	// Since is when it took the lock.
	Since time.Time `json:"since"`
}

// BusyError is returned when another kiln holds the lock of --dir.
type BusyError struct {
	// Dir is the directory.
	Dir string
	// Holder is the other kiln; nil when it has not named itself yet.
	Holder *Holder
}

// Error names the holder and what to do.
func (e *BusyError) Error() string {
	who := "another kiln process"
	if h := e.Holder; h != nil {
		who = fmt.Sprintf("another kiln (pid %d, %q, since %s)", h.PID, h.Command, h.Since.Local().Format(time.DateTime))
	}
	return fmt.Sprintf("%s is in use by %s; wait for it to finish or stop it, then run kiln again", e.Dir, who)
}

// Lock is the held lock of one --dir.
type Lock struct {
	f      *os.File
	path   string
	made   string // --dir, when LockDir created it
	closed bool
}

// LockDir takes the lock of dir, creating dir if it is missing, for command
// (a name for messages, e.g. "kiln create cluster"). When another kiln holds
// it, the error is a *BusyError, at once: kiln never waits for another run
// to finish.
func LockDir(dir, command string) (*Lock, error) {
	l := &Lock{path: filepath.Join(dir, installdir.Lock)}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		l.made = dir
	}
	for {
		// Opened without following a link: as root, a planted
		// .kiln.lock -> /etc/shadow would be truncated by the write below.
		f, err := atomicfile.OpenFile(dir, l.path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) {
				err = &InputError{Err: fmt.Errorf("--dir %s: not a directory", dir)}
			}
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			defer f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				// The holder names itself right after taking the lock.
				h := readHolder(f)
				for i := 0; h == nil && i < 50; i++ {
					time.Sleep(10 * time.Millisecond)
					h = readHolder(f)
				}
				return nil, &BusyError{Dir: dir, Holder: h}
			}
			return nil, fmt.Errorf("lock %s: %w", l.path, err)
		}
		// The previous holder may have removed the file between our open
		// and our flock: then we locked a file nobody else will open.
		if sameFile(f, l.path) {
			l.f = f
			break
		}
		f.Close()
	}
	h := Holder{PID: os.Getpid(), PIDNamespace: pidNamespace(), Command: command, Since: time.Now()}
	b, _ := json.Marshal(h)
	b = append(b, '\n')
	if _, err := l.f.WriteAt(b, 0); err == nil {
		_ = l.f.Truncate(int64(len(b)))
	}
	return l, nil
}

// Unlock removes the lock file and releases the lock; it removes --dir too
// when LockDir created it and it is still empty. It is safe to call twice.
func (l *Lock) Unlock() error {
	if l == nil || l.closed {
		return nil
	}
	l.closed = true
	// While still holding the lock: see LockDir. unlink(2) removes a
	// link, never what it points to, and --dir itself is followed as named.
	err := os.Remove(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if l.made != "" {
		_ = os.Remove(l.made) // fails, as it should, unless empty
	}
	return err
}

// heldHere tells whether this process holds the lock of dir (through a Lock
// of its caller's): the lock file then names this process.
func heldHere(dir string) bool {
	f, err := atomicfile.OpenFile(dir, filepath.Join(dir, installdir.Lock), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	// Only a holder writes the file, so while it is locked it names the
	// holder; a file nobody holds proves nothing.
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	h := readHolder(f)
	return h != nil && h.PID == os.Getpid() && h.PIDNamespace == pidNamespace()
}

func readHolder(f *os.File) *Holder {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
	if err != nil || len(b) == 0 {
		return nil
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	h := &Holder{}
	if json.Unmarshal(line, h) != nil || h.PID == 0 {
		return nil
	}
	return h
}

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

func pidNamespace() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
}
