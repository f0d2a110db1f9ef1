package machine

import (
	"os"
	"syscall"
)

// ownerUID returns the owner of a file, -1 when unknown.
func ownerUID(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}
