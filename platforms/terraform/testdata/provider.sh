#!/bin/sh
# Written by kiln: the provider is served by the kiln binary.
exec env 'A=1' 'B=2' '/opt/it'\''s kiln/kiln' 'terraform-provider-kilnlocal' "$@"
