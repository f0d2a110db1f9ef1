package sub

// Platform is the sub platform's section.
type Platform struct {
	// Pools are its pools.
	Pools []Pool `json:"pools"`
}

// Pool is a pool of the sub platform.
type Pool struct {
	// Size is how many.
	Size int `json:"size"`
}
