package types

import (
	"github.com/kiln-project/kiln/assets/installconfig/types/sub"
)

// Config is the root.
type Config struct {
	// Platform picks one.
	Platform Platform `json:"platform"`
}

// Platform holds the sections.
type Platform struct {
	// Sub is a section in another package.
	Sub *sub.Platform `json:"sub,omitempty"`
}
