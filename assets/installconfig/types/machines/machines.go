package machines

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Shape names the masters and workers of a cluster: the machines it runs
// besides the bootstrap machine. A machine's name is also its node's.
type Shape struct {
	Masters []string `json:"masters"`
	Workers []string `json:"workers"`
}

// Machine roles, as they appear in machine names.
const (
	RoleMaster = "master"
	RoleWorker = "worker"
)

// Name is the name of the machine of role with index i.
func Name(infraID, role string, i int) string {
	return fmt.Sprintf("%s-%s-%d", infraID, role, i)
}

// Index returns the role and index of a machine named by Name for
// infraID; ok is false for any other name.
func Index(infraID, name string) (role string, i int, ok bool) {
	rest, found := strings.CutPrefix(name, infraID+"-")
	if !found {
		return "", 0, false
	}
	role, num, found := strings.Cut(rest, "-")
	if !found || (role != RoleMaster && role != RoleWorker) {
		return "", 0, false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 || strconv.Itoa(i) != num {
		return "", 0, false
	}
	return role, i, true
}

// DefaultShape is the shape of a cluster as created: masters and workers
// numbered from 0.
func DefaultShape(infraID string, masters, workers int) Shape {
	var s Shape
	for i := range masters {
		s.Masters = append(s.Masters, Name(infraID, RoleMaster, i))
	}
	for i := range workers {
		s.Workers = append(s.Workers, Name(infraID, RoleWorker, i))
	}
	return s
}

// All returns the masters then the workers.
func (s Shape) All() []string {
	return append(slices.Clone(s.Masters), s.Workers...)
}
