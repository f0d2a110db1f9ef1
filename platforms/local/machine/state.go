package machine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kiln-project/kiln/graph/atomicfile"
)

// record is what a machine's state directory says about it: enough for a
// later process to find, enter and stop it.
type record struct {
	Name      string     `json:"name"`
	PID       int        `json:"pid"`
	StartTime uint64     `json:"startTime"` // of PID, to tell it from a reused pid
	SpecHash  string     `json:"specHash"`
	Mode      CgroupMode `json:"cgroupMode"`
	Bridge    string     `json:"bridge"`
	Address   string     `json:"address"`
	Image     string     `json:"image"`
	Veth      string     `json:"veth,omitempty"`
	Started   time.Time  `json:"started"`
}

const recordFile = "machine.json"

func (m *Manager) dir(name string) string { return filepath.Join(m.stateRoot, name) }

// readRecord returns the machine's record, or nil when there is none.
func (m *Manager) readRecord(name string) (*record, error) {
	data, err := os.ReadFile(filepath.Join(m.dir(name), recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("reading machine record of %s: %w", name, err)
	}
	return &r, nil
}

// writeRecord stores r atomically.
func (m *Manager) writeRecord(r *record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	// 0600, as it always was: the record is kiln's own bookkeeping.
	return atomicfile.Write(filepath.Join(m.dir(r.Name), recordFile), append(data, '\n'), 0o600)
}

// procInfo is what /proc/<pid>/stat says about a process.
type procInfo struct {
	Comm      string
	State     byte
	PPID      int
	StartTime uint64
}

// readProc parses /proc/<pid>/stat; ok is false when there is no such process.
func readProc(pid int) (procInfo, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	return parseProcStat(string(data))
}

// parseProcStat parses the text of a /proc/<pid>/stat file (proc(5)).
func parseProcStat(s string) (procInfo, bool) {
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procInfo{}, false
	}
	rest := strings.Fields(s[closing+1:])
	// rest[0] is field 3 (state); field 4 is ppid, field 22 starttime.
	if len(rest) < 20 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(rest[1])
	start, err2 := strconv.ParseUint(rest[19], 10, 64)
	if err1 != nil || err2 != nil || len(rest[0]) != 1 {
		return procInfo{}, false
	}
	return procInfo{Comm: s[open+1 : closing], State: rest[0][0], PPID: ppid, StartTime: start}, true
}

// alive says whether the record's nspawn process still runs.
func alive(r *record) bool {
	if r == nil || r.PID <= 0 {
		return false
	}
	p, ok := readProc(r.PID)
	return ok && p.State != 'Z' && p.StartTime == r.StartTime
}

// findLeader returns the machine's PID 1 as seen from the host: the child
// of the nspawn process that lives in another pid namespace.
func findLeader(nspawnPID int) int {
	own, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", nspawnPID))
	for _, pid := range childPIDs(nspawnPID) {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		if err == nil && ns != own {
			return pid
		}
	}
	return 0
}

// childPIDs lists a process's children.
func childPIDs(pid int) []int {
	var out []int
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err == nil {
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
		return out
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(c); ok && p.PPID == pid {
			out = append(out, c)
		}
	}
	return out
}

// lock takes the machine's lock, shared by every process using the same
// state root, and returns its release.
func (m *Manager) lock(name string) (func(), error) {
	dir := filepath.Join(m.stateRoot, ".locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	unlock, err := atomicfile.Lock(m.stateRoot, filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", name, err)
	}
	return unlock, nil
}
