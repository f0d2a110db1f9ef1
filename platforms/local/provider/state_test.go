package provider

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
)

func TestUpgradeRunning(t *testing.T) {
	for _, tt := range []struct {
		in, state string
	}{
		{`{"name":"m","running":true}`, "running"},
		{`{"name":"m","running":false}`, "stopped"},
		{`{"name":"m","running":null}`, "running"},
		{`{"name":"m"}`, "running"},
	} {
		out, err := upgradeRunning([]byte(tt.in))
		if err != nil {
			t.Errorf("upgradeRunning(%s): %v", tt.in, err)
			continue
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if want := map[string]any{"name": "m", "state": tt.state}; !reflect.DeepEqual(got, want) {
			t.Errorf("upgradeRunning(%s) = %s, want %v", tt.in, out, want)
		}
	}
	for _, bad := range []string{`{"running":"yes"}`, `[]`} {
		if out, err := upgradeRunning([]byte(bad)); err == nil {
			t.Errorf("upgradeRunning(%s) = %s, want an error", bad, out)
		}
	}
}

// machineFixture is a kilnlocal_machine resource on an in-process fake
// host, with the model of one machine.
type machineFixture struct {
	r    *machineResource
	fake fakeHost
	s    resource.SchemaResponse
	m    machineModel
}

func newMachineFixture(t *testing.T) *machineFixture {
	f := &machineFixture{fake: fakeHost{dir: t.TempDir()}}
	f.r = &machineResource{b: &Backend{Machines: f.fake, Settings: Settings{ImageDir: "/images/node"}}}
	f.r.Schema(context.Background(), resource.SchemaRequest{}, &f.s)
	f.m = machineModel{
		ID: types.StringValue("demo-master-0"), Name: types.StringValue("demo-master-0"),
		Image: types.StringNull(), Bridge: types.StringValue("kiln0"), Address: types.StringValue("10.66.0.11/24"),
		Ignition: types.StringValue("{}"), Env: types.MapNull(types.StringType),
		CPUs: types.Float64Null(), MemoryBytes: types.Int64Null(), State: types.StringValue("running"),
	}
	return f
}

// model returns the fixture's model with state.
func (f *machineFixture) model(state string) *machineModel {
	m := f.m
	m.State = types.StringValue(state)
	return &m
}

// plan returns the model with state as a plan.
func (f *machineFixture) plan(t *testing.T, state string) tfsdk.Plan {
	p := tfsdk.Plan{Schema: f.s.Schema}
	noDiags(t, p.Set(context.Background(), f.model(state)))
	return p
}

// state returns the model with state as a state.
func (f *machineFixture) state(t *testing.T, state string) tfsdk.State {
	s := tfsdk.State{Schema: f.s.Schema}
	noDiags(t, s.Set(context.Background(), f.model(state)))
	return s
}

// noDiags fails the test on error diagnostics.
func noDiags(t *testing.T, d diag.Diagnostics) {
	t.Helper()
	if d.HasError() {
		t.Fatal(d)
	}
}

// stateOf returns the state attribute of s.
func stateOf(t *testing.T, s tfsdk.State) string {
	var v types.String
	if d := s.GetAttribute(context.Background(), path.Root("state"), &v); d.HasError() {
		t.Fatal(d)
	}
	return v.ValueString()
}

// TestMachineUpdate: Update starts or stops the machine in place, as the
// plan's state asks, and records the state it asked for; a state that is
// not one of platforms.DesiredStates does nothing.
func TestMachineUpdate(t *testing.T) {
	f := newMachineFixture(t)
	ctx := context.Background()
	spec, err := f.m.spec(ctx, "/images/node")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.fake.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		from, to string
		op       string
		want     machine.State
	}{
		{"running", "stopped", "stop:demo-master-0", machine.StateStopped},
		{"stopped", "stopped", "stop:demo-master-0", machine.StateStopped}, // a second stop is harmless
		{"stopped", "running", "start:demo-master-0", machine.StateRunning},
		{"running", "running", "start:demo-master-0", machine.StateRunning},
	} {
		before := len(f.fake.ops())
		resp := resource.UpdateResponse{State: tfsdk.State{Schema: f.s.Schema}}
		f.r.Update(ctx, resource.UpdateRequest{Plan: f.plan(t, tt.to), State: f.state(t, tt.from)}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatalf("%s -> %s: %v", tt.from, tt.to, resp.Diagnostics)
		}
		if got := f.fake.ops()[before:]; !slices.Equal(got, []string{tt.op}) {
			t.Errorf("%s -> %s: operations %q, want %q", tt.from, tt.to, got, tt.op)
		}
		if st, _ := f.fake.State(ctx, "demo-master-0"); st != tt.want {
			t.Errorf("%s -> %s: machine is %s, want %s", tt.from, tt.to, st, tt.want)
		}
		if got := stateOf(t, resp.State); got != tt.to {
			t.Errorf("%s -> %s: state records %q", tt.from, tt.to, got)
		}
	}

	before := len(f.fake.ops())
	resp := resource.UpdateResponse{State: tfsdk.State{Schema: f.s.Schema}}
	f.r.Update(ctx, resource.UpdateRequest{Plan: f.plan(t, "absent"), State: f.state(t, "running")}, &resp)
	if !resp.Diagnostics.HasError() || len(f.fake.ops()) != before {
		t.Errorf("state absent: diagnostics %v, operations %q; want an error and nothing done", resp.Diagnostics, f.fake.ops()[before:])
	}
	var se *platforms.StateError
	if err := f.r.setState(ctx, spec, platforms.MachineAbsent); !errors.As(err, &se) || se.Word != "absent" {
		t.Errorf("setState(absent) = %v, want a *platforms.StateError", err)
	}
}

// TestMachineCreateAndRead: a machine created to be stopped is created,
// then stopped; Read reports what it does, and an absent machine leaves
// the state.
func TestMachineCreateAndRead(t *testing.T) {
	f := newMachineFixture(t)
	ctx := context.Background()
	create := resource.CreateResponse{State: tfsdk.State{Schema: f.s.Schema}}
	f.r.Create(ctx, resource.CreateRequest{Plan: f.plan(t, "stopped")}, &create)
	if create.Diagnostics.HasError() {
		t.Fatal(create.Diagnostics)
	}
	if got, want := f.fake.ops(), []string{"create:demo-master-0", "stop:demo-master-0"}; !slices.Equal(got, want) {
		t.Errorf("operations %q, want %q", got, want)
	}
	read := func(from string) resource.ReadResponse {
		resp := resource.ReadResponse{State: f.state(t, from)}
		f.r.Read(ctx, resource.ReadRequest{State: f.state(t, from)}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatal(resp.Diagnostics)
		}
		return resp
	}
	if got := stateOf(t, read("running").State); got != "stopped" {
		t.Errorf("Read of a stopped machine recorded as running: %q, want stopped", got)
	}
	if err := f.fake.Start(ctx, mustSpec(t, f.m)); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, read("stopped").State); got != "running" {
		t.Errorf("Read of a running machine: %q", got)
	}
	if err := f.fake.Destroy(ctx, "demo-master-0"); err != nil {
		t.Fatal(err)
	}
	if resp := read("running"); !resp.State.Raw.IsNull() {
		t.Errorf("Read of an absent machine kept it in the state")
	}
}

func mustSpec(t *testing.T, m machineModel) machine.Spec {
	s, err := m.spec(context.Background(), "/images/node")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServiceLBConfig(t *testing.T) {
	m := serviceLBModel{
		Bridge: types.StringValue("kiln-x"), Network: types.StringValue("10.66.0.0/24"), Host: types.StringValue("10.66.0.1"),
		PoolFirst: types.StringValue("10.66.0.192"), PoolLast: types.StringValue("10.66.0.254"),
		Machines: map[string]string{"x-master-0": "10.66.0.11", "x-worker-0": "10.66.0.21"},
	}
	cfg, err := m.config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bridge != "kiln-x" || cfg.Pool.String() != "10.66.0.192-10.66.0.254" || cfg.Machines.Network.String() != "10.66.0.0/24" ||
		cfg.Machines.Host.String() != "10.66.0.1" || cfg.Machines.String() != "x-master-0=10.66.0.11, x-worker-0=10.66.0.21" {
		t.Errorf("config = %+v", cfg)
	}
	m.PoolLast, m.Machines["x-worker-0"] = types.StringValue("last"), "ten"
	if _, err := m.config(); err == nil {
		t.Error("config with bad addresses: no error")
	}
}
