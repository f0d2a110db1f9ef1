package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kiln-project/kiln/platforms/ssh/footprint"
	"github.com/kiln-project/kiln/platforms/ssh/remote"
	"github.com/kiln-project/kiln/platforms/terraform"
)

// Address and identity of the provider.
const (
	// Source is the provider's source address in modules' required_providers.
	Source = "kiln.dev/kiln/kilnssh"
	// TypeName prefixes the resource types (kilnssh_host).
	TypeName = "kilnssh"
	// Version is the version kiln's filesystem mirror offers; the provider
	// is always the running kiln binary, so it never changes.
	Version = "0.1.0"
	// Command is the hidden kiln subcommand that serves the provider.
	Command = "terraform-provider-kilnssh"
)

// Factory makes what reaches the hosts from the provider block's settings.
type Factory func(remote.Config) (footprint.Host, error)

// SSHFactory reaches the hosts over SSH (remote.Client).
func SSHFactory(cfg remote.Config) (footprint.Host, error) {
	return remote.New(cfg)
}

var _ provider.Provider = (*Provider)(nil)

// Provider is the kilnssh provider.
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
	return providerserver.Serve(ctx, New(factory), providerserver.ServeOpts{Address: Source, ProtocolVersion: 6})
}

// TerraformProvider describes the provider for terraform.DriverOptions:
// served by `<kiln> --dir <clusterDir> terraform-provider-kilnssh`, so its
// debug log joins the cluster's.
func TerraformProvider(kiln, clusterDir string) terraform.Provider {
	return terraform.Provider{Source: Source, Version: Version, Command: []string{kiln, "--dir", clusterDir, Command}}
}

// providerModel is the provider block.
type providerModel struct {
	User           types.String `tfsdk:"user"`
	IdentityFile   types.String `tfsdk:"identity_file"`
	KnownHostsFile types.String `tfsdk:"known_hosts_file"`
	Port           types.Int64  `tfsdk:"port"`
	Bastion        types.String `tfsdk:"bastion"`
}

// Metadata implements provider.Provider.
func (p *Provider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = TypeName
	resp.Version = Version
}

// Schema implements provider.Provider.
func (p *Provider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The user's hosts, reached over SSH, that kiln installs a cluster onto and resets on destroy.",
		Attributes: map[string]schema.Attribute{
			"user":             schema.StringAttribute{Required: true, Description: "Login user; another than root runs kiln's scripts through sudo -n."},
			"identity_file":    schema.StringAttribute{Optional: true, Description: "Private key file; the agent at $SSH_AUTH_SOCK when unset."},
			"known_hosts_file": schema.StringAttribute{Required: true, Description: "The hosts' (and the bastion's) keys; a host whose key is not there is refused."},
			"port":             schema.Int64Attribute{Optional: true, Description: "The hosts' SSH port; 22 when unset."},
			"bastion":          schema.StringAttribute{Optional: true, Description: "host[:port] of a jump host, reached with the same user and key."},
		},
	}
}

// Configure implements provider.Provider.
func (p *Provider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	host, err := p.factory(remote.Config{
		User:           m.User.ValueString(),
		IdentityFile:   m.IdentityFile.ValueString(),
		KnownHostsFile: m.KnownHostsFile.ValueString(),
		Port:           int(m.Port.ValueInt64()),
		Bastion:        m.Bastion.ValueString(),
	})
	if err != nil {
		resp.Diagnostics.AddError("kilnssh provider", err.Error())
		return
	}
	resp.ResourceData = host
}

// Resources implements provider.Provider.
func (p *Provider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &hostResource{} }}
}

// DataSources implements provider.Provider; there are none.
func (p *Provider) DataSources(context.Context) []func() datasource.DataSource {
	return nil
}

// hostFrom returns the Host given to a resource's Configure, or nil before
// the provider is configured (validation).
func hostFrom(data any) (footprint.Host, error) {
	if data == nil {
		return nil, nil
	}
	h, ok := data.(footprint.Host)
	if !ok {
		return nil, fmt.Errorf("unexpected provider data %T", data)
	}
	return h, nil
}
