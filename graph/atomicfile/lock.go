package atomicfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Lock takes an exclusive flock(2) on the file name, which must be root or
// below it, creating it (0600) when missing, and waits while another
// process holds it. Like OpenFile it follows no symbolic link below root:
// run as root, a lock file planted as a link would otherwise be created or
// opened wherever the link points. unlock releases the lock and leaves the
// file: removing it while a waiter has it open would let a third process
// lock a new file, and two would hold "the" lock at once.
func Lock(root, name string) (unlock func(), err error) {
	f, err := OpenFile(root, name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", name, err)
	}
	return func() { f.Close() }, nil
}
