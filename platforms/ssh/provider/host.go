package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kiln-project/kiln/platforms"
	"github.com/kiln-project/kiln/platforms/ssh/footprint"
	"github.com/kiln-project/kiln/platforms/tfstate"
)

var (
	_ resource.Resource              = (*hostResource)(nil)
	_ resource.ResourceWithConfigure = (*hostResource)(nil)
)

// hostResource is kilnssh_host: one of the user's hosts running one
// machine's Ignition config.
type hostResource struct {
	h footprint.Host
}

// hostModel is the resource's data.
type hostModel struct {
	ID       types.String `tfsdk:"id"`
	Name     types.String `tfsdk:"name"`
	Address  types.String `tfsdk:"address"`
	Ignition types.String `tfsdk:"ignition"`
	Env      types.Map    `tfsdk:"env"`
	Payload  types.String `tfsdk:"payload"`
	APIProxy types.String `tfsdk:"api_proxy"`
	NTP      types.List   `tfsdk:"ntp_servers"`
	State    types.String `tfsdk:"state"`
}

// Metadata implements resource.Resource.
func (r *hostResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_host"
}

// Schema implements resource.Resource. Every attribute but state forces
// replacement: a host is installed once, and replacing it resets it
// first. state changes in place: "stopped" stops the node on the host
// (its units and pods, kept disabled across the host's reboots), keeping
// everything kiln put there; "running" starts it again. Read reports
// the node's state from the host's record.
func (r *hostResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	str := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "One of the user's hosts, installed over SSH with one machine's Ignition config and the node payload, and reset to how it was on delete.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The host's address.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name":    schema.StringAttribute{Required: true, PlanModifiers: str, Description: "The host's name in kiln's messages."},
			"address": schema.StringAttribute{Required: true, PlanModifiers: str, Description: "Where the host answers SSH (IP address or name)."},
			"ignition": schema.StringAttribute{Required: true, Sensitive: true, PlanModifiers: str,
				Description: "The machine's Ignition config, applied by kiln-ignition.service."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				Description:   "Written to /etc/kiln/node.env."},
			"api_proxy": schema.StringAttribute{Optional: true, PlanModifiers: str,
				Description: "The configuration of the host's proxy to the API and machine-config servers (kiln lb's JSON), which every component of the node reaches them through; no proxy when unset."},
			"ntp_servers": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
				Description:   "The time servers the host's NTP client (chrony or systemd-timesyncd) is given before the install, which waits until the host's clock is synchronised; the host's time configuration is left alone when unset."},
			"payload": schema.StringAttribute{Required: true, PlanModifiers: str,
				Description: "The node payload's directory on the machine running kiln (nodeimage.Image.WriteSysext); its name is the extension's on the host."},
			"state": tfstate.Attribute("node on the host"),
		},
	}
}

// Configure implements resource.ResourceWithConfigure.
func (r *hostResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	h, err := hostFrom(req.ProviderData)
	if err != nil {
		resp.Diagnostics.AddError("kilnssh provider", err.Error())
		return
	}
	r.h = h
}

// Create implements resource.Resource.
func (r *hostResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m hostModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	env := map[string]string{}
	if !m.Env.IsNull() {
		resp.Diagnostics.Append(m.Env.ElementsAs(ctx, &env, false)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	var ntp []string
	if !m.NTP.IsNull() {
		resp.Diagnostics.Append(m.NTP.ElementsAs(ctx, &ntp, false)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	name, address := m.Name.ValueString(), m.Address.ValueString()
	var reported int64
	err := footprint.Install(ctx, r.h, footprint.Machine{
		Address: address, Ignition: []byte(m.Ignition.ValueString()), Env: env, Payload: m.Payload.ValueString(),
		APIProxy: []byte(m.APIProxy.ValueString()), NTPServers: ntp,
		Note: func(msg string) { tflog.Info(ctx, fmt.Sprintf("host %s: %s", name, msg)) },
		Sent: func(n int64) {
			if n-reported >= 100<<20 {
				reported = n
				tflog.Info(ctx, fmt.Sprintf("host %s: %d MB of the node payload sent", name, n>>20))
			}
		},
	})
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("installing host %s (%s)", name, address), err.Error())
		return
	}
	// A host planned stopped from the start (one reset by hand while
	// kiln stop cluster applies) is installed, then its node stopped.
	want, err := tfstate.Desired(m.State)
	if err == nil && want == platforms.MachineStopped {
		err = footprint.Stop(ctx, r.h, address)
	}
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("installing host %s (%s)", name, address), err.Error())
		return
	}
	m.ID = types.StringValue(address)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read implements resource.Resource: a host that no longer keeps kiln's
// record (reset by hand) leaves the state, so the next plan installs it
// again; one whose node kiln stopped is state = "stopped"; a host that
// does not answer keeps its state, with a warning.
func (r *hostResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m hostModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	st, err := footprint.State(ctx, r.h, m.Address.ValueString())
	switch {
	case err != nil:
		resp.Diagnostics.AddWarning(fmt.Sprintf("host %s (%s) not read", m.Name.ValueString(), m.Address.ValueString()), err.Error())
	case st == platforms.MachineAbsent:
		resp.State.RemoveResource(ctx)
	default:
		m.State = types.StringValue(st.String())
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

// Update implements resource.Resource: every attribute but state forces
// replacement, so an update stops or starts the node on the host.
func (r *hostResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m hostModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	want, err := tfstate.Desired(m.State)
	if err == nil {
		err = r.setState(ctx, m.Address.ValueString(), want)
	}
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("setting host %s (%s) %s", m.Name.ValueString(), m.Address.ValueString(), m.State.ValueString()), err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// setState starts the node on the host at address or stops it, as want
// says.
func (r *hostResource) setState(ctx context.Context, address string, want platforms.MachineState) error {
	switch want {
	case platforms.MachineRunning:
		return footprint.Start(ctx, r.h, address)
	case platforms.MachineStopped:
		return footprint.Stop(ctx, r.h, address)
	}
	return &platforms.StateError{Word: want.String(), Allowed: platforms.DesiredStates()}
}

// Delete implements resource.Resource.
func (r *hostResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m hostModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := footprint.Reset(ctx, r.h, m.Address.ValueString()); err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("resetting host %s (%s)", m.Name.ValueString(), m.Address.ValueString()), err.Error())
	}
}
