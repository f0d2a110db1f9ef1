package provider

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/local/servicelb"
	"github.com/kiln-project/kiln/platforms/tfstate"
)

var (
	_ resource.Resource              = (*serviceLBResource)(nil)
	_ resource.ResourceWithConfigure = (*serviceLBResource)(nil)
)

// serviceLBResource is kilnlocal_service_load_balancer: the cluster's
// LoadBalancer Service controller, a detached `kiln service-lb` process
// beside the API load balancer (its files in <lb_dir>/<name>). Its machines
// and state change in place: the running controller reads its machines
// again when the file changes.
type serviceLBResource struct {
	b *Backend
}

// serviceLBModel is the resource's data.
type serviceLBModel struct {
	ID         types.String      `tfsdk:"id"`
	Name       types.String      `tfsdk:"name"`
	Bridge     types.String      `tfsdk:"bridge"`
	Network    types.String      `tfsdk:"network"`
	Host       types.String      `tfsdk:"host"`
	PoolFirst  types.String      `tfsdk:"pool_first"`
	PoolLast   types.String      `tfsdk:"pool_last"`
	Machines   map[string]string `tfsdk:"machines"`
	Kubeconfig types.String      `tfsdk:"kubeconfig"`
	State      types.String      `tfsdk:"state"`
}

// config returns the controller's configuration (its kubeconfig path is
// set by servicelb.WriteFiles).
func (m *serviceLBModel) config() (servicelb.Config, error) {
	var errs []error
	addr := func(field string, v types.String) netip.Addr {
		a, err := netip.ParseAddr(v.ValueString())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
		return a
	}
	c := servicelb.Config{
		Bridge: m.Bridge.ValueString(),
		Pool:   servicelb.Pool{First: addr("pool_first", m.PoolFirst), Last: addr("pool_last", m.PoolLast)},
		Machines: servicelb.Machines{
			Host:      addr("host", m.Host),
			Addresses: map[string]netip.Addr{},
		},
	}
	network, err := netip.ParsePrefix(m.Network.ValueString())
	if err != nil {
		errs = append(errs, fmt.Errorf("network: %w", err))
	}
	c.Machines.Network = network
	for name, a := range m.Machines {
		c.Machines.Addresses[name] = addr("machines["+name+"]", types.StringValue(a))
	}
	return c, errors.Join(errs...)
}

// dir is the directory of the controller's files.
func (r *serviceLBResource) dir(m *serviceLBModel) string {
	return r.b.daemonDir(m.Name)
}

// process is the controller's process.
func (r *serviceLBResource) process(m *serviceLBModel) lb.Process {
	return servicelb.Process(r.b.Kiln, r.dir(m))
}

// Metadata implements resource.Resource.
func (r *serviceLBResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_service_load_balancer"
}

// Schema implements resource.Resource.
func (r *serviceLBResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	str := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	required := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Required: true, PlanModifiers: str, Description: desc}
	}
	resp.Schema = schema.Schema{
		Description: "The LoadBalancer Service controller: a `kiln service-lb` process on the host giving each LoadBalancer Service an address of the pool on the bridge and proxying it to the machines.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The controller's name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name":       required("Name; its files are in <lb_dir>/<name>, beside the API load balancer's."),
			"bridge":     required("Host bridge the Services' addresses are put on."),
			"network":    required("Machine network, e.g. 10.66.0.0/24."),
			"host":       required("Host address on the bridge (the API VIP): never a backend."),
			"pool_first": required("First address of the Services' pool."),
			"pool_last":  required("Last address of the Services' pool."),
			"machines": schema.MapAttribute{Required: true, ElementType: types.StringType,
				Description: "Address of each master and worker by machine name: the only backends. Changes in place."},
			"kubeconfig": schema.StringAttribute{Required: true, Sensitive: true, PlanModifiers: str,
				Description: "Admin kubeconfig the controller watches the API with; written 0600 beside its configuration."},
			"state": tfstate.Attribute("controller"),
		},
	}
}

// Configure implements resource.ResourceWithConfigure.
func (r *serviceLBResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.b = configureBackend(req, resp)
}

// setState writes the controller's files, then starts it unless it runs
// (a running controller reads its machines again by itself) or stops it,
// as the model's state says.
func (r *serviceLBResource) setState(ctx context.Context, m *serviceLBModel) error {
	want, err := tfstate.Desired(m.State)
	if err != nil {
		return err
	}
	cfg, err := m.config()
	if err != nil {
		return err
	}
	if err := servicelb.WriteFiles(r.dir(m), cfg, []byte(m.Kubeconfig.ValueString())); err != nil {
		return err
	}
	p := r.process(m)
	if want == platforms.MachineStopped {
		return p.Stop(ctx, lbStopTimeout)
	}
	if _, err := p.PID(); err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, lbStartTimeout)
	defer cancel()
	_, err = p.Start(ctx)
	return err
}

// Create implements resource.Resource. A controller that runs already
// (started by a kiln before the controller was a resource) is kept.
func (r *serviceLBResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m serviceLBModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.setState(ctx, &m); err != nil {
		addErr(&resp.Diagnostics, "create", "LoadBalancer Service controller "+m.Name.ValueString(), err)
		return
	}
	m.ID = m.Name
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read implements resource.Resource: state is whether the process runs;
// a controller whose configuration is gone leaves the state.
func (r *serviceLBResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m serviceLBModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, err := r.process(&m).PID()
	if err != nil {
		if _, serr := os.Stat(filepath.Join(r.dir(&m), servicelb.ConfigFile)); serr != nil {
			resp.State.RemoveResource(ctx)
			return
		}
	}
	m.State = types.StringValue(processState(err).String())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update implements resource.Resource: the machines are written again and
// the process started or stopped as state says.
func (r *serviceLBResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m serviceLBModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.setState(ctx, &m); err != nil {
		addErr(&resp.Diagnostics, "update", "LoadBalancer Service controller "+m.Name.ValueString(), err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete implements resource.Resource: it stops the process (which takes
// its addresses off the bridge) and removes its configuration and its copy
// of the kubeconfig.
func (r *serviceLBResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m serviceLBModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	errs := []error{r.process(&m).Stop(ctx, lbStopTimeout)}
	for _, f := range []string{servicelb.ConfigFile, servicelb.KubeconfigFile} {
		if err := os.Remove(filepath.Join(r.dir(&m), f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		addErr(&resp.Diagnostics, "delete", "LoadBalancer Service controller "+m.Name.ValueString(), err)
	}
}
