package provider

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/lb"
	"github.com/kiln-project/kiln/platforms/local/registry"
	"github.com/kiln-project/kiln/platforms/tfstate"
)

var (
	_ resource.Resource              = (*registryResource)(nil)
	_ resource.ResourceWithConfigure = (*registryResource)(nil)
)

// registryResource is kilnlocal_registry: the cluster's image registry
// (the registry add-on), a detached distribution registry beside the API
// load balancer, its configuration and storage in <lb_dir>/<name>
// (package registry). Its address, binary and state change in place: the
// storage stays until the resource is deleted.
type registryResource struct {
	b *Backend
}

// registryModel is the resource's data.
type registryModel struct {
	ID     types.String `tfsdk:"id"`
	Name   types.String `tfsdk:"name"`
	Listen types.String `tfsdk:"listen"`
	Port   types.Int64  `tfsdk:"port"`
	Binary types.String `tfsdk:"binary"`
	State  types.String `tfsdk:"state"`
}

// addr returns the address the nodes pull from: listen at port.
func (m *registryModel) addr() (netip.AddrPort, error) {
	a, err := netip.ParseAddr(m.Listen.ValueString())
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("listen: %w", err)
	}
	p := m.Port.ValueInt64()
	if p < 1 || p > math.MaxUint16 {
		return netip.AddrPort{}, fmt.Errorf("port %d: want 1-65535", p)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

// dir is the directory of the registry's files.
func (r *registryResource) dir(m *registryModel) string {
	return r.b.daemonDir(m.Name)
}

// process is the registry's process, run from the model's binary.
func (r *registryResource) process(m *registryModel) lb.Process {
	return registry.Process(m.Binary.ValueString(), r.dir(m))
}

// Metadata implements resource.Resource.
func (r *registryResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_registry"
}

// Schema implements resource.Resource.
func (r *registryResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The image registry of the registry add-on: kiln's build of the distribution registry on the host, " +
			"pulled from by the nodes at listen:port and pushed to from the host at 127.0.0.1:port; its storage is kept " +
			"while it is stopped and removed when the resource is destroyed.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The registry's name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description: "Name; its files and storage are in <lb_dir>/<name>, beside the API load balancer's."},
			"listen": schema.StringAttribute{Required: true,
				Description: "Host address on the bridge (the API VIP) the nodes pull from. Changes in place: a running registry is restarted, its storage kept."},
			"port": schema.Int64Attribute{Required: true,
				Description: "TCP port, on listen and on 127.0.0.1. Changes in place like listen."},
			"binary": schema.StringAttribute{Required: true,
				Description: "Host path of the registry binary (kiln's build, in kiln's cache). Changes in place: the next start runs it."},
			"state": tfstate.Attribute("registry"),
		},
	}
}

// Configure implements resource.ResourceWithConfigure.
func (r *registryResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.b = configureBackend(req, resp)
}

// setState writes the registry's configuration (and creates its storage),
// then starts or stops it as the model's state says (a stop of one that
// does not run only removes a stale pid file). A registry that runs is
// left alone, unless restart: then it is stopped first, so that it serves
// the configuration just written.
func (r *registryResource) setState(ctx context.Context, m *registryModel, restart bool) error {
	want, err := tfstate.Desired(m.State)
	if err != nil {
		return err
	}
	addr, err := m.addr()
	if err != nil {
		return err
	}
	p := r.process(m)
	_, err = p.PID()
	running := err == nil
	if want == platforms.MachineStopped || (running && restart) {
		if err := p.Stop(ctx, lbStopTimeout); err != nil {
			return err
		}
		running = false
	}
	if err := registry.WriteConfig(r.dir(m), addr); err != nil {
		return err
	}
	if want == platforms.MachineStopped || running {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, lbStartTimeout)
	defer cancel()
	return registry.Start(ctx, p, addr.Port())
}

// Create implements resource.Resource. A registry found running in its
// directory is none that Terraform knows of (one left by a create killed
// before its state was saved, say): it is restarted, so what runs is what
// the configuration says. Storage left in the directory is the cluster's
// own and is kept.
func (r *registryResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m registryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.setState(ctx, &m, true); err != nil {
		addErr(&resp.Diagnostics, "create", "image registry "+m.Name.ValueString(), err)
		return
	}
	m.ID = m.Name
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read implements resource.Resource: state is whether the process runs,
// listen and port what its configuration says; a registry whose
// configuration is gone leaves the state and is created again.
func (r *registryResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m registryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	addr, err := registry.ReadAddr(r.dir(&m))
	if errors.Is(err, fs.ErrNotExist) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addErr(&resp.Diagnostics, "read", "image registry "+m.Name.ValueString(), err)
		return
	}
	m.Listen = types.StringValue(addr.Addr().String())
	m.Port = types.Int64Value(int64(addr.Port()))
	_, err = r.process(&m).PID()
	m.State = types.StringValue(processState(err).String())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update implements resource.Resource: the configuration is written
// again and the process started or stopped as state says; a new address
// restarts a running registry.
func (r *registryResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m, old registryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &old)...)
	if resp.Diagnostics.HasError() {
		return
	}
	moved := !m.Listen.Equal(old.Listen) || !m.Port.Equal(old.Port)
	if err := r.setState(ctx, &m, moved); err != nil {
		addErr(&resp.Diagnostics, "update", "image registry "+m.Name.ValueString(), err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete implements resource.Resource: it stops the process, then removes
// its configuration, pid file, log and storage; the directory stays to the
// API load balancer, which the modules delete after the registry.
func (r *registryResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m registryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	err := r.process(&m).Stop(ctx, lbStopTimeout)
	if err == nil {
		err = registry.Remove(r.dir(&m))
	}
	if err != nil {
		addErr(&resp.Diagnostics, "delete", "image registry "+m.Name.ValueString(), err)
	}
}
