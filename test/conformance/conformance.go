// Package conformance holds what kiln's runs of the upstream Kubernetes
// conformance suite share: the focus of the full run and of the subset the
// end-to-end tests run, and the summary of a ginkgo JUnit report
// ("conformance: P passed, F failed, S skipped of N"). test/conformance/run.sh
// drives e2e.test; test/conformance/cmd/conformance prints the focus and the
// summary for it.
package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// FullFocus selects every conformance spec.
const FullFocus = `\[Conformance\]`

// subset are the conformance specs `make conformance-subset` and the
// end-to-end suite run: the areas a kiln regression would break first
// (service routing from the API server, DNS, OIDC discovery, webhooks),
// chosen to finish in under 10 minutes. Names are codenames from
// conformance.yaml in k8s.io/kubernetes/test/conformance/testdata of the
// pinned release.
var subset = [...]string{
	"[sig-network] DNS should provide DNS for the cluster [Conformance]",
	"[sig-network] DNS should provide DNS for services [Conformance]",
	"[sig-network] Services should serve a basic endpoint from pods [Conformance]",
	"[sig-network] Services should be able to create a functioning NodePort service [Conformance]",
	"[sig-network] Services should find a service from listing all namespaces [Conformance]",
	"[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should mutate configmap [Conformance]",
	"[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should be able to deny pod and configmap creation [Conformance]",
	"[sig-api-machinery] CustomResourceDefinition resources [Privileged:ClusterAdmin] Simple CustomResourceDefinition creating/deleting custom resource definition objects works [Conformance]",
	"[sig-api-machinery] CustomResourceConversionWebhook [Privileged:ClusterAdmin] should be able to convert from CR v1 to CR v2 [Conformance]",
	"[sig-api-machinery] Watchers should observe add, update, and delete watch notifications on configmaps [Conformance]",
	"[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]",
	"[sig-node] Pods should get a host IP [NodeConformance] [Conformance]",
	`[sig-node] Probing container should be restarted with a exec "cat /tmp/health" liveness probe [NodeConformance] [Conformance]`,
	"[sig-node] Probing container with readiness probe should not be ready before initial delay and never restart [NodeConformance] [Conformance]",
	"[sig-apps] Deployment RollingUpdateDeployment should delete old pods and create new ones [Conformance]",
	"[sig-apps] Job should delete a job [Conformance]",
	"[sig-auth] ServiceAccounts ServiceAccountIssuerDiscovery should support OIDC discovery of service account issuer [Conformance]",
	"[sig-auth] ServiceAccounts should mount an API token into pods [Conformance]",
}

// Subset returns the names of the subset's specs.
func Subset() []string {
	return append([]string(nil), subset[:]...)
}

// SubsetFocus returns the ginkgo focus regexp that selects exactly the
// subset's specs.
func SubsetFocus() string {
	return anyOf(subset[:])
}

// cannotRun are the conformance specs that cannot pass on kiln's nodes;
// docs/conformance.md gives each one's reason and evidence.
var cannotRun = [...]string{
	"[sig-node] ImageVolume should succeed with pod and pull policy of Always [LinuxOnly] [MinimumKubeletVersion:1.35] [Conformance]",
}

// CannotRunSkip returns the ginkgo skip regexp that leaves out exactly the
// specs that cannot run here.
func CannotRunSkip() string {
	return anyOf(cannotRun[:])
}

// anyOf returns a regexp matching any of the spec names.
func anyOf(names []string) string {
	quoted := make([]string, len(names))
	for i, s := range names {
		quoted[i] = regexp.QuoteMeta(s)
	}
	return strings.Join(quoted, "|")
}

// Summary counts the specs of a report that the focus selected.
type Summary struct {
	// Label starts the summary line: "conformance" when empty.
	Label                   string
	Passed, Failed, Skipped int
	// Failures names the failed specs, sorted.
	Failures []string
	// SuiteFailures names the failed suite nodes, e.g. a
	// SynchronizedBeforeSuite that could not reach the cluster: then no spec
	// ran at all.
	SuiteFailures []string
}

// Total returns the number of specs counted.
func (s Summary) Total() int { return s.Passed + s.Failed + s.Skipped }

// String returns the summary line make conformance (and make netpol,
// labelled "netpol") prints.
func (s Summary) String() string {
	label := s.Label
	if label == "" {
		label = "conformance"
	}
	return fmt.Sprintf("%s: %d passed, %d failed, %d skipped of %d", label, s.Passed, s.Failed, s.Skipped, s.Total())
}

// junitSuites is the part of a ginkgo JUnit report the summary reads.
type junitSuites struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string    `xml:"name,attr"`
	Status  string    `xml:"status,attr"`
	Failure *struct{} `xml:"failure"`
	Error   *struct{} `xml:"error"`
	Skipped *struct{} `xml:"skipped"`
}

// itPrefix starts the name of every spec in a ginkgo JUnit report; suite
// nodes (named after ginkgo's SynchronizedBeforeSuite or ReportAfterSuite)
// have other prefixes.
const itPrefix = "[It] "

// ParseJUnit summarizes the report read from r, counting the specs whose
// text matches focus; nil counts every spec.
func ParseJUnit(r io.Reader, focus *regexp.Regexp) (Summary, error) {
	var res results
	if err := res.read(r, focus); err != nil {
		return Summary{}, err
	}
	return res.summary(), nil
}

// outcome is what became of one spec. A spec run in one report and
// skipped in another (a parallel pass skips the specs marked Serial that a serial
// pass runs) counts by its most telling outcome: failed, then passed, then
// skipped.
type outcome int

const (
	skipped outcome = iota
	passed
	failedSpec
)

// results merges the specs of one or more JUnit reports.
type results struct {
	specs         map[string]outcome
	suiteFailures []string
}

// read adds the specs of the report read from r whose text matches focus.
func (res *results) read(r io.Reader, focus *regexp.Regexp) error {
	var doc junitSuites
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		return fmt.Errorf("reading the JUnit report: %w", err)
	}
	if res.specs == nil {
		res.specs = map[string]outcome{}
	}
	for _, suite := range doc.Suites {
		for _, c := range suite.Cases {
			text, ok := strings.CutPrefix(c.Name, itPrefix)
			if !ok {
				if failed(c) {
					res.suiteFailures = append(res.suiteFailures, c.Name)
				}
				continue
			}
			if focus != nil && !focus.MatchString(text) {
				continue
			}
			o := passed
			switch {
			case c.Status == "skipped" || c.Status == "pending" || (c.Status == "" && c.Skipped != nil):
				o = skipped
			case failed(c):
				o = failedSpec
			}
			if prev, seen := res.specs[text]; !seen || o > prev {
				res.specs[text] = o
			}
		}
	}
	return nil
}

// summary counts the merged specs.
func (res *results) summary() Summary {
	s := Summary{SuiteFailures: res.suiteFailures}
	for text, o := range res.specs {
		switch o {
		case passed:
			s.Passed++
		case skipped:
			s.Skipped++
		default:
			s.Failed++
			s.Failures = append(s.Failures, text)
		}
	}
	sort.Strings(s.Failures)
	return s
}

// failed reports whether a report entry failed: failed, panicked, timedout,
// interrupted or aborted, or (without a status) a failure or error element.
func failed(c junitCase) bool {
	switch c.Status {
	case "passed", "skipped", "pending":
		return false
	case "":
		return c.Failure != nil || c.Error != nil
	}
	return true
}

// SummarizeDir summarizes every junit*.xml report in dir and the
// directories under it (a run in several passes keeps one per pass),
// counting each spec once.
func SummarizeDir(dir string, focus *regexp.Regexp) (Summary, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "junit") && strings.HasSuffix(d.Name(), ".xml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	if len(files) == 0 {
		return Summary{}, fmt.Errorf("no junit*.xml report in %s", dir)
	}
	var res results
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			return Summary{}, err
		}
		err = res.read(r, focus)
		r.Close()
		if err != nil {
			return Summary{}, fmt.Errorf("%s: %w", f, err)
		}
	}
	return res.summary(), nil
}
