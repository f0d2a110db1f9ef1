package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kiln-project/kiln/platforms/local/machine"
	"github.com/kiln-project/kiln/platforms/terraform"
)

// Address and identity of the provider.
const (
	// Source is the provider's source address in modules' required_providers.
	Source = "kiln.dev/kiln/kilnlocal"
	// TypeName prefixes the resource types (kilnlocal_machine...).
	TypeName = "kilnlocal"
	// Version is the version kiln's filesystem mirror offers; the provider
	// is always the running kiln binary, so it never changes.
	Version = "0.1.0"
	// Command is the hidden kiln subcommand that serves the provider.
	Command = "terraform-provider-kilnlocal"
)

// Defaults of the provider configuration.
const (
	// DefaultImageDir is the default node image.
	DefaultImageDir = "/var/lib/kiln/images/node"
	// DefaultLBDir is the default directory of load balancer files.
	DefaultLBDir = "/var/lib/kiln/lb"
)

var _ provider.Provider = (*Provider)(nil)

// Provider is the kilnlocal provider.
type Provider struct {
	factory Factory
}

// New returns a function creating the provider with factory, as
// providerserver expects.
func New(factory Factory) func() provider.Provider {
	return func() provider.Provider { return &Provider{factory: factory} }
}

// Serve serves the provider over the plugin protocol 6 on stdin/stdout, as
// Terraform and OpenTofu start it; it returns when the engine is done.
func Serve(ctx context.Context, factory Factory) error {
	return providerserver.Serve(ctx, New(factory), providerserver.ServeOpts{
		Address:         Source,
		ProtocolVersion: 6,
	})
}

// providerModel is the provider block.
type providerModel struct {
	MachineDir types.String `tfsdk:"machine_dir"`
	ImageDir   types.String `tfsdk:"image_dir"`
	LBDir      types.String `tfsdk:"lb_dir"`
}

// Metadata implements provider.Provider.
func (p *Provider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = TypeName
	resp.Version = Version
}

// Schema implements provider.Provider.
func (p *Provider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Machines (systemd-nspawn containers), bridges, the API load balancer, the LoadBalancer Service controller and the image registry of kiln's local platform.",
		Attributes: map[string]schema.Attribute{
			"machine_dir": schema.StringAttribute{Optional: true,
				Description: "State root of machines; default " + machine.DefaultStateRoot + "."},
			"image_dir": schema.StringAttribute{Optional: true,
				Description: "Node image used by machines that name none; default " + DefaultImageDir + "."},
			"lb_dir": schema.StringAttribute{Optional: true,
				Description: "Directory of load balancer configuration, pid and log files; default " + DefaultLBDir + "."},
		},
	}
}

// Configure implements provider.Provider: it builds the Backend.
func (p *Provider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	s := Settings{
		MachineDir: stringOr(m.MachineDir, machine.DefaultStateRoot),
		ImageDir:   stringOr(m.ImageDir, DefaultImageDir),
		LBDir:      stringOr(m.LBDir, DefaultLBDir),
	}
	b, err := p.factory(s)
	if err != nil {
		resp.Diagnostics.AddError("kilnlocal provider", err.Error())
		return
	}
	resp.ResourceData = b
}

// stringOr returns v's value, or def when v is null, unknown or empty.
func stringOr(v types.String, def string) string {
	if v.IsNull() || v.IsUnknown() || v.ValueString() == "" {
		return def
	}
	return v.ValueString()
}

// Resources implements provider.Provider.
func (p *Provider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		func() resource.Resource { return &networkResource{} },
		func() resource.Resource { return &machineResource{} },
		func() resource.Resource { return &loadBalancerResource{} },
		func() resource.Resource { return &serviceLBResource{} },
		func() resource.Resource { return &registryResource{} },
	}
}

// DataSources implements provider.Provider; there are none.
func (p *Provider) DataSources(context.Context) []func() datasource.DataSource {
	return nil
}

// backendFrom returns the Backend given to a resource's Configure, or nil
// before the provider is configured (validation).
func backendFrom(data any) (*Backend, bool) {
	if data == nil {
		return nil, true
	}
	b, ok := data.(*Backend)
	return b, ok
}

// TerraformProvider describes the provider for terraform.WriteCLIConfig and
// terraform.DriverOptions: served by `<kiln> --dir <clusterDir>
// terraform-provider-kilnlocal`, so its debug log joins the cluster's.
func TerraformProvider(kiln, clusterDir string) terraform.Provider {
	return terraform.Provider{
		Source:  Source,
		Version: Version,
		Command: []string{kiln, "--dir", clusterDir, Command},
	}
}
