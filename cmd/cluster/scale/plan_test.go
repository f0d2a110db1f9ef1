package scale

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-project/kiln/assets/installconfig/types/machines"
)

const infra = "demo-x7k2p"

func names(role string, is ...int) []string {
	var out []string
	for _, i := range is {
		out = append(out, machines.Name(infra, role, i))
	}
	return out
}

func ms(is ...int) []string { return names(machines.RoleMaster, is...) }
func ws(is ...int) []string { return names(machines.RoleWorker, is...) }

func acts(lines ...string) []string { return lines }

func planLines(p *Plan) []string {
	var out []string
	for _, a := range p.Actions {
		out = append(out, strings.ReplaceAll(a.String(), infra+"-", ""))
	}
	return out
}

// TestMakePlan checks the plan for each kind of change: what is added
// (lowest free index), removed (named, pending, else highest index),
// replaced and finished, in the order they run, and the shape after.
func TestMakePlan(t *testing.T) {
	for _, tc := range []struct {
		name              string
		cur               machines.Shape
		req               Request
		pending, unjoined []string
		want              []string
		masters, workers  []string
	}{
		{name: "grow 1+1 to 3+2", cur: machines.Shape{Masters: ms(0), Workers: ws(0)}, req: Request{Masters: 3, Workers: 2},
			want:    acts("+ master master-1", "+ master master-2", "+ worker worker-1"),
			masters: ms(0, 1, 2), workers: ws(0, 1)},
		{name: "nothing", cur: machines.Shape{Masters: ms(0), Workers: ws(0)}, req: Request{Masters: 1, Workers: 1},
			masters: ms(0), workers: ws(0)},
		{name: "shrink takes the highest index", cur: machines.Shape{Masters: ms(0, 1, 2), Workers: ws(0, 1, 2)}, req: Request{Masters: 1, Workers: 2},
			want:    acts("- master master-2", "- master master-1", "- worker worker-2"),
			masters: ms(0), workers: ws(0, 1)},
		{name: "named removal", cur: machines.Shape{Masters: ms(0), Workers: ws(0, 1)}, req: Request{Masters: 1, Workers: 1, Remove: ws(0)},
			want:    acts("- worker worker-0"),
			masters: ms(0), workers: ws(1)},
		{name: "named removal at the same count adds a new name first", cur: machines.Shape{Masters: ms(0), Workers: ws(0, 1)}, req: Request{Masters: 1, Workers: 2, Remove: ws(0)},
			want:    acts("+ worker worker-2", "- worker worker-0"),
			masters: ms(0), workers: ws(1, 2)},
		{name: "a pending removal goes first", cur: machines.Shape{Masters: ms(0), Workers: ws(0, 1)}, req: Request{Masters: 1, Workers: 1}, pending: ws(0),
			want:    acts("- worker worker-0"),
			masters: ms(0), workers: ws(1)},
		{name: "replace keeps the name and count", cur: machines.Shape{Masters: ms(0, 1, 2), Workers: ws(0)}, req: Request{Masters: 3, Workers: 1, Replace: ms(1)},
			want:    acts("~ replace master master-1"),
			masters: ms(0, 1, 2), workers: ws(0)},
		{name: "an unjoined master is finished", cur: machines.Shape{Masters: ms(0, 1), Workers: ws(0)}, req: Request{Masters: 3, Workers: 1}, unjoined: ms(1),
			want:    acts("> finish joining master master-1", "+ master master-2"),
			masters: ms(0, 1, 2), workers: ws(0)},
		{name: "an unjoined worker is finished after the masters, before other workers", cur: machines.Shape{Masters: ms(0), Workers: ws(0, 1)},
			req: Request{Masters: 3, Workers: 3}, unjoined: ws(1, 1),
			want:    acts("+ master master-1", "+ master master-2", "> finish joining worker worker-1", "+ worker worker-2"),
			masters: ms(0, 1, 2), workers: ws(0, 1, 2)},
		{name: "an unjoined worker being removed is not finished", cur: machines.Shape{Masters: ms(0), Workers: ws(0, 1)},
			req: Request{Masters: 1, Workers: 1, Remove: ws(1)}, unjoined: ws(1),
			want:    acts("- worker worker-1"),
			masters: ms(0), workers: ws(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := MakePlan(infra, tc.cur, tc.req, tc.pending, tc.unjoined)
			if err != nil {
				t.Fatal(err)
			}
			if got := planLines(p); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("actions = %q, want %q", got, tc.want)
			}
			if !reflect.DeepEqual(p.To.Masters, tc.masters) || !reflect.DeepEqual(p.To.Workers, tc.workers) {
				t.Errorf("to = %q %q, want %q %q", p.To.Masters, p.To.Workers, tc.masters, tc.workers)
			}
			if p.Empty() != (len(tc.want) == 0) {
				t.Errorf("Empty = %v", p.Empty())
			}
		})
	}
}

// TestMakePlanInvalid checks that every problem of a request is reported
// at once, each naming its field or flag.
func TestMakePlanInvalid(t *testing.T) {
	cur := machines.Shape{Masters: ms(0, 1, 2), Workers: ws(0)}
	_, err := MakePlan(infra, cur, Request{Masters: 2, Workers: -1, Remove: ws(7), Replace: append(ws(0), ms(1)...)}, nil, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"controlPlane.replicas: Unsupported value: 2",
		"compute[0].replicas: Invalid value: -1",
		"--remove[0]: Not found: \"demo-x7k2p-worker-7\"",
		"--replace[0]: Invalid value: \"demo-x7k2p-worker-0\": not a master",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, bad := range []int{0, 2, 4, 6} {
		if _, err := MakePlan(infra, cur, Request{Masters: bad, Workers: 1}, nil, nil); err == nil {
			t.Errorf("%d masters accepted", bad)
		}
	}
	if _, err := MakePlan(infra, cur, Request{Masters: 2, Workers: 1, Force: true}, nil, nil); err != nil {
		t.Errorf("2 masters with --force: %v", err)
	}
	if _, err := MakePlan(infra, cur, Request{Masters: 0, Workers: 1, Force: true}, nil, nil); err == nil {
		t.Error("0 masters accepted with --force")
	}
}

// TestPlanPrint checks the Terraform-like listing and its summary.
func TestPlanPrint(t *testing.T) {
	p, err := MakePlan(infra, machines.Shape{Masters: ms(0, 1, 2), Workers: ws(0, 1)}, Request{Masters: 3, Workers: 2, Remove: ws(0), Replace: ms(2)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	p.Print(&b)
	want := `kiln will change the cluster's machines:
  ~ replace master demo-x7k2p-master-2
  + worker demo-x7k2p-worker-2
  - worker demo-x7k2p-worker-0
Plan: 1 to add, 1 to replace, 1 to remove; 3 masters and 2 workers after.
`
	if b.String() != want {
		t.Errorf("plan:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestBriefReadyz checks that a long /readyz answer comes down to its
// failed checks.
func TestBriefReadyz(t *testing.T) {
	err := errors.New(`an error on the server ("[+]ping ok\n[-]etcd failed: reason withheld\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed")`)
	if got, want := briefReadyz(err), "/readyz: failing etcd, rbac/bootstrap-roles"; got != want {
		t.Errorf("briefReadyz = %q, want %q", got, want)
	}
	if got := briefReadyz(errors.New("dial tcp: connection refused")); got != "/readyz: dial tcp: connection refused" {
		t.Errorf("briefReadyz = %q", got)
	}
}
