package nodeimage

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// errNoMirror means the host's apt sources name no Debian mirror for the
// node image's suite.
var errNoMirror = errors.New("no Debian mirror for the suite found in the host's apt sources")

// detectMirror returns the URI of the first "deb" source of suite that the
// host's apt uses: <root>/etc/apt/sources.list, then the *.list and
// *.sources (deb822) files in sources.list.d in name order, as apt reads
// them. Files with other suffixes are ignored, as apt ignores them. Using
// the host's own mirror keeps the build on the one Debian host the machine
// already reaches.
func detectMirror(root, suite string) (string, error) {
	files := []string{filepath.Join(root, "etc/apt/sources.list")}
	dir := filepath.Join(root, "etc/apt/sources.list.d")
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".list") || strings.HasSuffix(e.Name(), ".sources") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, filepath.Join(dir, n))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		var uri string
		if strings.HasSuffix(f, ".sources") {
			uri = mirrorFromDeb822(string(data), suite)
		} else {
			uri = mirrorFromList(string(data), suite)
		}
		if uri != "" {
			return strings.TrimSuffix(uri, "/"), nil
		}
	}
	return "", errNoMirror
}

// mirrorFromList reads one-line-style sources:
// "deb [options] uri suite component...".
func mirrorFromList(text, suite string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 2 && f[1] == suite {
			return f[0]
		}
	}
	return ""
}

// mirrorFromDeb822 reads deb822-style sources: stanzas of "Key: value"
// fields separated by blank lines.
func mirrorFromDeb822(text, suite string) string {
	for _, stanza := range strings.Split(strings.ReplaceAll(text, "\r", ""), "\n\n") {
		fields := map[string]string{}
		var last string
		for _, line := range strings.Split(stanza, "\n") {
			switch {
			case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "":
			case line[0] == ' ' || line[0] == '\t':
				if last != "" {
					fields[last] += " " + strings.TrimSpace(line)
				}
			default:
				k, v, ok := strings.Cut(line, ":")
				if !ok {
					continue
				}
				last = strings.ToLower(strings.TrimSpace(k))
				fields[last] = strings.TrimSpace(v)
			}
		}
		if strings.EqualFold(fields["enabled"], "no") || !hasWord(fields["types"], "deb") || !hasWord(fields["suites"], suite) {
			continue
		}
		if uris := strings.Fields(fields["uris"]); len(uris) > 0 {
			return uris[0]
		}
	}
	return ""
}

func hasWord(list, word string) bool {
	for _, w := range strings.Fields(list) {
		if w == word {
			return true
		}
	}
	return false
}
