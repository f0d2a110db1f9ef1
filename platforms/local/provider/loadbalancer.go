package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kiln-project/kiln/graph/atomicfile"
	"github.com/kiln-project/kiln/ignition/nodelayout"
	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/tfstate"
)

var (
	_ resource.Resource                 = (*loadBalancerResource)(nil)
	_ resource.ResourceWithConfigure    = (*loadBalancerResource)(nil)
	_ resource.ResourceWithUpgradeState = (*loadBalancerResource)(nil)
)

// Load balancer ports and timing.
const (
	// APIPort is the Kubernetes API port.
	APIPort = 6443
	// lbStopTimeout bounds the load balancer's graceful stop.
	lbStopTimeout = 10 * time.Second
	// lbStartTimeout bounds its start.
	lbStartTimeout = 30 * time.Second
)

// loadBalancerResource is kilnlocal_load_balancer: a detached `kiln lb`
// process. Its backends change in place (config rewritten, SIGHUP), which
// is how the bootstrap machine leaves the pools, and so does its state.
type loadBalancerResource struct {
	b *Backend
}

// loadBalancerModel is the resource's data.
type loadBalancerModel struct {
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	Listen      types.String `tfsdk:"listen"`
	APIPort     types.Int64  `tfsdk:"api_port"`
	MCSPort     types.Int64  `tfsdk:"mcs_port"`
	APIBackends []string     `tfsdk:"api_backends"`
	MCSBackends []string     `tfsdk:"mcs_backends"`
	CAFile      types.String `tfsdk:"ca_file"`
	DNS         types.Bool   `tfsdk:"dns"`
	PID         types.Int64  `tfsdk:"pid"`
	State       types.String `tfsdk:"state"`
}

// APIService is the name of the API's service in the load balancer's
// configuration (and in its health status).
const APIService = "api"

// config returns the lb configuration for the model.
func (m *loadBalancerModel) config() *lb.Config {
	var dns *lb.DNS
	if m.DNS.ValueBool() {
		dns = &lb.DNS{}
	}
	return &lb.Config{
		DNS:    dns,
		Listen: m.Listen.ValueString(),
		Services: []lb.Service{
			{Name: APIService, Port: int(m.APIPort.ValueInt64()), Backends: m.APIBackends,
				Health: lb.CheckHTTPS, HealthPath: "/readyz", CAFile: m.CAFile.ValueString()},
			{Name: "machine-config", Port: int(m.MCSPort.ValueInt64()), Backends: m.MCSBackends, Health: lb.CheckTCP},
		},
	}
}

// process returns the lb process of the model, its files in <lb_dir>/<name>.
func (r *loadBalancerResource) process(m *loadBalancerModel) lb.Process {
	return lb.ProcessIn(r.b.Kiln, r.b.daemonDir(m.Name))
}

// Metadata implements resource.Resource.
func (r *loadBalancerResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_load_balancer"
}

// Schema implements resource.Resource.
func (r *loadBalancerResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	str := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	port := []planmodifier.Int64{int64planmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Version:     stateSchemaVersion,
		Description: "The API load balancer: a `kiln lb` process on the host balancing the API (HTTPS /readyz checks) and the machine-config server (TCP checks).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The load balancer name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name":     schema.StringAttribute{Required: true, PlanModifiers: str, Description: "Name; its files are in <lb_dir>/<name>."},
			"listen":   schema.StringAttribute{Required: true, PlanModifiers: str, Description: "Address listened on: the bridge gateway, the API VIP."},
			"api_port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(APIPort), PlanModifiers: port},
			"mcs_port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(nodelayout.MCSPort), PlanModifiers: port},
			"api_backends": schema.ListAttribute{Required: true, ElementType: types.StringType,
				Description: "Addresses of the API servers (bootstrap and masters)."},
			"mcs_backends": schema.ListAttribute{Required: true, ElementType: types.StringType,
				Description: "Addresses of the machine-config servers."},
			"ca_file": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(""),
				Description: "CA bundle the API health check verifies with; unverified when empty."},
			"dns": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Forward DNS queries on listen:53 to the host's resolvers: the machines' resolver with networking.egress NAT."},
			"pid":   schema.Int64Attribute{Computed: true, Description: "Process id of the load balancer."},
			"state": tfstate.Attribute("load balancer"),
		},
	}
}

// UpgradeState implements resource.ResourceWithUpgradeState: version 0
// had running (a bool) where state is.
func (r *loadBalancerResource) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	return runningToState()
}

// Configure implements resource.ResourceWithConfigure.
func (r *loadBalancerResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.b = configureBackend(req, resp)
}

// writeConfig validates and writes the model's configuration file.
func (r *loadBalancerResource) writeConfig(m *loadBalancerModel) (lb.Process, error) {
	p := r.process(m)
	cfg := m.config()
	if err := cfg.Validate(); err != nil {
		return p, err
	}
	if err := os.MkdirAll(filepath.Dir(p.ConfigPath), 0o700); err != nil {
		return p, err
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return p, err
	}
	return p, atomicfile.Write(p.ConfigPath, data, 0o644)
}

// start writes the configuration and starts the process, or reloads it
// when it already runs.
func (r *loadBalancerResource) start(ctx context.Context, m *loadBalancerModel) error {
	p, err := r.writeConfig(m)
	if err != nil {
		return err
	}
	if pid, err := p.PID(); err == nil {
		m.PID = types.Int64Value(int64(pid))
		return p.Reload()
	}
	ctx, cancel := context.WithTimeout(ctx, lbStartTimeout)
	defer cancel()
	pid, err := p.Start(ctx)
	if err != nil {
		return err
	}
	m.PID = types.Int64Value(int64(pid))
	return nil
}

// setState writes the model's configuration and starts (or reloads) the
// process, or stops it, as the model's state says.
func (r *loadBalancerResource) setState(ctx context.Context, m *loadBalancerModel) error {
	want, err := tfstate.Desired(m.State)
	if err != nil {
		return err
	}
	if want == platforms.MachineRunning {
		return r.start(ctx, m)
	}
	p, err := r.writeConfig(m)
	if err == nil {
		err = p.Stop(ctx, lbStopTimeout)
	}
	m.PID = types.Int64Value(0)
	return err
}

// processState is the state of a process whose PID lookup returned err.
func processState(err error) platforms.MachineState {
	if err == nil {
		return platforms.MachineRunning
	}
	return platforms.MachineStopped
}

// Create implements resource.Resource.
func (r *loadBalancerResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m loadBalancerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.setState(ctx, &m); err != nil {
		addErr(&resp.Diagnostics, "create", "load balancer "+m.Name.ValueString(), err)
		return
	}
	m.ID = m.Name
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read implements resource.Resource: a load balancer whose process is dead
// but whose files are left is state = "stopped", so an apply that asks for
// running starts it again in place; one whose files are gone leaves the
// state and is created again.
func (r *loadBalancerResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m loadBalancerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p := r.process(&m)
	pid, err := p.PID()
	if err != nil {
		if _, serr := os.Stat(p.ConfigPath); serr != nil {
			resp.State.RemoveResource(ctx)
			return
		}
		pid = 0
	}
	m.PID = types.Int64Value(int64(pid))
	m.State = types.StringValue(processState(err).String())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update implements resource.Resource: new backends are written to the
// configuration and the process reloads it; a dead process is started
// again; state = "stopped" stops it, keeping its files.
func (r *loadBalancerResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m loadBalancerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.setState(ctx, &m); err != nil {
		addErr(&resp.Diagnostics, "update", "load balancer "+m.Name.ValueString(), err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete implements resource.Resource: it stops the process and removes
// its directory.
func (r *loadBalancerResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m loadBalancerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p := r.process(&m)
	err := p.Stop(ctx, lbStopTimeout)
	if err == nil {
		err = os.RemoveAll(filepath.Dir(p.ConfigPath))
	}
	if err != nil {
		addErr(&resp.Diagnostics, "delete", fmt.Sprintf("load balancer %s", m.Name.ValueString()), err)
	}
}
