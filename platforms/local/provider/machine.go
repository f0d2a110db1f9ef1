package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/tfstate"
)

var (
	_ resource.Resource                 = (*machineResource)(nil)
	_ resource.ResourceWithConfigure    = (*machineResource)(nil)
	_ resource.ResourceWithUpgradeState = (*machineResource)(nil)
)

// machineResource is kilnlocal_machine: one machine of machine.Manager.
type machineResource struct {
	b *Backend
}

// machineModel is the resource's data; it maps 1:1 to machine.Spec.
type machineModel struct {
	ID          types.String  `tfsdk:"id"`
	Name        types.String  `tfsdk:"name"`
	Image       types.String  `tfsdk:"image"`
	Bridge      types.String  `tfsdk:"bridge"`
	Address     types.String  `tfsdk:"address"`
	Hosts       []hostModel   `tfsdk:"hosts"`
	Routes      []string      `tfsdk:"routes"`
	Gateway     types.String  `tfsdk:"gateway"`
	Ignition    types.String  `tfsdk:"ignition"`
	Env         types.Map     `tfsdk:"env"`
	CPUs        types.Float64 `tfsdk:"cpus"`
	MemoryBytes types.Int64   `tfsdk:"memory_bytes"`
	Binds       []bindModel   `tfsdk:"binds"`
	State       types.String  `tfsdk:"state"`
}

// hostModel is machine.HostEntry.
type hostModel struct {
	IP    types.String `tfsdk:"ip"`
	Names []string     `tfsdk:"names"`
}

// bindModel is machine.Bind.
type bindModel struct {
	Source   types.String `tfsdk:"source"`
	Target   types.String `tfsdk:"target"`
	ReadOnly types.Bool   `tfsdk:"read_only"`
}

// spec converts the model to a machine.Spec; an empty image is defImage.
func (m *machineModel) spec(ctx context.Context, defImage string) (machine.Spec, error) {
	s := machine.Spec{
		Name:        m.Name.ValueString(),
		Image:       m.Image.ValueString(),
		Bridge:      m.Bridge.ValueString(),
		Address:     m.Address.ValueString(),
		Routes:      m.Routes,
		Gateway:     m.Gateway.ValueString(),
		Ignition:    []byte(m.Ignition.ValueString()),
		CPUs:        m.CPUs.ValueFloat64(),
		MemoryBytes: m.MemoryBytes.ValueInt64(),
	}
	if s.Image == "" {
		s.Image = defImage
	}
	for _, h := range m.Hosts {
		s.Hosts = append(s.Hosts, machine.HostEntry{IP: h.IP.ValueString(), Names: h.Names})
	}
	for _, b := range m.Binds {
		s.Binds = append(s.Binds, machine.Bind{Source: b.Source.ValueString(), Target: b.Target.ValueString(), ReadOnly: b.ReadOnly.ValueBool()})
	}
	if !m.Env.IsNull() && !m.Env.IsUnknown() {
		s.Env = map[string]string{}
		if d := m.Env.ElementsAs(ctx, &s.Env, false); d.HasError() {
			return s, diagError(d)
		}
	}
	return s, nil
}

// Metadata implements resource.Resource.
func (r *machineResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_machine"
}

// Schema implements resource.Resource. Every attribute but state forces
// replacement: a machine is configured once, by Ignition, at its first
// boot. state changes in place: Read reports what the machine does, so a
// machine that crashed is state = "stopped", plan shows the drift, and
// apply starts it again from its disk; kiln stop cluster asks for
// "stopped", and apply stops it cleanly.
func (r *machineResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	str := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Version:     stateSchemaVersion,
		Description: "A systemd-nspawn machine booted from the node image on a host bridge.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The machine name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name":    schema.StringAttribute{Required: true, PlanModifiers: str, Description: "Machine name and host name."},
			"image":   schema.StringAttribute{Optional: true, PlanModifiers: str, Description: "Node image rootfs directory; the provider's image_dir when unset."},
			"bridge":  schema.StringAttribute{Required: true, PlanModifiers: str, Description: "Host bridge of the machine's veth."},
			"address": schema.StringAttribute{Required: true, PlanModifiers: str, Description: "Machine address with prefix, e.g. 10.66.0.11/24."},
			"hosts": schema.ListNestedAttribute{Optional: true, Description: "Lines of /etc/hosts.",
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"ip":    schema.StringAttribute{Required: true},
					"names": schema.ListAttribute{Required: true, ElementType: types.StringType},
				}}},
			"routes": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				Description:   "IPv4 prefixes routed on-link through the machine's interface (the service network); never a default route."},
			"gateway": schema.StringAttribute{Optional: true, PlanModifiers: str,
				Description: "The host's address on the bridge, the machine's default route (networking.egress NAT); unset, the machine reaches the bridge only."},
			"ignition": schema.StringAttribute{Required: true, Sensitive: true, PlanModifiers: str,
				Description: "Ignition config applied at first boot."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				Description:   "Written to /etc/kiln/node.env."},
			"cpus": schema.Float64Attribute{Optional: true,
				PlanModifiers: []planmodifier.Float64{float64planmodifier.RequiresReplace()},
				Description:   "CPU quota in cores; unlimited when unset or 0."},
			"memory_bytes": schema.Int64Attribute{Optional: true,
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
				Description:   "Memory limit; unlimited when unset or 0."},
			"binds": schema.ListNestedAttribute{Optional: true, Description: "Extra bind mounts from the host.",
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"source":    schema.StringAttribute{Required: true},
					"target":    schema.StringAttribute{Required: true},
					"read_only": schema.BoolAttribute{Optional: true},
				}}},
			"state": tfstate.Attribute("machine"),
		},
	}
}

// UpgradeState implements resource.ResourceWithUpgradeState: version 0
// had running (a bool) where state is.
func (r *machineResource) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	return runningToState()
}

// Configure implements resource.ResourceWithConfigure.
func (r *machineResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.b = configureBackend(req, resp)
}

// Create implements resource.Resource. The Manager removes a machine that
// fails to start, so nothing is left outside the state.
func (r *machineResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m machineModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	want, err := tfstate.Desired(m.State)
	var s machine.Spec
	if err == nil {
		s, err = m.spec(ctx, r.b.Settings.ImageDir)
	}
	if err == nil {
		err = r.b.Machines.Create(ctx, s)
	}
	if err != nil {
		addErr(&resp.Diagnostics, "create", "machine "+m.Name.ValueString(), err)
		return
	}
	m.ID = m.Name
	if want == machine.StateStopped {
		if err := r.b.Machines.Stop(ctx, s.Name); err != nil {
			addErr(&resp.Diagnostics, "create", "machine "+s.Name, err)
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read implements resource.Resource: an absent machine leaves the state,
// so the next apply creates it again; otherwise state is what the machine
// does, so an apply that asks for something else starts or stops it.
func (r *machineResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m machineModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	st, err := r.b.Machines.State(ctx, m.Name.ValueString())
	if err != nil {
		addErr(&resp.Diagnostics, "read", "machine "+m.Name.ValueString(), err)
		return
	}
	if st == machine.StateAbsent {
		resp.State.RemoveResource(ctx)
		return
	}
	m.State = types.StringValue(st.String())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update implements resource.Resource: only state changes in place. A
// machine to run is started from its existing disk (never re-provisioned);
// one to stop is stopped cleanly, keeping its disk.
func (r *machineResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m machineModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	want, err := tfstate.Desired(m.State)
	var s machine.Spec
	if err == nil {
		s, err = m.spec(ctx, r.b.Settings.ImageDir)
	}
	if err == nil {
		err = r.setState(ctx, s, want)
	}
	if err != nil {
		addErr(&resp.Diagnostics, "update", "machine "+m.Name.ValueString(), err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// setState starts the machine of s or stops it, as want says.
func (r *machineResource) setState(ctx context.Context, s machine.Spec, want platforms.MachineState) error {
	switch want {
	case platforms.MachineRunning:
		return r.b.Machines.Start(ctx, s)
	case platforms.MachineStopped:
		return r.b.Machines.Stop(ctx, s.Name)
	}
	return &platforms.StateError{Word: want.String(), Allowed: platforms.DesiredStates()}
}

// Delete implements resource.Resource.
func (r *machineResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m machineModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.b.Machines.Destroy(ctx, m.Name.ValueString()); err != nil {
		addErr(&resp.Diagnostics, "delete", "machine "+m.Name.ValueString(), err)
	}
}
