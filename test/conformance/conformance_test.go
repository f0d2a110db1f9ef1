package conformance

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestParseJUnit(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "junit_01.xml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseJUnit(f, regexp.MustCompile(FullFocus))
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{Passed: 1, Failed: 2, Skipped: 2, Failures: []string{
		"[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should mutate configmap [Conformance]",
		"[sig-node] Pods should get a host IP [NodeConformance] [Conformance]",
	}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("summary = %+v\nwant %+v", s, want)
	}
	if got := s.String(); got != "conformance: 1 passed, 2 failed, 2 skipped of 5" {
		t.Errorf("line = %q", got)
	}

	all, err := SummarizeDir("testdata", nil)
	if err != nil {
		t.Fatal(err)
	}
	if all.Total() != 6 || all.Skipped != 3 {
		t.Errorf("without a focus: %+v, want the 6 specs (suite nodes left out), 3 skipped", all)
	}
	if _, err := SummarizeDir(t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "no junit") {
		t.Errorf("empty report dir: err = %v", err)
	}
	suiteFailed := `<testsuites><testsuite>
		<testcase name="[SynchronizedBeforeSuite]" status="failed"><failure>no kubeconfig</failure></testcase>
		<testcase name="[ReportAfterSuite] Kubernetes e2e suite report" status="passed"></testcase>
	</testsuite></testsuites>`
	s, err = ParseJUnit(strings.NewReader(suiteFailed), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Total() != 0 || !reflect.DeepEqual(s.SuiteFailures, []string{"[SynchronizedBeforeSuite]"}) {
		t.Errorf("a failed BeforeSuite: %+v, want no spec and the suite node's failure", s)
	}
	if _, err := ParseJUnit(strings.NewReader("<testsuites><testsuite>"), nil); err == nil {
		t.Error("a truncated report gave no error")
	}
}

func TestSubsetFocus(t *testing.T) {
	re, err := regexp.Compile(SubsetFocus())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Subset() {
		if !re.MatchString(name) {
			t.Errorf("the focus misses %q", name)
		}
		if !strings.HasSuffix(name, "[Conformance]") {
			t.Errorf("%q is not a conformance spec", name)
		}
	}
	for _, other := range []string{
		`[sig-node] Probing container should *not* be restarted with a exec "cat /tmp/health" liveness probe [NodeConformance] [Conformance]`,
		"[sig-network] DNS should provide DNS for ExternalName services [Conformance]",
		"[sig-apps] Job should manage the lifecycle of a job [Conformance]",
	} {
		if re.MatchString(other) {
			t.Errorf("the focus selects %q, which is not in the subset", other)
		}
	}
	areas := []string{"[sig-network] DNS", "[sig-network] Services", "NodePort", "AdmissionWebhook", "[sig-node] Pods", "[sig-node] Probing",
		"[sig-apps] Deployment", "[sig-apps] Job", "[sig-auth] ServiceAccounts", "OIDC discovery", "CustomResourceDefinition", "Watchers"}
	for _, a := range areas {
		found := false
		for _, name := range Subset() {
			found = found || strings.Contains(name, a)
		}
		if !found {
			t.Errorf("the subset covers no %s spec", a)
		}
	}
}

// A run in two passes (parallel, then the specs marked Serial) keeps one report per pass;
// each spec counts once, by the pass that ran it.
func TestSummarizeDirMergesPasses(t *testing.T) {
	dir := t.TempDir()
	report := func(sub string, cases ...string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		doc := "<testsuites><testsuite>" + strings.Join(cases, "") + "</testsuite></testsuites>"
		if err := os.WriteFile(filepath.Join(dir, sub, "junit_01.xml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := func(name, status string) string {
		return `<testcase name="[It] ` + name + ` [Conformance]" status="` + status + `"></testcase>`
	}
	report("parallel", spec("a", "passed"), spec("b [Serial]", "skipped"), spec("c [Serial]", "skipped"), spec("d", "failed"))
	report("serial", spec("a", "skipped"), spec("b [Serial]", "passed"), spec("c [Serial]", "failed"), spec("d", "skipped"))
	s, err := SummarizeDir(dir, regexp.MustCompile(FullFocus))
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{Passed: 2, Failed: 2, Failures: []string{"c [Serial] [Conformance]", "d [Conformance]"}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("merged = %+v\nwant %+v", s, want)
	}
}

// The default skip leaves out exactly the specs listed as cannot-run, and
// docs/conformance.md names each of them.
func TestCannotRunSkip(t *testing.T) {
	re, err := regexp.Compile(CannotRunSkip())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range cannotRun {
		if !re.MatchString(name) {
			t.Errorf("the skip misses %q", name)
		}
		short, _, _ := strings.Cut(strings.TrimPrefix(name, "[sig-node] "), " [")
		if !strings.Contains(string(doc), short) {
			t.Errorf("docs/conformance.md does not list %q", short)
		}
	}
	for _, name := range append(Subset(), "[sig-node] ImageVolume should succeed with pod and pull policy of IfNotPresent [LinuxOnly] [Conformance]") {
		if re.MatchString(name) {
			t.Errorf("the skip selects %q, which can run", name)
		}
	}
}

// netpolSpecs are the names of e2e.test v1.36.3's NetworkPolicy specs, from
// `e2e.test --ginkgo.dry-run --ginkgo.focus='\[Feature:NetworkPolicy\]'`
// (testdata/netpol-specs.txt).
func netpolSpecs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "netpol-specs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// The NetworkPolicy focus selects all 48 upstream specs, its subset exactly
// the listed ones (each a real spec name), and the skip exactly the 3 SCTP
// connectivity specs.
func TestNetpolFocusAndSkip(t *testing.T) {
	specs := netpolSpecs(t)
	if len(specs) != 48 {
		t.Fatalf("%d NetworkPolicy specs in testdata, want 48", len(specs))
	}
	all := regexp.MustCompile(NetpolFocus)
	subset := regexp.MustCompile(NetpolSubsetFocus())
	skip := regexp.MustCompile(NetpolCannotRunSkip())
	var inSubset, skipped int
	for _, s := range specs {
		if !all.MatchString(s) {
			t.Errorf("the focus misses %q", s)
		}
		if subset.MatchString(s) {
			inSubset++
		}
		if skip.MatchString(s) {
			skipped++
			if !strings.Contains(s, "using SCTP") {
				t.Errorf("the skip leaves out %q, which needs no SCTP socket", s)
			}
		}
	}
	if inSubset != len(NetpolSubset()) {
		t.Errorf("the subset focus selects %d specs, want the %d listed (a name that is no spec?)", inSubset, len(NetpolSubset()))
	}
	if skipped != 3 {
		t.Errorf("the skip leaves out %d specs, want the 3 SCTP connectivity ones", skipped)
	}
	for _, name := range NetpolSubset() {
		if skip.MatchString(name) {
			t.Errorf("subset spec %q is skipped", name)
		}
	}
}
