package machine

import (
	"os"
	"sort"
	"strings"
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	MountPoint   string
	FSType       string
	SuperOptions string
}

// parseMountinfo parses a mountinfo text (proc(5)); malformed lines are skipped.
func parseMountinfo(text string) []mountEntry {
	var out []mountEntry
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 {
			continue
		}
		out = append(out, mountEntry{
			MountPoint:   unescapeMount(fields[4]),
			FSType:       fields[sep+1],
			SuperOptions: fields[sep+3],
		})
	}
	return out
}

// unescapeMount undoes the octal escapes (\040 for a space...) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			v := 0
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + int(c-'0')
			}
			if ok {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder returns the mount points at or below dir, deepest first, so
// they can be unmounted in that order.
func mountsUnder(mountinfo, dir string) []string {
	var out []string
	for _, m := range parseMountinfo(mountinfo) {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			out = append(out, m.MountPoint)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out
}

// hostMountsUnder reads the host's mount table and returns mountsUnder dir.
func hostMountsUnder(dir string) ([]string, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return mountsUnder(string(mi), dir), nil
}

// overlayMountArgv mounts the machine's copy-on-write root.
func overlayMountArgv(image, upper, work, root string) []string {
	return []string{"mount", "-t", "overlay", "overlay",
		"-o", "lowerdir=" + image + ",upperdir=" + upper + ",workdir=" + work, root}
}

// umountArgv unmounts one mount point; lazy detaches it even when busy.
func umountArgv(mountPoint string, lazy bool) []string {
	if lazy {
		return []string{"umount", "--lazy", mountPoint}
	}
	return []string{"umount", mountPoint}
}
