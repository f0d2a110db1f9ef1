package scale

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
	"github.com/kiln-project/kiln/assets/installconfig/types/ssh"
)

// Request is what the user asks for: replica counts and, optionally, which
// machines go.
type Request struct {
	// Masters and Workers are the counts wanted.
	Masters, Workers int
	// Remove names machines to remove when a count shrinks (else the
	// highest indexes go first).
	Remove []string
	// Replace names masters to replace with a fresh machine each: their
	// etcd member and machine go, a new one takes their place.
	Replace []string
	// Force allows an even number of masters (any from 1).
	Force bool
	// Want names the masters and workers wanted, on a platform whose
	// install-config names its machines (the ssh platform's hosts): the
	// plan adds those the cluster lacks and removes those not named.
	// Masters and Workers are then its counts, and Remove is unused.
	Want *machines.Shape
	// Hosts are the platform.ssh.hosts wanted (with Want), recorded in
	// --dir before the plan runs: the machines added are installed on
	// them.
	Hosts []ssh.Host
}

// Op is what an Action does.
type Op string

// Actions.
const (
	// OpAdd creates a machine and joins it.
	OpAdd Op = "+"
	// OpRemove takes a machine out of the cluster and destroys it.
	OpRemove Op = "-"
	// OpReplace removes a failed master and adds a fresh machine of the
	// same name.
	OpReplace Op = "~"
	// OpFinish completes the join of a master a previous run added.
	OpFinish Op = ">"
)

// Action is one step of a plan on one machine.
type Action struct {
	Op   Op
	Role string
	Name string
}

// String is the action as the plan prints it.
func (a Action) String() string {
	switch a.Op {
	case OpReplace:
		return fmt.Sprintf("~ replace %s %s", a.Role, a.Name)
	case OpFinish:
		return fmt.Sprintf("> finish joining %s %s", a.Role, a.Name)
	}
	return fmt.Sprintf("%s %s %s", a.Op, a.Role, a.Name)
}

// Plan is an ordered list of actions from one shape to another.
type Plan struct {
	From, To machines.Shape
	Actions  []Action
}

// Creates reports whether the plan creates a machine (an add or a
// replacement).
func (p *Plan) Creates() bool {
	return slices.ContainsFunc(p.Actions, func(a Action) bool { return a.Op == OpAdd || a.Op == OpReplace })
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Actions) == 0 }

// Print writes the plan as Terraform would: one line per machine, then a
// summary.
func (p *Plan) Print(w io.Writer) {
	if p.Empty() {
		fmt.Fprintf(w, "No changes: %d masters and %d workers, as requested.\n", len(p.From.Masters), len(p.From.Workers))
		return
	}
	fmt.Fprintln(w, "kiln will change the cluster's machines:")
	n := map[Op]int{}
	for _, a := range p.Actions {
		fmt.Fprintf(w, "  %s\n", a)
		n[a.Op]++
	}
	fmt.Fprintf(w, "Plan: %d to add, %d to replace, %d to remove; %d masters and %d workers after.\n",
		n[OpAdd], n[OpReplace], n[OpRemove], len(p.To.Masters), len(p.To.Workers))
}

// ValidMasters are the master counts kiln keeps: an odd etcd membership.
var validMasters = []int{1, 3, 5}

// MakePlan plans req from the current shape cur of cluster infraID.
// pending names machines a previous run began to remove: they go first.
// unjoined names machines of cur a previous run added but did not finish
// joining: masters that are not a voting etcd member or not behind the load
// balancer, and machines whose join token is still recorded.
// Every problem of req is reported at once, each with its flag.
func MakePlan(infraID string, cur machines.Shape, req Request, pending, unjoined []string) (*Plan, error) {
	if req.Want != nil {
		req.Masters, req.Workers = len(req.Want.Masters), len(req.Want.Workers)
	}
	var errs field.ErrorList
	switch {
	case req.Masters < 1:
		errs = append(errs, field.Invalid(field.NewPath("controlPlane", "replicas"), req.Masters, "a cluster needs a master"))
	case !slices.Contains(validMasters, req.Masters) && !req.Force:
		errs = append(errs, field.NotSupported(field.NewPath("controlPlane", "replicas"), req.Masters,
			[]string{"1", "3", "5 (an odd etcd membership; --force allows others)"}))
	}
	if req.Workers < 0 {
		errs = append(errs, field.Invalid(field.NewPath("compute[0]", "replicas"), req.Workers, "must not be negative"))
	}
	all := cur.All()
	for i, n := range req.Remove {
		if !slices.Contains(all, n) {
			errs = append(errs, field.NotFound(field.NewPath("--remove").Index(i), n))
		}
	}
	for i, n := range req.Replace {
		switch {
		case !slices.Contains(cur.Masters, n):
			errs = append(errs, field.Invalid(field.NewPath("--replace").Index(i), n, "not a master of the cluster"))
		case slices.Contains(req.Remove, n):
			errs = append(errs, field.Invalid(field.NewPath("--replace").Index(i), n, "also named by --remove"))
		}
	}
	if req.Want != nil {
		if len(req.Remove) > 0 {
			errs = append(errs, field.Forbidden(field.NewPath("--remove"), "the machines wanted are named: leave out the ones to remove"))
		}
		for _, n := range pending {
			if slices.Contains(req.Want.All(), n) {
				errs = append(errs, field.Invalid(field.NewPath("platform", "ssh", "hosts"), n,
					"an interrupted scale is removing it: finish that removal first (a --config without it), then add it again"))
			}
		}
		for i, n := range req.Replace {
			if !slices.Contains(req.Want.Masters, n) {
				errs = append(errs, field.Invalid(field.NewPath("--replace").Index(i), n, "not a master wanted"))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	p := &Plan{From: cur}
	var replaced []string
	for _, n := range req.Replace {
		if !slices.Contains(pending, n) {
			p.Actions = append(p.Actions, Action{OpReplace, machines.RoleMaster, n})
			replaced = append(replaced, n)
		}
	}
	var masters, workers []string
	var mActions, wActions []Action
	if req.Want != nil {
		masters, mActions = converge(machines.RoleMaster, cur.Masters, req.Want.Masters, pending)
		workers, wActions = converge(machines.RoleWorker, cur.Workers, req.Want.Workers, pending)
	} else {
		masters, mActions = resize(infraID, machines.RoleMaster, cur.Masters, req.Masters, prefer(req.Remove, pending), replaced)
		workers, wActions = resize(infraID, machines.RoleWorker, cur.Workers, req.Workers, prefer(req.Remove, pending), nil)
	}
	// Masters first, adds before removes so the control plane never
	// shrinks below its size on the way; workers are added before any is
	// drained, so its pods have somewhere to go.
	var finishWorkers []Action
	for _, n := range slices.Compact(slices.Sorted(slices.Values(unjoined))) {
		switch {
		case slices.Contains(cur.Masters, n) && slices.Contains(masters, n) && !slices.Contains(replaced, n):
			p.Actions = append(p.Actions, Action{OpFinish, machines.RoleMaster, n})
		case slices.Contains(cur.Workers, n) && slices.Contains(workers, n):
			finishWorkers = append(finishWorkers, Action{OpFinish, machines.RoleWorker, n})
		}
	}
	p.Actions = append(p.Actions, ordered(mActions)...)
	p.Actions = append(p.Actions, finishWorkers...)
	p.Actions = append(p.Actions, ordered(wActions)...)
	p.To = machines.Shape{Masters: masters, Workers: workers}
	return p, nil
}

// prefer lists the machines to remove first: pending removals, then the
// user's choice.
func prefer(remove, pending []string) []string {
	return append(slices.Clone(pending), remove...)
}

// resize returns names grown or shrunk to want and the actions that do it.
// Removals take the preferred names first, then the highest indexes; adds
// take the lowest free indexes. keep are never removed.
func resize(infraID, role string, names []string, want int, preferred, keep []string) ([]string, []Action) {
	out := slices.Clone(names)
	var acts []Action
	removeOne := func(n string) {
		out = slices.DeleteFunc(out, func(x string) bool { return x == n })
		acts = append(acts, Action{OpRemove, role, n})
	}
	for _, n := range preferred {
		if slices.Contains(out, n) && !slices.Contains(keep, n) {
			removeOne(n)
		}
	}
	for len(out) > want {
		byIndex := slices.Clone(out)
		slices.SortFunc(byIndex, func(a, b string) int { return cmp.Compare(index(infraID, b), index(infraID, a)) })
		i := slices.IndexFunc(byIndex, func(n string) bool { return !slices.Contains(keep, n) })
		if i < 0 {
			break
		}
		removeOne(byIndex[i])
	}
	for i := 0; len(out) < want; i++ {
		n := machines.Name(infraID, role, i)
		if !slices.Contains(out, n) && !slices.ContainsFunc(acts, func(a Action) bool { return a.Name == n }) {
			out = append(out, n)
			acts = append(acts, Action{OpAdd, role, n})
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(index(infraID, a), index(infraID, b)) })
	return out, acts
}

// converge returns the machines of role wanted, names, and the actions
// from cur to them: the pending removals and the machines of cur not
// wanted go, the wanted ones cur lacks come, in want's order.
func converge(role string, cur, want, pending []string) ([]string, []Action) {
	var out []string
	var acts []Action
	for _, n := range cur {
		if slices.Contains(want, n) && !slices.Contains(pending, n) {
			out = append(out, n)
		} else {
			acts = append(acts, Action{OpRemove, role, n})
		}
	}
	for _, n := range want {
		if !slices.Contains(cur, n) {
			out = append(out, n)
			acts = append(acts, Action{OpAdd, role, n})
		}
	}
	return out, acts
}

// ordered puts adds before removes, each group in name order.
func ordered(acts []Action) []Action {
	slices.SortStableFunc(acts, func(a, b Action) int {
		if a.Op != b.Op {
			return strings.Compare(string(a.Op), string(b.Op)) // "+" (0x2b) before "-" (0x2d)
		}
		return 0
	})
	return acts
}

// index is a machine's index, or -1 for a name not of infraID.
func index(infraID, name string) int {
	if _, i, ok := machines.Index(infraID, name); ok {
		return i
	}
	return -1
}
