package none

// Name is the key of the none platform's section in install-config.yaml.
const Name = "none"

// Platform is user-provisioned infrastructure.
type Platform struct{}
