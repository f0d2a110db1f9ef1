package upgrade

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kiln-project/kiln/assets/release"
)

// Change is one component of a step going from one version to another.
type Change struct {
	Component Component
	// From is the version running, zero when not known.
	From release.Version
	To   release.Version
}

// Step is one step of a plan: the changes it makes on its nodes, in order.
type Step struct {
	// Nodes are the nodes the step changes: one master, a batch of
	// workers, or none for the cluster's add-ons.
	Nodes []string
	// Changes are made in this order on each node.
	Changes []Change
	// Drain is true when the nodes are cordoned and drained first and
	// uncordoned once they are Ready again: their kubelet restarts.
	Drain bool
}

// Where names the step's nodes, "add-ons" for the cluster's.
func (s Step) Where() string {
	if len(s.Nodes) == 0 {
		return "add-ons"
	}
	return strings.Join(s.Nodes, ", ")
}

// Plan is an ordered list of steps that moves a cluster to a release.
type Plan struct {
	// From is the oldest Kubernetes version the cluster's API servers
	// run; Partly is true when some component runs another one already
	// (an upgrade begun before).
	From   release.Version
	Partly bool
	// To is the release the cluster moves to.
	To    release.Release
	Steps []Step
	// Nodes is how many nodes the cluster has.
	Nodes int
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Steps) == 0 }

// Options are the choices of a plan.
type Options struct {
	// WorkerBatch is how many workers a step drains and changes at once;
	// one when zero.
	WorkerBatch int
}

// RefusedError is why a plan is refused: every reason at once.
type RefusedError struct {
	To      string
	Reasons []string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refusing to upgrade to %s:\n  - %s", e.To, strings.Join(e.Reasons, "\n  - "))
}

// targets are the versions of to, by component.
func targets(to release.Release) map[Component]release.Version {
	k := release.MustParseVersion(to.Kubernetes)
	return map[Component]release.Version{
		Etcd: release.MustParseVersion(to.Etcd), KubeAPIServer: k, KubeControllerManager: k, KubeScheduler: k,
		Kubelet: k, KubeProxy: k, CoreDNS: release.MustParseVersion(to.CoreDNS),
	}
}

// MakePlan plans the move of a cluster in state s to release to. It refuses
// (a *RefusedError, every reason at once) a downgrade of any component, a
// skipped minor of Kubernetes or etcd, a cluster that breaks the
// version-skew policy already, and a plan that would break it after any
// single change.
func MakePlan(s State, to release.Release, o Options) (*Plan, error) {
	want := targets(to)
	refused := &RefusedError{To: to.Kubernetes}
	refused.Reasons = append(refused.Reasons, direction(s, want)...)
	if v := Violations(s); len(v) > 0 {
		refused.Reasons = append(refused.Reasons, "the cluster breaks the version-skew policy already: "+strings.Join(v, "; "))
	}
	if len(refused.Reasons) > 0 {
		return nil, refused
	}
	p := &Plan{To: to, Steps: steps(s, want, o), Nodes: len(s.Nodes)}
	p.From, p.Partly = from(s)
	sim := s.clone()
	for i, st := range p.Steps {
		for _, c := range st.Changes {
			for _, n := range st.Nodes {
				sim.node(n).Versions[c.Component] = c.To
			}
			if len(st.Nodes) == 0 {
				sim.Addons[c.Component] = c.To
			}
			if v := Violations(sim); len(v) > 0 {
				refused.Reasons = append(refused.Reasons, fmt.Sprintf("step %d (%s: %s to %s) would break the version-skew policy: %s",
					i+1, st.Where(), c.Component, display(c.Component, c.To), strings.Join(v, "; ")))
				return nil, refused
			}
		}
	}
	return p, nil
}

// direction refuses each component that the target would move backwards or
// more than one minor forwards.
func direction(s State, want map[Component]release.Version) []string {
	var out []string
	check := func(where string, c Component, v release.Version) {
		w := want[c]
		switch {
		case v.IsZero():
		case v.Compare(w) > 0:
			out = append(out, fmt.Sprintf("%s: %s runs %s, newer than %s: kiln does not downgrade", where, c, display(c, v), display(c, w)))
		case c != CoreDNS && w.Minors(v) > 1:
			out = append(out, fmt.Sprintf("%s: %s runs %s, more than one minor older than %s: upgrade through each minor in turn",
				where, c, display(c, v), display(c, w)))
		}
	}
	for _, n := range s.Nodes {
		for _, c := range append(slices.Clone(masterComponents), Kubelet) {
			check(n.Name, c, n.Versions[c])
		}
	}
	for _, c := range []Component{KubeProxy, CoreDNS} {
		check("add-ons", c, s.Addons[c])
	}
	return out
}

// steps lists what changes, in the order the skew policy needs: every etcd
// member, one master at a time; each master's API server, then its
// controller manager and scheduler (they talk to their own API server
// only); the masters' kubelets, once no API server is older than they
// would be; the workers, in batches; then kube-proxy and CoreDNS.
func steps(s State, want map[Component]release.Version, o Options) []Step {
	var out []Step
	changes := func(vs map[Component]release.Version, cs ...Component) []Change {
		var ch []Change
		for _, c := range cs {
			if vs[c] != want[c] {
				ch = append(ch, Change{Component: c, From: vs[c], To: want[c]})
			}
		}
		return ch
	}
	masters, workers := s.masters(), s.workers()
	for _, m := range masters {
		if ch := changes(m.Versions, Etcd); len(ch) > 0 {
			out = append(out, Step{Nodes: []string{m.Name}, Changes: ch})
		}
	}
	for _, m := range masters {
		if ch := changes(m.Versions, KubeAPIServer, KubeControllerManager, KubeScheduler); len(ch) > 0 {
			out = append(out, Step{Nodes: []string{m.Name}, Changes: ch})
		}
	}
	for _, m := range masters {
		if ch := changes(m.Versions, Kubelet); len(ch) > 0 {
			out = append(out, Step{Nodes: []string{m.Name}, Changes: ch, Drain: true})
		}
	}
	batch := max(o.WorkerBatch, 1)
	var pending []Node
	flush := func() {
		if len(pending) == 0 {
			return
		}
		st := Step{Drain: true}
		for _, w := range pending {
			st.Nodes = append(st.Nodes, w.Name)
		}
		// A batch's workers may run different versions (an upgrade
		// begun before): the step shows its first one's.
		st.Changes = changes(pending[0].Versions, Kubelet)
		out = append(out, st)
		pending = nil
	}
	for _, w := range workers {
		if len(changes(w.Versions, Kubelet)) == 0 {
			continue
		}
		if pending = append(pending, w); len(pending) == batch {
			flush()
		}
	}
	flush()
	if ch := changes(s.Addons, KubeProxy, CoreDNS); len(ch) > 0 {
		out = append(out, Step{Changes: ch})
	}
	return out
}

// from is the oldest Kubernetes version a component of s runs (the
// release the cluster is upgraded from), and whether another component
// runs another version (an upgrade begun before).
func from(s State) (release.Version, bool) {
	var all []release.Version
	for _, n := range s.Nodes {
		for c, v := range n.Versions {
			if c != Etcd && !v.IsZero() {
				all = append(all, v)
			}
		}
	}
	if v := s.Addons[KubeProxy]; !v.IsZero() {
		all = append(all, v)
	}
	if len(all) == 0 {
		return release.Version{}, false
	}
	oldest := slices.MinFunc(all, release.Version.Compare)
	return oldest, slices.ContainsFunc(all, func(v release.Version) bool { return v != oldest })
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// display is a version as its component writes it: etcd without the "v".
func display(c Component, v release.Version) string {
	if c == Etcd {
		return etcdString(v)
	}
	return v.String()
}

// Print writes the plan, one line per change, numbered by step, then a
// summary.
func (p *Plan) Print(w io.Writer) {
	if p.Empty() {
		fmt.Fprintf(w, "Nothing to upgrade: the cluster runs %s.\n", p.To.Kubernetes)
		return
	}
	partly := ""
	if p.Partly {
		partly = " (partly upgraded already)"
	}
	if p.From == release.MustParseVersion(p.To.Kubernetes) {
		// Kubernetes stays: a component kiln now pins newer with it
		// (etcd 3.6 with v1.36.3) is what changes.
		fmt.Fprintf(w, "kiln will bring the cluster's components to those of %s%s, in this order:\n", p.To.Kubernetes, partly)
	} else {
		fmt.Fprintf(w, "kiln will upgrade the cluster from %s%s to %s, in this order:\n", p.From, partly, p.To.Kubernetes)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	nodes := map[string]bool{}
	for i, st := range p.Steps {
		where := st.Where()
		if st.Drain {
			where += " (drained)"
		}
		for j, c := range st.Changes {
			num := fmt.Sprintf("%3d", i+1)
			if j > 0 {
				num, where = "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s → %s\n", num, where, c.Component, display(c.Component, c.From), display(c.Component, c.To))
		}
		for _, n := range st.Nodes {
			nodes[n] = true
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "Plan: %s on %s.\n", plural(len(p.Steps), "step"), plural(len(nodes), "node"))
}
