package tfstate

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestDesiredValidator(t *testing.T) {
	for _, tt := range []struct {
		v    types.String
		fail bool
	}{
		{types.StringValue("running"), false},
		{types.StringValue("stopped"), false},
		{types.StringValue("absent"), true},
		{types.StringValue("Running"), true},
		{types.StringValue(""), true},
		{types.StringNull(), false},
		{types.StringUnknown(), false},
	} {
		var resp validator.StringResponse
		DesiredValidator{}.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("state"), ConfigValue: tt.v}, &resp)
		if resp.Diagnostics.HasError() != tt.fail {
			t.Errorf("state %s: diagnostics %v, want an error: %v", tt.v, resp.Diagnostics, tt.fail)
		}
	}
}
