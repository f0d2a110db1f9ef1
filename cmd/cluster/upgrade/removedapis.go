package upgrade

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-project/kiln/assets/release"
)

// RemovedAPI is an API version that the cluster's clients still asked for
// and that a target release no longer serves.
type RemovedAPI struct {
	Group, Version, Resource, Subresource string
	// RemovedIn is the release that removes it, "1.36".
	RemovedIn string
}

// String names the API as kubectl would: "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io".
func (r RemovedAPI) String() string {
	s := r.Resource
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	s += "." + r.Version
	if r.Group != "" {
		s += "." + r.Group
	}
	return s + " (removed in " + r.RemovedIn + ")"
}

// deprecatedAPIsMetric is the API server's gauge of the deprecated API
// versions requested since it started, labelled with the release that
// removes each.
const deprecatedAPIsMetric = "apiserver_requested_deprecated_apis"

// labelRE matches one label of a Prometheus text sample.
var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// RemovedAPIs reads an API server's /metrics text and returns the
// deprecated API versions its clients asked for that are removed in the
// target's minor or before, sorted. Clients still on them (a manifest in
// a pipeline, an old operator) break once the target serves the cluster.
func RemovedAPIs(metrics io.Reader, target release.Version) ([]RemovedAPI, error) {
	var out []RemovedAPI
	sc := bufio.NewScanner(metrics)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, deprecatedAPIsMetric+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		if end < 0 {
			continue
		}
		if value := strings.TrimSpace(line[end+1:]); value == "0" || strings.HasPrefix(value, "0 ") {
			continue
		}
		labels := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(line[:end], -1) {
			labels[m[1]] = m[2]
		}
		removed := labels["removed_release"]
		if removed == "" || !removedBy(removed, target) {
			continue
		}
		out = append(out, RemovedAPI{Group: labels["group"], Version: labels["version"], Resource: labels["resource"],
			Subresource: labels["subresource"], RemovedIn: removed})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	slices.SortFunc(out, func(a, b RemovedAPI) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out), nil
}

// removedBy reports whether removedIn, a release such as "1.36", is
// target's minor or older.
func removedBy(removedIn string, target release.Version) bool {
	major, minor, ok := strings.Cut(removedIn, ".")
	if !ok {
		return false
	}
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return false
	}
	return release.Version{Major: ma, Minor: mi}.Compare(release.Version{Major: target.Major, Minor: target.Minor}) <= 0
}
