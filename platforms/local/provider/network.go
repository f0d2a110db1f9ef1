package provider

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var (
	_ resource.Resource                   = (*networkResource)(nil)
	_ resource.ResourceWithConfigure      = (*networkResource)(nil)
	_ resource.ResourceWithValidateConfig = (*networkResource)(nil)
)

// networkResource is kilnlocal_network: a host bridge carrying the host's
// address of the machine network.
type networkResource struct {
	b *Backend
}

// networkModel is the resource's data.
type networkModel struct {
	ID      types.String `tfsdk:"id"`
	Name    types.String `tfsdk:"name"`
	CIDR    types.String `tfsdk:"cidr"`
	Gateway types.String `tfsdk:"gateway"`
	// EgressNAT masquerades the network out of the host (networking.egress NAT).
	EgressNAT types.Bool `tfsdk:"egress_nat"`
}

// gatewayCIDR returns the host address with the network's prefix length,
// e.g. "10.66.0.1/24", checking that it lies in the network.
func (m networkModel) gatewayCIDR() (string, error) {
	pfx, err := netip.ParsePrefix(m.CIDR.ValueString())
	if err != nil {
		return "", fmt.Errorf("cidr: %w", err)
	}
	gw, err := netip.ParseAddr(m.Gateway.ValueString())
	if err != nil {
		return "", fmt.Errorf("gateway: %w", err)
	}
	if !pfx.Contains(gw) || gw == pfx.Masked().Addr() {
		return "", fmt.Errorf("gateway %s is not a host address of %s", gw, pfx)
	}
	return netip.PrefixFrom(gw, pfx.Bits()).String(), nil
}

// Metadata implements resource.Resource.
func (r *networkResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_network"
}

// Schema implements resource.Resource.
func (r *networkResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A host bridge for machines, with the host's address on it. Machines reach each other and the host only, unless egress_nat: then the host masquerades the network out of its other interfaces.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The bridge name.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name":    schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "Bridge interface name (at most 15 characters)."},
			"cidr":    schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "Machine network, e.g. 10.66.0.0/24."},
			"gateway": schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "Host address on the bridge, e.g. 10.66.0.1 (also the API VIP)."},
			"egress_nat": schema.BoolAttribute{Optional: true, PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplace()},
				Description: "Masquerade the network out of the host's other interfaces, with forwarding turned on for the bridge and the host's uplinks only (networking.egress NAT); the machines then route through gateway."},
		},
	}
}

// Configure implements resource.ResourceWithConfigure.
func (r *networkResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.b = configureBackend(req, resp)
}

// ValidateConfig implements resource.ResourceWithValidateConfig.
func (r *networkResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m networkModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.CIDR.IsUnknown() || m.Gateway.IsUnknown() {
		return
	}
	if _, err := m.gatewayCIDR(); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("gateway"), "Invalid network", err.Error())
	}
}

// Create implements resource.Resource.
func (r *networkResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m networkModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	gw, err := m.gatewayCIDR()
	if err == nil {
		err = r.b.Networks.EnsureBridge(ctx, m.Name.ValueString(), gw)
	}
	if err == nil && m.EgressNAT.ValueBool() {
		var network netip.Prefix
		if network, err = netip.ParsePrefix(gw); err == nil {
			err = r.b.Networks.EnableEgress(ctx, m.Name.ValueString(), network.Masked())
		}
	}
	if err != nil {
		addErr(&resp.Diagnostics, "create", "bridge "+m.Name.ValueString(), err)
		return
	}
	m.ID = m.Name
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read implements resource.Resource: a bridge that is gone, or whose NAT
// is (a host reboot), leaves the state, so the next apply creates it
// again.
func (r *networkResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m networkModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ok, err := r.b.Networks.BridgeExists(ctx, m.Name.ValueString())
	if err != nil {
		addErr(&resp.Diagnostics, "read", "bridge "+m.Name.ValueString(), err)
		return
	}
	if ok && m.EgressNAT.ValueBool() {
		ok, err = r.b.Networks.EgressEnabled(ctx, m.Name.ValueString())
		if err != nil {
			addErr(&resp.Diagnostics, "read", "egress of bridge "+m.Name.ValueString(), err)
			return
		}
	}
	if !ok {
		resp.State.RemoveResource(ctx)
	}
}

// Update implements resource.Resource; it is never planned.
func (r *networkResource) Update(_ context.Context, _ resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.AddError("update kilnlocal_network", errReplaceOnly)
}

// Delete implements resource.Resource.
func (r *networkResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m networkModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The NAT goes first, whether or not the state says it was on: a
	// create killed halfway may have set it up.
	if err := r.b.Networks.DisableEgress(ctx, m.Name.ValueString()); err != nil {
		addErr(&resp.Diagnostics, "delete", "egress of bridge "+m.Name.ValueString(), err)
		return
	}
	if err := r.b.Networks.DeleteBridge(ctx, m.Name.ValueString()); err != nil {
		addErr(&resp.Diagnostics, "delete", "bridge "+m.Name.ValueString(), err)
	}
}
