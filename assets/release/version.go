package release

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Version is the numbers of a semantic version: Kubernetes' v1.36.3, or
// etcd's 3.6.16. The zero Version means "not known".
type Version struct {
	Major, Minor, Patch int
}

// ParseVersion reads "v1.36.3" or "1.36.3"; a pre-release or build suffix
// ("v1.36.3-rc.0", "v1.36.3+kiln") is ignored, as the skew policy counts
// minors only.
func ParseVersion(s string) (Version, error) {
	t := strings.TrimPrefix(s, "v")
	if i := strings.IndexAny(t, "-+"); i >= 0 {
		t = t[:i]
	}
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("version %q: want major.minor.patch", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("version %q: %q is not a number", s, p)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

// MustParseVersion is ParseVersion of a version kiln pins itself (a
// Release's); it panics on anything else.
func MustParseVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// String is the version with a leading "v", as Kubernetes writes it.
func (v Version) String() string {
	if v.IsZero() {
		return "unknown"
	}
	return fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// IsZero reports whether v is not known.
func (v Version) IsZero() bool { return v == Version{} }

// Compare orders versions: -1, 0 or 1 as v is older than, equal to or
// newer than o.
func (v Version) Compare(o Version) int {
	if c := cmp.Compare(v.Major, o.Major); c != 0 {
		return c
	}
	if c := cmp.Compare(v.Minor, o.Minor); c != 0 {
		return c
	}
	return cmp.Compare(v.Patch, o.Patch)
}

// Minors is how many minor versions v is newer than o (negative when
// older); versions of different majors are far apart.
func (v Version) Minors(o Version) int {
	if v.Major != o.Major {
		return 1000 * cmp.Compare(v.Major, o.Major)
	}
	return v.Minor - o.Minor
}

// MarshalText writes v as String does, "" when it is not known.
func (v Version) MarshalText() ([]byte, error) {
	if v.IsZero() {
		return []byte{}, nil
	}
	return []byte(v.String()), nil
}

// UnmarshalText reads what MarshalText wrote.
func (v *Version) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*v = Version{}
		return nil
	}
	p, err := ParseVersion(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}
